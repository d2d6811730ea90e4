"""One call from a trace and .whatif scripts to the predicted iteration before and after: ``daydream run``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
import networkx as nx

from daydream.api.workload import RunOptions, Workload
from daydream.dsl import Session, ast
from daydream.dsl.effects import Effect
from daydream.dsl.evaluate import format_value
from daydream.dsl.library import library_name
from daydream.dsl.limits import Budget
from daydream.errors import ScriptError, did_you_mean
from daydream.graph import derived
from daydream.perf.uncertainty import Interval, device_part, interval, model_parts, noise_of, numeric_params
from daydream.simulation import EARLIEST, Policy, Timeline, breakdown, totals_by
from daydream.simulation.ranks import RankResult, rank_results


class Summary(msgspec.Struct):
    """Where the time goes in one timeline (taken before the graph changes further)."""

    step_time_us: float  # the step time (Timeline.step_us): the period of the measured step
    breakdown: dict[str, float]
    gpu_time_by_class: dict[str, float]
    gpu_time_by_phase: dict[str, float]
    tasks: int
    step_us: dict[str, float]  # each step's end minus the end of the step before (Timeline.step_periods)

    @classmethod
    def of(cls, timeline: Timeline) -> Summary:
        gpu_time = totals_by(timeline, ("class", "phase"), timeline.measured_indices())
        return cls(
            step_time_us=timeline.step_us(),
            breakdown=breakdown(timeline),
            gpu_time_by_class=gpu_time["class"],
            gpu_time_by_phase=gpu_time["phase"],
            tasks=len(timeline.nodes),
            step_us=timeline.step_periods(),
        )


T = TypeVar("T")


class Change(msgspec.Struct, Generic[T]):
    """One quantity before the scripts (the baseline) and after them."""

    baseline: T
    predicted: T


class WhatIfReport(msgspec.Struct):
    """What ``daydream run --json`` prints (:meth:`WhatIf.to_dict`), in this order."""

    trace: str | None
    device: str | None
    rank: int | None
    steps: list[str]
    scripts: list[str]
    params: dict[str, Any]
    params_text: dict[str, str]  # each param as a person reads it, in its default's unit (bucket_cap: "25 MiB")
    policy: str
    measured_us: float
    baseline_us: float
    predicted_us: float
    speedup: float
    samples: float  # samples a step processes after the scripts, relative to the trace (`scale samples by F`)
    throughput: float  # samples per second after over before: samples x speedup
    baseline_error_pct: float | None
    predicted_interval: Interval  # the 90% interval of predicted_us: the trace's noise and the scripts' ledger errors
    baseline_interval: Interval  # the trace's noise alone
    tasks: Change[int]
    step_us: Change[dict[str, float]]
    breakdown: Change[dict[str, float]]
    gpu_time_by_class: Change[dict[str, float]]
    gpu_time_by_phase: Change[dict[str, float]]
    statements: list[dict[str, Any]]
    printed: list[str]
    warnings: list[str]
    ranks: list[dict[str, Any]] | None = None  # a multi-rank job: per rank measured, baseline and predicted step


@dataclass(repr=False)
class WhatIf:
    """The baseline (the unchanged graph, simulated) and the prediction after the scripts. ``repr`` is one line;
    :meth:`rows` gives a table a DataFrame takes (``pandas.DataFrame(result.rows())``)."""

    graph: nx.DiGraph
    scripts: list[str]
    baseline: Summary
    predicted: Summary
    timeline: Timeline
    baseline_timeline: Timeline  # the unchanged graph simulated
    measured_us: float
    # what the scripts' run left (data, not the interpreter that ran them: the REPL keeps a live Session)
    samples: float  # samples per step after the scripts, relative to the trace's: see :attr:`throughput`
    param_values: dict[str, Any]  # each param's value as the scripts saw it
    params_text: dict[str, str]  # the same as given or declared (a bare word as its text)
    policy: str  # the schedule policy, as written
    effects: list[Effect]  # what each statement did
    printed: list[str]  # the scripts' print lines
    texts: dict[str, str]  # each script file read (includes too): its text
    budget: Budget  # the work units the run could spend and spent
    script_warnings: list[str]  # the scripts' own warnings (``warnings`` holds the trace's before them)
    warnings: list[str] = field(default_factory=list)
    baseline_ranks: list[RankResult] | None = None  # a multi-rank job's ranks before the scripts

    def rank_changes(self) -> list[dict[str, Any]] | None:
        """A multi-rank job: each rank's measured step, and its predicted step before and after the scripts."""
        if self.baseline_ranks is None:
            return None
        after, _ = rank_results(self.graph, self.timeline)
        return [{"rank": b.rank, "measured_us": b.measured_us, "baseline_us": b.step_us, "predicted_us": a.step_us,
                 "baseline_wait_us": b.wait_us, "wait_us": a.wait_us} for b, a in zip(self.baseline_ranks, after)]  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        """One row per rank of a job (:meth:`rank_changes`), else one per simulated step: measured, baseline and
        predicted (us), the speedup (baseline over predicted) and the throughput (samples per second after over
        before)."""
        ranks = self.rank_changes()
        if ranks is not None:
            rows = [{**r, "speedup": r["baseline_us"] / r["predicted_us"] if r["predicted_us"] else math.inf} for r in ranks]
        else:
            before, after = self.baseline.step_us, self.predicted.step_us
            measured = {s.name: s.measured_us for s in self.graph.graph.get("steps", [])}
            rows = [{"step": name, "measured_us": measured.get(name, math.nan), "baseline_us": before.get(name, math.nan),
                     "predicted_us": a, "speedup": before.get(name, math.nan) / a if a else math.inf}
                    for name, a in after.items()]  # fmt: skip
        return [{**r, "throughput": r["speedup"] * self.samples} for r in rows]

    def __repr__(self) -> str:
        names = [os.path.basename(s).removesuffix(".whatif") for s in self.scripts]
        return (f"WhatIf(trace={self.graph.graph.get('trace')!r}, scripts={names}, baseline {self.baseline_us / 1e3:,.3f} ms, "
                f"predicted {self.predicted_us / 1e3:,.3f} ms, speedup {self.speedup:.3f}x, throughput {self.throughput:.3f}x, "
                f"{self.graph.number_of_nodes():,} tasks)")  # fmt: skip

    @property
    def baseline_us(self) -> float:
        return self.baseline.step_time_us

    @property
    def predicted_us(self) -> float:
        return self.predicted.step_time_us

    @property
    def interval(self) -> Interval:
        """How far to trust :attr:`predicted_us`: a 90% interval from the trace's own step-to-step noise and the
        measured error of the scripts run (the validation ledger), widened and marked extrapolated where the change
        leaves what was validated (daydream.perf.uncertainty)."""
        names = [library_name(s) if not s.startswith("<") else None for s in self.scripts]
        parts = model_parts(names, numeric_params(self.param_values))
        swapped = device_part(derived.cached(self.graph, "device_swaps", ()), self.predicted_us)
        if swapped is not None:
            # the kernels moved to another GPU: the kernel model's part stands in for the device script's ledger part
            # where the ledger has measured no swap (its pooled bound says nothing of GPUs), else the larger of the two
            ledger = [p for p in parts if p.name == swapped.name and not p.extrapolated]
            parts = [p for p in parts if p.name != swapped.name] + [max([swapped, *ledger], key=lambda p: p.half_width_pct)]
        return interval(self.predicted_us, [noise_of(self.graph), *parts])

    @property
    def baseline_interval(self) -> Interval:
        """The baseline's 90% interval: the trace's own noise (the unchanged graph replays its steps)."""
        return interval(self.baseline_us, [noise_of(self.graph)])

    @property
    def speedup(self) -> float:
        """Baseline over predicted step time: above 1 is faster."""
        return self.baseline_us / self.predicted_us if self.predicted_us else math.inf

    @property
    def throughput(self) -> float:
        """Samples per second after over before: the speedup times :attr:`samples` (the speedup itself where the
        scripts leave the samples per step as they were)."""
        return self.speedup * self.samples

    def report(self) -> WhatIfReport:
        g = self.graph
        measured = self.measured_us
        before, after = self.baseline, self.predicted
        return WhatIfReport(
            trace=g.graph.get("trace"),
            device=g.graph.get("device"),
            rank=g.graph.get("rank"),
            steps=[s.name for s in g.graph.get("steps", [])],
            scripts=self.scripts,
            params={k: json_param(v) for k, v in self.param_values.items()},
            params_text=self.params_text,
            policy=self.policy,
            measured_us=measured,
            baseline_us=self.baseline_us,
            predicted_us=self.predicted_us,
            speedup=self.speedup,
            samples=self.samples,
            throughput=self.throughput,
            baseline_error_pct=100.0 * (self.baseline_us - measured) / measured if measured else None,
            predicted_interval=self.interval,
            baseline_interval=self.baseline_interval,
            tasks=Change(before.tasks, after.tasks),
            step_us=Change(before.step_us, after.step_us),
            breakdown=Change(before.breakdown, after.breakdown),
            gpu_time_by_class=Change(before.gpu_time_by_class, after.gpu_time_by_class),
            gpu_time_by_phase=Change(before.gpu_time_by_phase, after.gpu_time_by_phase),
            statements=[e.to_dict() for e in self.effects],
            printed=self.printed,
            warnings=self.warnings,
            ranks=self.rank_changes(),
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`report` as JSON values."""
        return msgspec.to_builtins(self.report())


def json_param(value: Any) -> Any:
    """Params as JSON values: numbers, strings, booleans, lists stay (a whole number past 64 bits as a float, or its
    text past a float's range); a selection becomes its size."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return float(value) if value.bit_length() <= 1000 else format_value(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [json_param(v) for v in value]
    return format_value(value)


def load_scripts(session: Session, scripts: Sequence[str | os.PathLike[str] | ast.Script]) -> list[ast.Script]:
    """Parse and check every script before any runs; params given that no script declares are an error."""
    parsed = [s if isinstance(s, ast.Script) else session.load(s) for s in scripts]
    declared: set[str] = set()
    for script in parsed:
        declared |= set(session.check(script, fresh_scope=True).params)
    unknown = sorted(set(session.params) - declared)
    if unknown:
        have = ", ".join(sorted(declared)) or "none"
        hints = [h for u in unknown if (h := did_you_mean(u, declared))]
        raise ScriptError(f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (-p): the scripts declare {have}"
                          + "".join(f"; {h}" for h in hints))  # fmt: skip
    return parsed


def run_whatif(
    graph: nx.DiGraph,
    scripts: Sequence[str | os.PathLike[str] | ast.Script],
    params: dict[str, Any] | None = None,
    policy: Policy = EARLIEST,
    copy: bool = True,
    on_print: Callable[[str], None] | None = None,
    budget: int | None = None,
    include_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> WhatIf:
    """Apply ``scripts`` in order to (a copy of) ``graph`` and predict the iteration before and after.

    ``budget``: the units of work each script's check and each script's run may do (None: the default,
    ``daydream.dsl.limits.default_budget`` of the graph's size); ``include_dirs``: folders besides the scripts' own and the bundled
    library whose .whatif files the scripts may include (docs/language.md#limits)."""
    session = Session(graph, params=params, policy=policy, copy=copy, on_print=on_print, budget=budget, include_dirs=include_dirs)
    parsed = load_scripts(session, scripts)
    baseline = Summary.of(session.baseline)  # before any change: its timeline shares the task dicts
    baseline_ranks = rank_results(session.graph, session.baseline)[0] if session.graph.graph.get("ranks") else None
    for script in parsed:
        session.run(script, checked=True)
    timeline = session.predict()
    return WhatIf(
        graph=session.graph,
        scripts=[s.file for s in parsed],
        baseline=baseline,
        predicted=Summary.of(timeline),
        timeline=timeline,
        baseline_timeline=session.baseline,
        measured_us=session.measured_us,
        samples=session.samples,
        param_values=dict(session.param_values),
        params_text=session.binder.shown(),
        policy=session.policy_text,
        effects=list(session.effects.values()),
        printed=list(session.printed),
        texts=dict(session.loader.texts),
        budget=session.budget,
        script_warnings=list(session.warnings),
        warnings=list(graph.graph.get("warnings", [])) + session.warnings,
        baseline_ranks=baseline_ranks,
    )


def whatif(
    workload: Workload | str | os.PathLike[str],
    scripts: Sequence[str | os.PathLike[str] | ast.Script],
    params: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    on_print: Callable[[str], None] | None = None,
) -> WhatIf:
    """Load the workload (a trace path, or a :class:`~daydream.api.workload.Workload`: a trace or a job folder with its
    step, execution trace, link and workers), build the graph of the step, run the scripts with ``params``: what
    ``daydream run`` does. ``options``: the policy, the scripts' budget and include folders (the CLI's ``--policy``,
    ``--budget``, ``--include-dir``); ``on_print``: where the scripts' ``print`` goes."""
    work, opts = Workload.of(workload), options or RunOptions()
    graph, has_gpu = work.load()
    result = run_whatif(graph, scripts, params, opts.policy, copy=False, on_print=on_print, budget=opts.budget,
                        include_dirs=opts.include_dirs)  # fmt: skip
    if not has_gpu:
        result.warnings.insert(0, f"{work.path}: no GPU activity in the trace; the graph holds CPU tasks only")
    return result
