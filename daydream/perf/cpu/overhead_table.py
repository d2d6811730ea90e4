"""The overhead table: T1..T5 of one trace (or of some of its iterations), extracted from the top-level ops its
threads ran, with the profiler-overhead correction (see :mod:`daydream.perf.cpu.overheads`)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from daydream.errors import DaydreamError
from daydream.perf.cpu.sample_stats import NO_SAMPLES, Stat, summarize
from daydream.perf.cpu.top_level_ops import Item, top_level_items
from daydream.trace.model import Trace
from daydream.trace.steps import Step

DEFAULT_CPU_EVENT_US = 2.0
DEFAULT_GPU_EVENT_US = 4.0


class Overheads(msgspec.Struct):
    """T1..T5 of one trace (or of the iterations it was extracted from): plain data, JSON via to_dict/from_dict
    (the tables sorted by name).

    ``launches``: how many launches an op most often makes (for pricing an op by name alone)."""

    t1: Stat = NO_SAMPLES
    t2: dict[str, Stat] = {}
    t3: dict[str, Stat] = {}
    t4: dict[str, Stat] = {}
    t5: dict[str, Stat] = {}
    cpu_only: dict[str, Stat] = {}
    launches: dict[str, int] = {}
    profiler_correction: bool = True
    cpu_event_us: float = DEFAULT_CPU_EVENT_US
    gpu_event_us: float = DEFAULT_GPU_EVENT_US
    source: str = ""

    @property
    def t1_us(self) -> float:
        return self.t1.mean_us

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self, order="deterministic")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overheads:
        """Raises :class:`DaydreamError` naming what is wrong with a malformed overhead table (T1 is required)."""
        try:
            if not isinstance(d, Mapping) or "t1" not in d:
                raise msgspec.ValidationError("Object missing required field `t1`")
            return msgspec.convert(d, cls)
        except msgspec.ValidationError as exc:
            raise DaydreamError(f"malformed overhead table: {exc}") from None


def extract_overheads(
    trace: Trace,
    profiler_correction: bool = True,
    cpu_event_us: float = DEFAULT_CPU_EVENT_US,
    gpu_event_us: float = DEFAULT_GPU_EVENT_US,
    steps: Sequence[Step] | None = None,
) -> Overheads:
    """T1..T5 of ``trace`` from its raw events; ``steps``: only the ops that start inside these windows (to
    extract from some iterations and predict others). ``cpu_event_us`` / ``gpu_event_us``: the profiler's cost per
    recorded CPU / GPU event, subtracted when ``profiler_correction`` (platform dependent: see the module doc)."""
    items, outside = top_level_items(trace)
    ov = overheads_of(items, outside, profiler_correction, cpu_event_us, gpu_event_us, steps)
    ov.source = trace.path + (
        f" ({len(steps)} iterations: {', '.join(s.name for s in steps)})" if steps is not None else ""
    )
    return ov


def overheads_of(
    items: Sequence[Item],
    outside: Sequence[float],
    profiler_correction: bool = True,
    cpu_event_us: float = DEFAULT_CPU_EVENT_US,
    gpu_event_us: float = DEFAULT_GPU_EVENT_US,
    steps: Sequence[Step] | None = None,
) -> Overheads:
    """:func:`extract_overheads` on units already swept by :func:`top_level_items`."""
    if steps is not None:
        items = [it for it in items if _window_of(it.ts, steps) is not None]
    c = cpu_event_us if profiler_correction else 0.0
    g = gpu_event_us if profiler_correction else 0.0
    t1: list[float] = []
    t2: dict[str, list[float]] = {}
    t3: dict[str, list[float]] = {}
    t4: dict[str, list[float]] = {}
    t5: dict[str, list[float]] = {}
    cpu_only: dict[str, list[float]] = {}
    counts: dict[str, Counter[int]] = {}

    def inside(starts: Sequence[float], lo: float, hi: float) -> int:
        return bisect.bisect_left(starts, hi) - bisect.bisect_left(starts, lo)

    for it in items:
        if it.kind == "dataloader":
            continue
        for ln in it.launches:
            if ln.kernels and not ln.waits:
                nested = max(
                    0, inside(it.inner, ln.ts, ln.end) - 1
                )  # driver calls inside it (inner holds the call too)
                t4.setdefault(ln.name, []).append(max(0.0, ln.end - ln.ts - g * ln.gpu_events - c * nested))
        if it.kind != "op":
            continue
        if not it.launches:
            cpu_only.setdefault(it.name, []).append(max(0.0, it.end - it.ts - c * len(it.inner)))
            continue
        first, last = it.launches[0], it.launches[-1]
        t2.setdefault(it.name, []).append(max(0.0, first.ts - it.ts - c * inside(it.inner, it.ts, first.ts)))
        t3.setdefault(it.name, []).append(max(0.0, it.end - last.end - c * inside(it.inner, last.end, it.end)))
        for a, b in zip(it.launches, it.launches[1:]):
            t5.setdefault(it.name, []).append(max(0.0, b.ts - a.end - c * inside(it.inner, a.end, b.ts)))
        counts.setdefault(it.name, Counter())[sum(1 for ln in it.launches if ln.kernels)] += 1
    for a, b in zip(items, items[1:]):
        gap = b.ts - a.end
        if a.kind == "dataloader" or b.kind == "dataloader" or gap < 0:
            continue  # data loading's Python tail is not an op overhead; a negative gap is two threads at once
        if steps is not None and _window_of(a.ts, steps) != _window_of(b.ts, steps):
            continue
        t1.append(max(0.0, gap - c * inside(outside, a.end, b.ts)))

    def table(d: dict[str, list[float]]) -> dict[str, Stat]:
        return {k: summarize(v) for k, v in d.items()}

    return Overheads(
        t1=summarize(t1),
        t2=table(t2),
        t3=table(t3),
        t4=table(t4),
        t5=table(t5),
        cpu_only=table(cpu_only),
        launches={k: v.most_common(1)[0][0] for k, v in counts.items()},
        profiler_correction=profiler_correction,
        cpu_event_us=cpu_event_us,
        gpu_event_us=gpu_event_us,
    )


def _window_of(ts: float, steps: Sequence[Step]) -> int | None:
    for i, s in enumerate(steps):
        if s.start <= ts < s.end:
            return i
    return None
