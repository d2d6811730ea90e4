"""The host CPU as a resource: how PyTorch's intra-op threads share its cores.

An op's work that ran across the intra-op threads (a task's ``parallel_us``, daydream.trace.intra_op) takes
``parallel_us x speedup(recorded threads) / speedup(new threads)``. ``speedup(T)`` is how much faster threaded work
runs on T threads than on one: measured on the recording's host when ``daydream record`` wrote the sidecar
(``host.thread_speedup``: 1, 2, 4, ... threads up to the cores; linear in between, flat past the cores), else
``min(T, cores) ** log2(2 x UNMEASURED_EFFICIENCY)``: each doubling of the threads, up to the cores, makes threaded
work 1.8x faster, not 2x (threads past the host's cores add no speed). A host other than the recording's (``cores``
given and not the recorded count) is priced the same way. Where neither the user nor the recording says how many cores
there are, the recorded threads are taken to be one per core (PyTorch's default). The rest of an op (dispatch,
views, kernels at or below the grain size) runs on the calling thread whatever the count.

Why 0.9 per doubling where nothing was measured: ideal scaling (2x) is a bound no host reaches (the threads share
memory bandwidth and caches, fork and join per op), and it overstated the slowdown of 2 -> 1 threads on every one of
the six programs recorded without a sidecar on the 2-core validation host (+5.5% to +30.7% of the step). The
threaded work of those programs ran 1.80-1.89x faster on two threads than on one (one, noisier, 1.44x), as the
measured change implies; 0.9 per doubling is the round figure below them. Uncertainty: a host's own efficiency varies
with its memory bandwidth per core and the program's mix (element-wise ops scale worse than GEMMs); on many cores
the figure is an extrapolation, not a measurement. The measured speedup is that of a fixed mix of GEMMs and
element-wise ops (daydream.record.host_bench), not of the program's own ops: on the validation host the mix ran
1.64-1.69x faster on two threads, the programs' threaded work 1.7-1.9x.

The efficiency is the host's more than the program's: the corpus ConvNet recorded again on another day's 2-core
host (the same ops, the same single-thread speed per element) gained 1.64x where it had gained 1.82x, a CIFAR ResNet
1.48x that day. OBSERVED_EFFICIENCY spans what programs recorded without a sidecar showed (8 programs, 2-core hosts):
the threads transform reports the factor at both ends where the host's own is not measured, and takes a user's
``efficiency`` for the recording's host in place of the default or the measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from daydream.errors import DaydreamError
from daydream.trace.recording import Recording, SidecarPart

UNMEASURED_EFFICIENCY = 0.9  # speedup per doubling of the threads over 2, where the host's own is not measured
# the lowest and highest efficiency per doubling that the threaded work of programs recorded without a sidecar showed
# on the 2-core validation hosts (threads 2 -> 1, 2026-11-25 to 27: a noisy CNN 1.44x, a ResNet 1.48x; 1.80-1.89x)
OBSERVED_EFFICIENCY = (0.72, 0.95)


def recorded_host(recording: Recording | Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(intra-op threads, usable cores) of the recording's sidecar (the struct a trace loads, or the JSON object it
    decodes from); None for what it does not say. Recordings before the sidecar had a ``host`` entry name the threads
    of a CPU device only."""
    parts = (SidecarPart, Mapping)
    if not isinstance(recording, parts):
        return None, None
    host = recording.get("host")
    device = recording.get("device")
    threads = cores = None
    if isinstance(host, parts):
        threads, cores = host.get("threads"), host.get("cores")
    if threads is None and isinstance(device, parts):
        threads = device.get("threads")

    def whole(x: Any) -> int | None:
        return x if isinstance(x, int) and not isinstance(x, bool) and x >= 1 else None

    return whole(threads), whole(cores)


def recorded_thread_speedup(recording: Recording | Mapping[str, Any] | None) -> list[tuple[float, float]] | None:
    """The sidecar's measured ``host.thread_speedup`` as sorted (threads, speedup) points starting at one thread, or
    None where the recording has none (or a malformed one: then the unmeasured default is used)."""
    parts = (SidecarPart, Mapping)
    host = recording.get("host") if isinstance(recording, parts) else None
    points = host.get("thread_speedup") if isinstance(host, parts) else None
    if not isinstance(points, (list, tuple)):
        return None
    curve = []
    for point in points:
        if not (isinstance(point, (list, tuple)) and len(point) == 2):
            return None
        t, speedup = point
        if not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in point
        ):
            return None
        curve.append((float(t), float(speedup)))
    curve.sort()
    return curve if curve and curve[0] == (1.0, 1.0) else None


def usable_cores(recorded: float, cores: float | None) -> float:
    """The cores the threads run on: ``cores`` where known, else one per recorded thread."""
    return recorded if cores is None else cores


def thread_speedup(
    threads: float,
    cores: float,
    measured: list[tuple[float, float]] | None = None,
    efficiency: float = UNMEASURED_EFFICIENCY,
) -> float:
    """How much faster threaded work runs on ``threads`` intra-op threads than on one: from the ``measured`` points
    (linear between them, the last one's past them), else ``efficiency`` per doubling up to the cores."""
    if measured is None:
        return float(min(threads, cores) ** math.log2(2 * efficiency))
    ts, speedups = zip(*measured)
    return float(np.interp(min(threads, cores), ts, speedups))


def parallel_time_factor(
    threads: float,
    recorded: float,
    cores: float | None = None,
    measured: list[tuple[float, float]] | None = None,
    efficiency: float | None = None,
) -> float:
    """Multiplier for the threaded part of the ops' time when the recording's ``recorded`` threads become ``threads``
    on a host of ``cores`` (None: as many as the recorded threads), with the host's ``measured`` speedups where known;
    ``efficiency`` (speedup per doubling, 0.5 to 1) where given, in place of both the measurement and the default."""
    if threads < 1 or recorded < 1 or threads != int(threads) or recorded != int(recorded):
        raise DaydreamError(f"intra-op threads are a whole number >= 1 (got {threads:g} and {recorded:g})")
    if cores is not None and cores < 1:
        raise DaydreamError(f"cores must be >= 1 (got {cores:g})")
    if efficiency is None:
        efficiency = UNMEASURED_EFFICIENCY
    elif 0.5 <= efficiency <= 1:
        measured = None
    else:
        raise DaydreamError(
            f"efficiency is the speedup per doubling of the threads divided by 2, from 0.5 (the second thread "
            f"gains nothing) to 1 (twice as fast) (got {efficiency:g})"
        )
    usable = usable_cores(recorded, cores)
    return thread_speedup(recorded, usable, measured, efficiency) / thread_speedup(
        threads, usable, measured, efficiency
    )
