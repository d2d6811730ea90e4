"""The host CPU as a resource: how PyTorch's intra-op threads share its cores.

An op's work that ran across the intra-op threads (a task's ``parallel_us``, daydream.trace.intra_op) takes
``parallel_us x speedup(recorded threads) / speedup(new threads)``, where ``speedup(T) = min(T, cores)``: threads past
the host's cores add no speed, and each thread up to them runs its share of the elements. Where neither the user nor
the recording says how many cores there are, the recorded threads are taken to be one per core (PyTorch's default).
The rest of an op (dispatch, views, kernels at or below the grain size) runs on the calling thread whatever the count.

Uncertainty: ideal scaling of the threaded part. Measured on a 2-core host (validation/, threads 2 -> 1), the
threaded ops ran 1.6-1.9x slower on one thread, not 2x (memory bandwidth and caches are shared), so the model
overstates that slowdown by about 5% of the step there; past the memory bandwidth of a many-core host it
overstates the gain of more threads more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daydream.errors import DaydreamError
from daydream.trace.recording import Recording, SidecarPart


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


def usable_cores(recorded: float, cores: float | None) -> float:
    """The cores the threads run on: ``cores`` where known, else one per recorded thread."""
    return recorded if cores is None else cores


def thread_speedup(threads: float, cores: float) -> float:
    """How much faster threaded work runs on ``threads`` intra-op threads than on one (ideal up to the cores)."""
    return float(min(threads, cores))


def parallel_time_factor(threads: float, recorded: float, cores: float | None = None) -> float:
    """Multiplier for the threaded part of the ops' time when the recording's ``recorded`` threads become ``threads``
    on a host of ``cores`` (None: as many as the recorded threads)."""
    if threads < 1 or recorded < 1 or threads != int(threads) or recorded != int(recorded):
        raise DaydreamError(f"intra-op threads are a whole number >= 1 (got {threads:g} and {recorded:g})")
    if cores is not None and cores < 1:
        raise DaydreamError(f"cores must be >= 1 (got {cores:g})")
    usable = usable_cores(recorded, cores)
    return thread_speedup(recorded, usable) / thread_speedup(threads, usable)
