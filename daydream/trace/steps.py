"""Which iteration(s) of a trace to simulate."""

from __future__ import annotations

import re
from dataclasses import dataclass

from daydream.errors import TraceError, did_you_mean, listed
from daydream.trace.model import Trace

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_ITERATION_RE = re.compile(r"^iteration#(\d+)$")
# torch.optim's profiler range around every optimizer step (``Optimizer.step#SGD.step``).
_OPTIMIZER_STEP_RE = re.compile(r"^Optimizer\.step#")


@dataclass(frozen=True, slots=True)
class Step:
    """A window of the trace, in absolute trace microseconds: CPU work issued in [start, end) belongs to it."""

    name: str
    start: float
    end: float


def profiler_steps(trace: Trace) -> list[Step]:
    """The ``ProfilerStep#N`` windows, in order."""
    steps = [Step(e.name, e.ts, e.ts + e.dur) for e in trace.annotations if _STEP_RE.match(e.name)]  # type: ignore[operator]
    return sorted(steps, key=lambda s: s.start)


def optimizer_iterations(trace: Trace) -> list[Step]:
    """Iterations delimited by optimizer steps, for traces recorded without a profiler schedule.

    Iteration k runs from the end of optimizer step k-1 (the trace's start for the first) to the end of optimizer
    step k, so each window holds one zero_grad, forward, backward and step. Work after the last optimizer step is an
    unfinished iteration and belongs to none. Named ``iteration#k`` from 0."""
    ends = sorted(e.ts + e.dur for e in trace.annotations if _OPTIMIZER_STEP_RE.match(e.name))  # type: ignore[operator]
    if not ends:
        return []
    start = whole_trace(trace).start
    steps = []
    for k, end in enumerate(ends):
        steps.append(Step(f"iteration#{k}", start, end))
        start = end
    return steps


def iteration_steps(trace: Trace) -> list[Step]:
    """The trace's iterations: its ``ProfilerStep#N`` windows, else the windows between optimizer steps."""
    return profiler_steps(trace) or optimizer_iterations(trace)


def whole_trace(trace: Trace) -> Step:
    """The whole trace as one window: from its first event's start to just after its last event's end."""
    starts, ends = [], []
    for name in ("cpu_ops", "annotations", "runtime", "gpu"):
        kept = trace.kept_rows(name)
        if kept is not None:  # a family kept as columns: read there, its events not made
            if kept.stop > kept.start:
                starts.append(float(trace.cpu_columns.ts[kept].min()))  # type: ignore[union-attr]
                ends.append(float((trace.cpu_columns.ts[kept] + trace.cpu_columns.dur[kept]).max()))  # type: ignore[union-attr]
            continue
        if (pending := trace.pending.get(name)) is not None:  # another family kept as columns (the GPU tasks): there
            first, last = pending.span()
            starts.append(first)
            ends.append(last)
            continue
        if fam := getattr(trace, name):
            starts.append(fam[0].ts)
            ends.append(max(e.ts + e.dur for e in fam))  # type: ignore[operator]
    if not starts:
        raise TraceError(
            f"{trace.path}: no events (no CPU ops, annotations, runtime calls or GPU activity) in the trace",
            path=trace.path,
        )
    return Step("trace", min(starts), max(ends) + 1e-3)  # type: ignore[type-var]


def default_step(steps: list[Step]) -> Step:
    """A steady-state step: not the first (warm-up effects), not the last (profiler flush); the median-length
    one of those in between."""
    if len(steps) <= 2:
        return (
            steps[-1]
            if len(steps) == 1 or steps[-1].end - steps[-1].start >= 0.5 * (steps[0].end - steps[0].start)
            else steps[0]
        )
    middle = sorted(steps[1:-1], key=lambda s: s.end - s.start)
    return middle[(len(middle) - 1) // 2]


def _no_step(trace: Trace, steps: list[Step], what: str, hint: str | None = None) -> str:
    """The error for a --step the trace does not hold, with ``hint`` (the closest name) and the steps there are."""
    have = listed([s.name for s in steps]) + ("; also 'all', 'trace' or an annotation's name" if steps else "")
    return f"{trace.path}: {what}" + (f"; {hint}" if hint else "") + f" (steps: {have})"


def select_steps(trace: Trace, step: str | int | None) -> list[Step]:
    """The windows to simulate for a ``--step`` value (see :func:`daydream.graph.build_graph`)."""
    steps = iteration_steps(trace)
    if step is None:
        return [default_step(steps)] if steps else [whole_trace(trace)]
    text = str(step).strip()
    if text == "all":
        return steps or [whole_trace(trace)]
    if text == "trace":
        return [whole_trace(trace)]
    if text.isdigit():
        text = f"{steps[0].name.split('#')[0] if steps else 'ProfilerStep'}#{text}"
    if _STEP_RE.match(text) or _ITERATION_RE.match(text):
        for s in steps:
            if s.name == text:
                return [s]
        raise TraceError(
            _no_step(trace, steps, f"no step {text} in the trace"), path=trace.path
        )  # a number off: the list says it
    named = [Step(e.name, e.ts, e.ts + e.dur) for e in trace.annotations if e.name == text]  # type: ignore[operator]
    if not named:
        raise TraceError(
            _no_step(
                trace,
                steps,
                f"no step or annotation named {text!r} in the trace",
                did_you_mean(
                    text, [*(s.name for s in steps), "all", "trace", *sorted({e.name for e in trace.annotations})]
                ),
            ),
            path=trace.path,
        )
    if len(named) > 1:
        # Repeated annotations (e.g. one per iteration) are distinct steps: name them by occurrence.
        named = [Step(f"{s.name}#{i}", s.start, s.end) for i, s in enumerate(named)]
    return named
