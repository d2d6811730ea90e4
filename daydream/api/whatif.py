"""One call from a trace and .whatif scripts to the predicted iteration before and after: ``daydream run``."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import networkx as nx

from daydream.api.job_report import WorkersUsed
from daydream.api.memory import MemoryChange, graph_memory, memory_change, with_capacity
from daydream.api.workload import RunOptions, Workload
from daydream.dsl import Session, ast
from daydream.dsl.effects import Effect
from daydream.dsl.interpret import load_scripts
from daydream.dsl.library import library_name
from daydream.dsl.limits import Budget
from daydream.dsl.values import format_value
from daydream.graph import derived
from daydream.graph.schema import CPU_ONLY
from daydream.perf.trust.uncertainty import (
    Interval,
    Paired,
    Part,
    device_part,
    gradient_sizes_part,
    interval,
    model_key,
    model_parts,
    noise_of,
    numeric_params,
    versus_baseline,
)
from daydream.simulation import EARLIEST, Policy, Timeline, breakdown, totals_by
from daydream.simulation.memory import memory_timeline
from daydream.simulation.ranks import RankResult, Straggler, rank_results
from daydream.units import brief_repr, ms


class Summary(msgspec.Struct):
    """Where the time goes in one timeline (taken before the graph changes further)."""

    # the step time (Timeline.step_us): the period of the measured step; named apart from step_us, each step's period
    # (its old name, step_time_us, still reads it, with a DeprecationWarning, and is the name it is written under)
    period_us: float = msgspec.field(name="step_time_us")
    breakdown: dict[str, float]
    gpu_time_by_class: dict[str, float]
    gpu_time_by_phase: dict[str, float]
    tasks: int
    step_us: dict[str, float]  # each step's end minus the end of the step before (Timeline.step_periods)

    @classmethod
    def of(cls, timeline: Timeline) -> Summary:
        gpu_time = totals_by(timeline, ("class", "phase"), timeline.measured_indices(), scale=timeline.step_scale())
        return cls(
            period_us=timeline.step_us(),
            breakdown=breakdown(timeline),
            gpu_time_by_class=gpu_time["class"],
            gpu_time_by_phase=gpu_time["phase"],
            tasks=len(timeline.nodes),
            step_us=timeline.step_periods(),
        )

    @property
    def step_time_us(self) -> float:
        """The step time, under its old name: :attr:`period_us`."""
        warnings.warn(
            "Summary.step_time_us is now Summary.period_us (step_us is each step's period)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.period_us


T = TypeVar("T")


class Change(msgspec.Struct, Generic[T]):
    """One quantity before the scripts (the baseline) and after them."""

    __repr__ = brief_repr  # one screen, whatever it holds

    baseline: T
    predicted: T


class WhatIfReport(msgspec.Struct):
    """A what-if's prediction as data: what ``daydream run --json`` prints, in this order, and what renderers read."""

    __repr__ = brief_repr  # one screen, whatever it holds

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
    versus_baseline: Paired  # faster, slower or not decided: the paired difference (perf.uncertainty.versus_baseline)
    tasks: Change[int]
    step_us: Change[dict[str, float]]
    breakdown: Change[dict[str, float]]
    gpu_time_by_class: Change[dict[str, float]]
    gpu_time_by_phase: Change[dict[str, float]]
    statements: list[dict[str, Any]]
    printed: list[str]
    warnings: list[str]
    ranks: list[dict[str, Any]] | None = None  # a multi-rank job: per rank measured, baseline and predicted step
    # the step's peak memory before and after (its 90% interval, whether it fits): from the trace's allocator events,
    # or estimated from its shapes (daydream.api.memory); None where neither is possible
    memory: MemoryChange | None = None
    # a multi-rank job: the rank whose window is the job's step (its slowest; the breakdown's), and the straggler
    slowest_rank: Change[int | None] | None = None
    straggler: Change[Straggler | None] | None = None


@dataclass(repr=False)
class WhatIf:
    """A what-if's prediction: :attr:`report`, the data (what ``daydream run --json`` prints, what renderers read),
    with what a notebook goes on from - the changed graph, its timeline and the baseline's - and what the scripts'
    run left (data, not the interpreter that ran them: the REPL keeps a live Session). The report's fields are read
    through it (``result.predicted_us``, ``result.baseline.breakdown``); ``repr`` is one line; :meth:`rows` gives a
    table a DataFrame takes (``pandas.DataFrame(result.rows())``)."""

    report: WhatIfReport
    graph: nx.DiGraph
    timeline: Timeline
    baseline_timeline: Timeline  # the unchanged graph simulated
    param_values: dict[str, Any]  # each param's value as the scripts saw it (the report holds them as JSON values)
    effects: list[Effect]  # what each statement did
    texts: dict[str, str]  # each script file read (includes too): its text
    budget: Budget  # the work units the run could spend and spent
    script_warnings: list[str]  # the scripts' own warnings (the report's hold the trace's before them)
    workers: WorkersUsed | None = None  # a job simulated by workers (daydream.api.job_whatif): how many, where

    def rows(self) -> list[dict[str, Any]]:
        """One row per rank of a job (the report's ``ranks``), else one per simulated step: measured, baseline and
        predicted (us), the speedup (baseline over predicted) and the throughput (samples per second after over
        before)."""
        ranks = self.report.ranks
        if ranks is not None:
            rows = [
                {**r, "speedup": r["baseline_us"] / r["predicted_us"] if r["predicted_us"] else math.inf} for r in ranks
            ]
        else:
            before, after = self.report.step_us.baseline, self.report.step_us.predicted
            measured = {s.name: s.measured_us for s in self.graph.graph.get("steps", [])}
            rows = [
                {
                    "step": name,
                    "measured_us": measured.get(name, math.nan),
                    "baseline_us": before.get(name, math.nan),
                    "predicted_us": a,
                    "speedup": before.get(name, math.nan) / a if a else math.inf,
                }
                for name, a in after.items()
            ]
        return [{**r, "throughput": r["speedup"] * self.samples} for r in rows]

    def __repr__(self) -> str:
        names = [os.path.basename(s).removesuffix(".whatif") for s in self.scripts]
        return (
            f"WhatIf(trace={self.report.trace!r}, scripts={names}, baseline {ms(self.baseline_us)}, "
            f"predicted {ms(self.predicted_us)}, speedup {self.speedup:.3f}x, throughput {self.throughput:.3f}x, "
            f"{self.graph.number_of_nodes():,} tasks)"
        )

    # the report's fields, read through it: the data has one copy, the report's
    @property
    def scripts(self) -> list[str]:
        return self.report.scripts

    @property
    def measured_us(self) -> float:
        return self.report.measured_us

    @property
    def baseline_us(self) -> float:
        return self.report.baseline_us

    @property
    def predicted_us(self) -> float:
        return self.report.predicted_us

    @property
    def speedup(self) -> float:
        """Baseline over predicted step time: above 1 is faster."""
        return self.report.speedup

    @property
    def samples(self) -> float:
        """Samples per step after the scripts, relative to the trace's (``scale samples by F``)."""
        return self.report.samples

    @property
    def throughput(self) -> float:
        """Samples per second after over before: the speedup times :attr:`samples`."""
        return self.report.throughput

    @property
    def interval(self) -> Interval:
        """The 90% interval of :attr:`predicted_us` (the report's ``predicted_interval``): the trace's noise and
        the scripts' measured errors, marked extrapolated where the change leaves what was validated."""
        return self.report.predicted_interval

    @property
    def versus_baseline(self) -> Paired:
        """The prediction against the baseline by their paired difference (the trace's noise cancels; the scripts'
        measured errors remain): ``faster``, ``slower`` or ``not decided``, the ranking rule of ``compare``."""
        return self.report.versus_baseline

    @property
    def baseline_interval(self) -> Interval:
        """The baseline's 90% interval: the trace's own noise."""
        return self.report.baseline_interval

    @property
    def params_text(self) -> dict[str, str]:
        return self.report.params_text

    @property
    def policy(self) -> str:
        """The schedule policy, as written."""
        return self.report.policy

    @property
    def printed(self) -> list[str]:
        """The scripts' print lines."""
        return self.report.printed

    @property
    def warnings(self) -> list[str]:
        """The trace's warnings, then the scripts'."""
        return self.report.warnings

    @property
    def baseline(self) -> Summary:
        """Where the time goes before the scripts."""
        return _summary(self.report, "baseline")

    @property
    def predicted(self) -> Summary:
        """Where the time goes after the scripts."""
        return _summary(self.report, "predicted")

    def to_dict(self) -> dict[str, Any]:
        """:attr:`report` as JSON values."""
        return msgspec.to_builtins(self.report)


def _summary(report: WhatIfReport, side: str) -> Summary:
    """One side of the report's changes, as the :class:`Summary` it was taken from."""
    return Summary(
        period_us=getattr(report, f"{side}_us"),
        breakdown=getattr(report.breakdown, side),
        gpu_time_by_class=getattr(report.gpu_time_by_class, side),
        gpu_time_by_phase=getattr(report.gpu_time_by_phase, side),
        tasks=getattr(report.tasks, side),
        step_us=getattr(report.step_us, side),
    )


def predicted_interval(
    graph: nx.DiGraph,
    scripts: Sequence[str],
    param_values: dict[str, Any],
    predicted_us: float,
    declared: Sequence[Iterable[str]] | None = None,
    swaps: Any = None,
    gradient_part: Part | None = None,
) -> Interval:
    """How far to trust a prediction: a 90% interval from the trace's own step-to-step noise and the measured error
    of the scripts run (the validation ledger), widened and marked extrapolated where the change leaves what was
    validated (daydream.perf.trust.uncertainty). ``declared``: each script's params (its includes' too), which name its
    model for a ranking's pairs with the values they were bound to (:func:`~daydream.perf.trust.uncertainty.model_key`);
    and where the scripts read gradient sizes the trace does not record, their estimate's part. ``graph`` None (a
    job simulated by workers): the device ``swaps`` made and the gradient sizes' part as given, no noise part."""
    names = [library_name(s) if not s.startswith("<") else None for s in scripts]
    each = declared if declared is not None else [param_values] * len(scripts)
    models = [
        model_key(
            name or (s if s.startswith("<") else os.path.realpath(s)),
            {k: param_values[k] for k in params if k in param_values},
        )
        for s, name, params in zip(scripts, names, each)
    ]
    parts = model_parts(names, numeric_params(param_values), models=models)
    swapped = device_part(derived.cached(graph, "device_swaps", ()) if graph is not None else swaps, predicted_us)
    if swapped is not None:
        # the kernels moved to another GPU: the kernel model's part stands in for the device script's ledger part
        # where the ledger has measured no swap (its pooled bound says nothing of GPUs), else the larger of the two;
        # it is the device script's model (its target GPU names it)
        ledger = [p for p in parts if p.name == swapped.name and not p.extrapolated]
        model = next((p.model for p in parts if p.name == swapped.name), swapped.name)
        swapped = msgspec.structs.replace(swapped, model=model)
        parts = [p for p in parts if p.name != swapped.name] + [max([swapped, *ledger], key=lambda p: p.half_width_pct)]
    if graph is None:
        return interval(predicted_us, [None, *parts, gradient_part])
    return interval(predicted_us, [noise_of(graph), *parts, gradient_sizes_part(graph)])


def rank_changes(baseline: list[RankResult], after: list[RankResult]) -> list[dict[str, Any]]:
    """A multi-rank job: each rank's measured step, and its predicted step (its own window), its wait and its start
    after the first rank's, before and after the scripts."""
    return [
        {
            "rank": b.rank,
            "measured_us": b.measured_us,
            "baseline_us": b.step_us,
            "predicted_us": a.step_us,
            "baseline_wait_us": b.wait_us,
            "wait_us": a.wait_us,
            "baseline_offset_us": b.offset_us,
            "offset_us": a.offset_us,
        }
        for b, a in zip(baseline, after)
    ]


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
    ``daydream.dsl.limits.default_budget`` of the graph's size); ``include_dirs``: folders besides the scripts' own and
    the bundled
    library whose .whatif files the scripts may include (docs/language.md#limits). The predicted peak memory fits the
    trace's GPU's memory or a device swap's target's (another: :func:`daydream.api.memory.with_capacity`)."""
    session = Session(
        graph, params=params, policy=policy, copy=copy, on_print=on_print, budget=budget, include_dirs=include_dirs
    )
    parsed, declared = load_scripts(session, scripts)
    baseline = Summary.of(session.baseline)  # before any change: its timeline shares the task dicts
    # the step's memory before any change (the scripts change the graph's tensors): from the trace's events, else shapes
    memory_before = (
        memory_timeline(session.baseline, graph_memory(session.graph)) if not session.graph.graph.get("ranks") else None
    )
    # before any change: the baseline's timeline reads the graph's task dicts
    baseline_ranks = rank_results(session.graph, session.baseline) if session.graph.graph.get("ranks") else None
    baseline_rank = session.baseline.step_rank()
    for script in parsed:
        session.run(script, checked=True)
    timeline = session.predict()
    g = session.graph
    before, after = baseline, Summary.of(timeline)
    measured = session.measured_us
    scripts_run = [s.file for s in parsed]
    speedup = before.period_us / after.period_us if after.period_us else math.inf
    after_ranks = rank_results(g, timeline) if baseline_ranks is not None else None
    report = WhatIfReport(
        trace=g.graph.get("trace"),
        device=g.graph.get("device"),
        rank=g.graph.get("rank"),
        steps=[s.name for s in g.graph.get("steps", [])],
        scripts=scripts_run,
        params={k: json_param(v) for k, v in session.param_values.items()},
        params_text=session.binder.shown(),
        policy=session.policy_text,
        measured_us=measured,
        baseline_us=before.period_us,
        predicted_us=after.period_us,
        speedup=speedup,
        samples=session.samples,
        throughput=speedup * session.samples,
        baseline_error_pct=100.0 * (before.period_us - measured) / measured if measured else None,
        predicted_interval=(iv := predicted_interval(g, scripts_run, session.param_values, after.period_us, declared)),
        baseline_interval=interval(before.period_us, [noise_of(g)]),
        versus_baseline=versus_baseline(after.period_us, iv.parts, before.period_us),
        tasks=Change(before.tasks, after.tasks),
        step_us=Change(before.step_us, after.step_us),
        breakdown=Change(before.breakdown, after.breakdown),
        gpu_time_by_class=Change(before.gpu_time_by_class, after.gpu_time_by_class),
        gpu_time_by_phase=Change(before.gpu_time_by_phase, after.gpu_time_by_phase),
        statements=[e.to_dict() for e in session.effects.values()],
        printed=list(session.printed),
        warnings=list(graph.graph.get("warnings", [])) + session.warnings,
        ranks=(
            rank_changes(baseline_ranks[0], after_ranks[0])
            if baseline_ranks is not None and after_ranks is not None
            else None
        ),
        slowest_rank=Change(baseline_rank, timeline.step_rank()) if baseline_ranks is not None else None,
        straggler=(
            Change(baseline_ranks[1], after_ranks[1])
            if baseline_ranks is not None and after_ranks is not None
            else None
        ),
        memory=memory_change(
            memory_before,
            timeline,
            [library_name(s) if not s.startswith("<") else None for s in scripts_run],
            numeric_params(session.param_values),
        ),
    )
    return WhatIf(
        report=report,
        graph=g,
        timeline=timeline,
        baseline_timeline=session.baseline,
        param_values=dict(session.param_values),
        effects=list(session.effects.values()),
        texts=dict(session.loader.texts),
        budget=session.budget,
        script_warnings=list(session.warnings),
    )


def whatif(
    workload: Workload | str | os.PathLike[str],
    scripts: Sequence[str | os.PathLike[str] | ast.Script],
    params: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    on_print: Callable[[str], None] | None = None,
) -> WhatIf:
    """Predict a training step after changes: run .whatif scripts on a trace's graph (what ``daydream run`` does).

    Parameters
    ----------
    workload : Workload, str or os.PathLike
        A trace path, or a :class:`~daydream.api.workload.Workload`: a trace or a job folder with its step, execution
        trace, link and workers.
    scripts : sequence of str, os.PathLike or parsed scripts
        The scripts, applied in order: a library name (``"amp"``), a path, or a :class:`~daydream.dsl.ast.Script`.
    params : dict, optional
        The scripts' params by name (``{"dtype": "bf16"}``; ``"SCRIPT.NAME"`` for one script's), as ``-p`` gives them.
    options : RunOptions, optional
        The scheduling policy, the scripts' work budget, the folders they may include and the device memory
        (the command line's ``--policy``, ``--budget``, ``--include-dir``, ``--memory-gb``). Default: ``RunOptions()``.
    on_print : callable, optional
        Where each line of the scripts' ``print`` goes (default: nowhere).

    Returns
    -------
    WhatIf
        The baseline and the prediction (``baseline_us``, ``predicted_us``, ``speedup``), the 90% ``interval``,
        what each statement did; ``report`` is its plain data (``to_dict()``: the JSON of ``daydream run --json``).

    Raises
    ------
    TraceError
        The trace cannot be read or holds no step to simulate.
    ScriptError
        A script cannot be found, parsed or run; :class:`~daydream.errors.NotApplicable` where its ``require`` does
        not hold on this trace, :class:`~daydream.errors.CheckFailed` where its ``assert`` does not.

    Examples
    --------
    >>> from daydream import bundled_example, whatif
    >>> result = whatif(bundled_example(), ["fused_optimizer"])
    >>> result.predicted_us < result.baseline_us
    True
    >>> round(result.baseline_us)
    19163
    """
    work, opts = Workload.of(workload), options or RunOptions()
    if work.by_workers_pays(opts.policy):
        return _whatif_by_workers(work, scripts, params, opts, on_print)
    graph, has_gpu = work.load()
    result = run_whatif(
        graph,
        scripts,
        params,
        opts.policy,
        copy=False,
        on_print=on_print,
        budget=opts.budget,
        include_dirs=opts.include_dirs,
    )
    if opts.memory_bytes is not None and result.report.memory is not None:
        result.report.memory = with_capacity(result.report.memory, opts.memory_bytes)
    if not has_gpu:
        result.warnings.insert(0, f"{work.path}: {CPU_ONLY}")
    return result


def _whatif_by_workers(
    work: Workload,
    scripts: Sequence[str | os.PathLike[str] | ast.Script],
    params: dict[str, Any] | None,
    opts: RunOptions,
    on_print: Callable[[str], None] | None,
) -> WhatIf:
    """:func:`whatif` on a job simulated by workers that each hold some of its ranks (daydream.api.job_whatif): the
    same report, from the workers' sums. Its graph holds no tasks (it says what the job's says of itself) and its
    timelines are None: no process holds them."""
    from daydream.api.job_whatif import run_by_workers  # a job's workers: imported for large jobs only

    count = work.worker_count()
    done = run_by_workers(work, scripts, params, opts, count, in_process=count == 1 and work.ray is None)
    job, before, after, first = done.job, done.baseline, done.predicted, done.first
    printed = done.printed()
    if on_print is not None:
        for line in printed:
            on_print(line)
    effects = done.effects()
    measured = max(x.measured_us for x in before.run.results)
    scripts_run = first["files"]
    speedup = before.step_us / after.step_us if after.step_us else math.inf
    values = first["param_values"]
    iv = predicted_interval(
        None,
        scripts_run,
        values,
        after.step_us,
        first["declared"],
        swaps=first["swaps"],
        gradient_part=first["gradient_part"],
    )
    report = WhatIfReport(
        trace=job.where,
        device=job.first.device[0],
        rank=None,
        steps=job.first.steps,
        scripts=scripts_run,
        params={k: json_param(v) for k, v in values.items()},
        params_text=first["shown"],
        policy=first["policy"],
        measured_us=measured,
        baseline_us=before.step_us,
        predicted_us=after.step_us,
        speedup=speedup,
        samples=first["samples"],
        throughput=speedup * first["samples"],
        baseline_error_pct=100.0 * (before.step_us - measured) / measured if measured else None,
        predicted_interval=iv,
        baseline_interval=interval(before.step_us, [None]),
        versus_baseline=versus_baseline(after.step_us, iv.parts, before.step_us),
        tasks=Change(before.tasks, after.tasks),
        step_us=Change(before.step_periods, after.step_periods),
        breakdown=Change(before.breakdown, after.breakdown),
        gpu_time_by_class=Change(before.gpu_time_by_class, after.gpu_time_by_class),
        gpu_time_by_phase=Change(before.gpu_time_by_phase, after.gpu_time_by_phase),
        statements=[e.to_dict() for e in effects],
        printed=printed,
        warnings=[f"rank {info.rank}: {w}" for info, b in job.own for w in b.warnings] + done.warnings(),
        ranks=rank_changes(before.run.results, after.run.results),
        slowest_rank=Change(before.run.slowest, after.run.slowest),
        straggler=Change(before.straggler, after.straggler),
        memory=None,
    )
    return WhatIf(
        report=report,
        graph=done.graph(),
        timeline=None,
        baseline_timeline=None,
        param_values=values,
        effects=effects,
        texts=first["texts"],
        budget=Budget(opts.budget, before.tasks),
        script_warnings=done.warnings(),
        workers=done.workers,
    )  # type: ignore[arg-type]
