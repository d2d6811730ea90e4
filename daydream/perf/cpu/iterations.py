"""The iterations of a trace that the end-to-end estimate predicts and is checked on."""

from __future__ import annotations

from daydream.errors import DaydreamError
from daydream.perf.cpu.top_level_ops import top_level_items
from daydream.trace.model import Trace
from daydream.trace.steps import Step, iteration_steps, profiler_steps


def whole_iterations(trace: Trace) -> list[Step]:
    """The trace's iterations (``daydream.trace.steps.iteration_steps``) that are whole periods: windows between
    optimizer steps start at the first one's end, so the window from the trace's start to it (warm-up, profiler
    start) is dropped; ProfilerStep windows are whole as they are."""
    steps = iteration_steps(trace)
    if steps and not profiler_steps(trace):
        steps = steps[1:]
    return steps


def default_iteration(trace: Trace) -> Step:
    """The median-period iteration of the trace's whole iterations (the whole trace when it has none)."""
    steps = whole_iterations(trace)
    if not steps:
        items = top_level_items(trace)[0]
        if not items:
            raise DaydreamError(f"{trace.path}: no CPU ops or runtime calls to estimate an iteration from")
        return Step("trace", items[0].ts, max(it.end for it in items))
    ordered = sorted(steps, key=lambda s: s.end - s.start)
    return ordered[(len(ordered) - 1) // 2]
