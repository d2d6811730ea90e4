"""How much faster this host runs PyTorch's threaded CPU work on T intra-op threads than on one, measured when a
recording ends (the sidecar's ``host.thread_speedup``; :mod:`daydream.perf.cpu.host` prices `threads` with it).

Ideal scaling (T threads, T times faster, up to the cores) is what a model assumes without a measurement; real hosts
fall short of it (memory bandwidth and caches are shared, threads fork and join per op), and by how much depends on
the host. The measurement is a fixed mix of the ops training spends its threaded time in: two GEMMs of the sizes of
small layers (matrix products dominate the threaded time of most CPU training) and three element-wise ops over 64K
elements (past PyTorch's grain size of 32768, where element-wise ops start to use the threads; far larger ones scale
better, even superlinearly where they fit the cores' caches only once split), outputs allocated as a training step's
are. Each thread count runs the mix the same number of times; the median of several timings is taken. It takes about
0.2 s on 2 cores.

Uncertainty: the program's own ops scale like the mix only to the extent they resemble it (on the validation host, 2
cores: the mix 1.7x at 2 threads, the training step's threaded work 1.5-1.9x by phase and recording session). In a
job of several processes on one host, each rank measures while the others may still run.
"""

from __future__ import annotations

import statistics
import time

import torch

REPEATS = 7  # timings per thread count (the median is kept)
ROUNDS = 16  # runs of the mix per timing


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to ``cores``, and ``cores`` itself."""
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return [*counts, max(cores, 1)]


def measure_thread_speedup(cores: int) -> list[tuple[int, float]]:
    """[(threads, speedup over one thread)] for :func:`thread_counts` of ``cores``; torch's thread count is restored."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(256, 256, generator=gen), torch.rand(256, 256, generator=gen)
    rows, bias = torch.rand(128, 256, generator=gen), torch.rand(256, generator=gen)
    small = [torch.rand(256, 256, generator=gen) + 0.5 for _ in range(3)]

    def mix() -> None:
        # outputs allocated, as a training step's ops allocate theirs
        torch.mm(a, b)
        torch.addmm(bias, rows, b)
        torch.mul(small[0], small[1])
        torch.sqrt(small[0])
        small[2].addcmul_(small[0], small[1], value=0.1)

    before = torch.get_num_threads()
    times: dict[int, float] = {}
    try:
        for threads in thread_counts(cores):
            torch.set_num_threads(threads)
            mix()  # warm: the thread pool at this size, the caches
            samples = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                for _ in range(ROUNDS):
                    mix()
                samples.append(time.perf_counter() - start)
            times[threads] = statistics.median(samples)
    finally:
        torch.set_num_threads(before)
    one = times[1]
    return [(t, round(one / s, 3)) for t, s in times.items()]
