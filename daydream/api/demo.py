"""The main job on the bundled example: replay the bundled trace, then predict a few library optimizations on it.

``daydream demo`` right after install; ``run_demo(trace)`` does the same on any trace. A what-if that needs what
the trace does not hold (GPU kernels for mixed precision, a data loader for faster loading) is listed as skipped,
with the reason its script gives (its ``require``: :class:`~daydream.errors.NotApplicable`, as ``run`` says it),
rather than predicted as "no change".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import msgspec

from daydream.api.memory import MemoryChange
from daydream.api.replay import Replay, recording_device, replay_graph
from daydream.api.whatif import WhatIf, run_whatif
from daydream.dsl.library import describe_scripts
from daydream.errors import DaydreamError, NotApplicable
from daydream.graph.build import build_graph
from daydream.graph.schema import CPU_ONLY
from daydream.perf.trust.uncertainty import Interval, Paired, rank_paired
from daydream.trace import load_trace
from daydream.units import brief_repr, ms


@dataclass(frozen=True)
class Scenario:
    """One library script with its params. What a trace must hold for it to apply, the script says itself."""

    script: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return self.script + "".join(f" {k}={v}" for k, v in self.params)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("amp"),
    Scenario("fused_optimizer"),
    Scenario("cuda_graphs"),
    Scenario("dataloader", (("speedup", "4"),)),
    Scenario("batch_size", (("factor", "2"),)),
)


class DemoWhatIf(msgspec.Struct):
    """One scenario's prediction: speedup = baseline / predicted; ``throughput``: samples per second after over
    before (the speedup times the samples a step processes, which ``batch_size`` changes)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    script: str
    params: dict[str, str]
    summary: str
    baseline_us: float
    predicted_us: float
    speedup: float
    throughput: float
    interval: Interval  # the prediction's 90% interval
    versus_baseline: Paired  # faster, slower or not decided: the paired difference with the baseline
    memory: MemoryChange | None = None  # the step's peak memory before and after (daydream.api.memory)
    rank: int = 0  # by throughput: one more than the what-ifs decidedly ahead (perf.uncertainty.rank_paired)
    ties: list[str] = []  # the what-ifs it cannot be told apart from (their labels)


class DemoSkipped(msgspec.Struct):
    script: str
    params: dict[str, str]
    reason: str


class DemoReport(msgspec.Struct):
    """The demo as data: what ``daydream demo --json`` prints, in this order, and what renderers read."""

    __repr__ = brief_repr  # one screen, whatever it holds

    trace: str
    device: str | None
    device_type: str | None
    measured_us: float
    baseline_us: float
    baseline_interval: Interval  # 90%: the trace's own step-to-step noise
    breakdown: dict[str, float]
    whatifs: list[DemoWhatIf]  # by throughput, highest first
    skipped: list[DemoSkipped]
    warnings: list[str]


@dataclass
class Demo:
    """The demo: :attr:`report`, the data (what ``daydream demo --json`` prints), with the baseline's replay and each
    what-if's result that it summarises."""

    report: DemoReport
    baseline: Replay
    results: list[tuple[Scenario, WhatIf]]

    def __repr__(self) -> str:
        d = self.report
        each = ", ".join(f"{w.script} {ms(w.predicted_us)} ({w.throughput:.3f}x)" for w in d.whatifs[:6])
        return (
            f"Demo(trace={d.trace!r}, baseline {ms(d.baseline_us)}, {len(d.whatifs)} what-ifs by throughput: "
            f"{each}" + (f"; {len(d.skipped)} not applied" if d.skipped else "") + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        """:attr:`report` as JSON values."""
        return msgspec.to_builtins(self.report)


def demo_report(
    trace: str,
    baseline: Replay,
    results: list[tuple[Scenario, WhatIf]],
    skipped: list[tuple[Scenario, str]],
    summaries: dict[str, str],
) -> DemoReport:
    """The demo's data: the baseline, each what-if's prediction (``summaries``: a script's first docstring line) and
    each scenario that does not apply, with why."""
    device, device_type = recording_device(baseline.graph)
    return DemoReport(
        trace=trace,
        device=device,
        device_type=device_type,
        measured_us=baseline.measured_us,
        baseline_us=baseline.baseline_us,
        baseline_interval=baseline.interval,
        breakdown=baseline.breakdown,
        whatifs=ranked_whatifs(results, summaries),
        skipped=[DemoSkipped(s.script, dict(s.params), why) for s, why in skipped],
        warnings=baseline.warnings,
    )


def ranked_whatifs(results: list[tuple[Scenario, WhatIf]], summaries: dict[str, str]) -> list[DemoWhatIf]:
    """Each what-if's prediction, ranked by throughput (time per sample: ``batch_size`` changes the samples a step
    processes) on the paired rule of ``compare`` and ``plan``, highest first."""
    out = [
        DemoWhatIf(
            s.script,
            dict(s.params),
            summaries.get(s.script, ""),
            r.baseline_us,
            r.predicted_us,
            r.speedup,
            r.throughput,
            r.interval,
            r.versus_baseline,
            r.report.memory,
        )
        for s, r in results
    ]
    labels = [s.label for s, _ in results]
    places = rank_paired(
        [(r.predicted_us / r.samples if r.samples else math.inf, r.interval.parts) for _, r in results]
    )
    for w, (place, tied) in zip(out, places):
        w.rank, w.ties = place, [labels[j] for j in tied]
    order = sorted(range(len(out)), key=lambda i: (out[i].rank, -out[i].throughput))
    return [out[i] for i in order]


def bundled_traces() -> list[str]:
    """The example traces shipped in the package, GPU recordings first."""
    root = files("daydream").joinpath("examples")
    found = sorted(str(p) for p in root.iterdir() if str(p).endswith(".json.gz")) if root.is_dir() else []
    return sorted(found, key=lambda p: p.endswith("_cpu.json.gz"))


def bundled_example() -> str:
    found = bundled_traces()
    if not found:
        raise DaydreamError("no bundled example trace in this installation (daydream/examples/*.json.gz)")
    return found[0]


def run_demo(trace: str | None = None, scenarios: tuple[Scenario, ...] = SCENARIOS) -> Demo:
    """Replay ``trace`` (default: the bundled example) and predict each scenario that applies to it, each on its
    own copy of the graph."""
    path = trace or bundled_example()
    loaded = load_trace(path)
    graph = build_graph(loaded)
    baseline = replay_graph(graph)
    if not loaded.has_gpu_activity:
        baseline.warnings.insert(0, f"{path}: {CPU_ONLY}")
    summaries = {i.name: i.summary for i in describe_scripts([s.script for s in scenarios])}
    results: list[tuple[Scenario, WhatIf]] = []
    skipped: list[tuple[Scenario, str]] = []
    for s in scenarios:
        try:
            result = run_whatif(graph, [s.script], dict(s.params))
        except NotApplicable as exc:
            skipped.append((s, exc.reason))
            continue
        if not math.isfinite(result.predicted_us):
            raise DaydreamError(f"{s.label}: the prediction is not a number")
        results.append((s, result))
    return Demo(demo_report(path, baseline, results, skipped, summaries), baseline, results)
