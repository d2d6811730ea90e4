"""How well the end-to-end estimate predicts a trace's own iterations, each from the overheads of the other half."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from daydream.errors import DaydreamError
from daydream.perf.cpu.end_to_end import KernelTime, run_algorithm
from daydream.perf.cpu.iterations import whole_iterations
from daydream.perf.cpu.overhead_table import overheads_of
from daydream.perf.cpu.top_level_ops import top_level_items
from daydream.perf.trust.accuracy import Accuracy, gmae
from daydream.trace.load import load_trace
from daydream.trace.model import Trace


@dataclass(frozen=True)
class IterationCheck:
    """One iteration predicted from overheads extracted from the *other* iterations of its trace.

    ``data_loading_us``: traced data-loading time in the iteration, an input of the estimate (not predicted)."""

    step: str
    measured_us: float
    predicted_us: float  # the paper's single pass from idle
    period_us: float  # the repeated iteration's period: what measured_us measures
    measured_active_us: float  # traced kernel time of the work the iteration launched
    predicted_active_us: float
    data_loading_us: float
    cpu_us: float
    gpu_us: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.period_us - self.measured_us) / self.measured_us


def check_iterations(
    trace: Trace, profiler_correction: bool = False, model_waits: bool = True, kernel_us: KernelTime | None = None
) -> list[IterationCheck]:
    """Two-fold check: overheads from the even-numbered iterations predict the odd ones and vice versa, so no
    iteration is predicted from its own overheads. Needs two whole iterations.

    ``profiler_correction`` defaults to off here: the measured iterations were profiled, so overheads cleaned of
    the profiler's cost would predict a faster, unprofiled run than the one they are compared with."""
    steps = whole_iterations(trace)
    if len(steps) < 2:
        raise DaydreamError(
            f"{trace.path}: {len(steps)} whole iteration(s); checking the estimate needs two, to extract overheads from"
            " one and predict the other"
        )
    items, outside = top_level_items(trace)
    checks: list[IterationCheck] = []
    for fit, test in ((steps[0::2], steps[1::2]), (steps[1::2], steps[0::2])):
        ov = overheads_of(items, outside, profiler_correction, steps=fit)
        for s in test:
            window = [it for it in items if s.start <= it.ts < s.end]
            e = run_algorithm(window, ov, kernel_us, model_waits, s.end - s.start, s.name)
            traced = sum(k.duration_us for it in window for ln in it.launches for k in ln.kernels)
            loading = sum(it.end - it.ts for it in window if it.kind == "dataloader")
            checks.append(
                IterationCheck(
                    s.name,
                    s.end - s.start,
                    e.predicted_us,
                    e.period_us,
                    traced,
                    e.gpu_active_us,
                    loading,
                    e.cpu_us,
                    e.gpu_us,
                )
            )
    order = {s.name: i for i, s in enumerate(steps)}
    checks.sort(key=lambda c: order[c.step])
    return checks


def accuracy(trace_paths: Iterable[str | Path], profiler_correction: bool = False) -> list[Accuracy]:
    """E2E error of Algorithm 1 on each trace: GMAE over its whole iterations of the predicted period against the
    traced one, each iteration predicted from the overheads of the other half (:func:`check_iterations`), with the
    traced kernel times (so the error is the overhead model's and the algorithm's, not a kernel model's)."""
    results = []
    for path in trace_paths:
        checks = check_iterations(load_trace(path), profiler_correction=profiler_correction)
        stem = Path(path).name.removesuffix(".gz").removesuffix(".json")
        results.append(
            Accuracy(
                f"e2e-overheads/{stem}",
                gmae([c.period_us for c in checks], [c.measured_us for c in checks]),
                len(checks),
                f"{path}: iteration periods, each predicted from T1..T5 of the other half (even/odd) of the iterations",
            )
        )
    return results
