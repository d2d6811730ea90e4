"""What one op or runtime call costs on the CPU by the overhead table, with the fallbacks for what the trace never
measured (see :mod:`daydream.perf.cpu.overheads`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from daydream.errors import DaydreamError
from daydream.perf.cpu.overhead_table import Overheads
from daydream.perf.cpu.sample_stats import Stat

# The paper's fixed T4 (section IV-B): used only when a trace measured no runtime call at all.
DEFAULT_LAUNCH_US = 10.0


def _pooled_median(table: Mapping[str, Stat]) -> float:
    means = [s.mean_us for s in table.values() if s.count]
    return float(statistics.median(means)) if means else 0.0


def per_op(table: Mapping[str, Stat], op: str) -> float:
    """``op``'s mean in one per-op table (T2, T3, T5, cpu_only); the pooled median of the table for an op it lacks."""
    stat = table.get(op)
    return stat.mean_us if stat is not None and stat.count else _pooled_median(table)


def launch_us(overheads: Overheads, runtime_fn: str = "cudaLaunchKernel") -> float:
    """T4 of a runtime function: its own mean; else the same call on the other vendor's runtime (``hip`` for
    ``cuda``); else the median over the functions the trace measured; else the paper's fixed 10 us."""
    t4 = overheads.t4
    for name in (runtime_fn, _other_vendor(runtime_fn)):
        stat = t4.get(name) if name else None
        if stat is not None and stat.count:
            return stat.mean_us
    return _pooled_median(t4) if any(s.count for s in t4.values()) else DEFAULT_LAUNCH_US


def _other_vendor(fn: str) -> str | None:
    if fn.startswith("cuda"):
        return "hip" + fn[4:]
    if fn.startswith("hip"):
        return "cuda" + fn[3:]
    return None


def op_overhead_us(
    overheads: Overheads, op: str, n_launches: int | None = None, runtime_fn: str = "cudaLaunchKernel"
) -> float:
    """The CPU time of one ``op`` making ``n_launches`` launches of ``runtime_fn``: T2 + T3 + (n-1) T5 + n T4, or
    the op's launch-free CPU time when n is 0. ``n_launches`` defaults to what the op most often made in the trace
    (0 for an op never seen). An op (or an overhead of it) the trace never measured takes the median over the ops
    that were measured (the pooled median of the per-op means), T4 falls back as :func:`launch_us` says."""
    n = overheads.launches.get(op, 0) if n_launches is None else n_launches
    if n < 0:
        raise DaydreamError(f"op_overhead_us: n_launches must be >= 0, got {n}")
    if n == 0:
        return per_op(overheads.cpu_only, op)
    t5 = per_op(overheads.t5, op)
    return per_op(overheads.t2, op) + per_op(overheads.t3, op) + (n - 1) * t5 + n * launch_us(overheads, runtime_fn)
