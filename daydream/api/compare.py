"""Ranking what-if scenarios on one trace, keeping the results, catching regressions: ``daydream compare``.

A scenarios file (TOML; script paths relative to the file, or names of the bundled library)::

    [[scenario]]
    name = "mixed precision"
    scripts = ["amp"]                       # applied in order
    params = { speedup = 2 }                # optional: .whatif values (a string is read as a .whatif expression,
                                            # "25MB", unless the param's default is a string)
    grid = { bucket_cap = ["10MB", "25MB"] }  # optional: this scenario once per value (product over params)

    [grid]                                  # optional: applies to every scenario whose scripts declare the param
    ranks = [8, 16, 64]
    inter = ["ib-hdr", "roce-100g"]

Each point of a grid is a scenario of its own, named ``NAME param=value ...``. Every scenario runs on its own copy of
the trace's graph; the baseline is the unchanged graph, simulated. A scenario whose scripts stop (an assert, a script
error) is kept with the reason and no prediction.

Saved results (``--save``) hold the results and their provenance: daydream's version, the trace's SHA-256, each
script's SHA-256 (every file read, includes too), params, device, date. ``--against`` compares a run with saved
results: a scenario regressed when its predicted step time grew by more than the tolerance, or when it had a
prediction and has none now.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import math
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import networkx as nx

from daydream import progress
from daydream._version import __version__
from daydream.api.memory import MemoryChange, with_capacity
from daydream.api.replay import CriticalPath, critical_path_summary, replay_graph, run_inputs
from daydream.api.whatif import json_param, run_whatif
from daydream.api.workload import RunOptions, Workload
from daydream.dsl.library import Loader, describe_scripts, library_dirs, script_path
from daydream.dsl.params import script_name
from daydream.dsl.values import format_value
from daydream.errors import DaydreamError
from daydream.files import clip, input_number, read_json, read_toml
from daydream.graph.schema import CPU_ONLY
from daydream.perf.trust.uncertainty import Interval, Paired, rank_paired
from daydream.units import brief_repr, ms
from daydream.workers import connect_ray, worker_count

MAX_SCENARIOS = 10_000  # a grid's product: bounded work
EXIT_REGRESSED = 4  # --against: a scenario's prediction regressed beyond the tolerance
# --against: saved results are kilobytes a scenario, at most MAX_SCENARIOS of them; a bound for what is not (a 265 MB
# file took 95 s to read and compare)
MAX_SAVED_BYTES = 64 * 1024 * 1024


class ScenarioSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One ``[[scenario]]`` table as written."""

    name: str
    scripts: list[str]
    params: dict[str, Any] = {}
    grid: dict[str, list[Any]] = {}


class _ScenariosFile(msgspec.Struct, forbid_unknown_fields=True):
    scenario: list[ScenarioSpec]
    grid: dict[str, list[Any]] = {}


class Scenario(msgspec.Struct, frozen=True):
    """One point of a comparison to predict: scripts applied in order with their params.

    Parameters
    ----------
    name : str
        How the results call it.
    scripts : list of str
        Library names (``"amp"``) or paths of .whatif scripts, applied in order; none: the baseline.
    params : dict, optional
        The scripts' params by name (``"SCRIPT.NAME"`` for one script's), as ``-p`` gives them.

    Examples
    --------
    >>> from daydream import Scenario
    >>> Scenario("bf16", ["amp"], {"dtype": "bf16"})
    Scenario(name='bf16', scripts=['amp'], params={'dtype': 'bf16'})
    """

    name: str
    scripts: list[str]
    params: dict[str, Any] = {}


def value_text(value: Any) -> str:
    """A param value as a person writes it in a scenario's name: strings bare, others as .whatif values."""
    return value if isinstance(value, str) else format_value(value)


def load_scenarios(path: str | os.PathLike[str], include_dirs: Sequence[str | os.PathLike[str]] = ()) -> list[Scenario]:
    """The scenarios of a scenarios file, grids expanded, script paths made absolute (relative to the file). Its
    scripts are library names or .whatif files in its folder tree or ``include_dirs`` (:func:`script_path`)."""
    p = Path(path)
    doc = read_toml(p, "scenarios file")
    try:
        parsed = msgspec.convert(doc, _ScenariosFile)
    except msgspec.ValidationError as exc:
        raise DaydreamError(
            f"{p}: {exc} (each [[scenario]] has name and scripts, optional params and grid; an "
            "optional [grid] table of lists; see daydream.api.compare)"
        ) from None
    return expand(parsed.scenario, parsed.grid, p.parent, str(p), include_dirs)


def expand(
    specs: Sequence[ScenarioSpec],
    grid: dict[str, list[Any]] | None = None,
    base: Path | None = None,
    where: str = "scenarios",
    include_dirs: Sequence[str | os.PathLike[str]] = (),
) -> list[Scenario]:
    """Scenarios from their specs: each spec once per point of its own grid and of the shared ``grid``'s params its
    scripts declare. Errors name ``where`` and the scenario."""
    shared = dict(grid or {})
    if not specs:
        raise DaydreamError(f"{where}: no [[scenario]] tables")
    for name, values in shared.items():
        _check_axis(where, "[grid]", name, values)
    out: list[Scenario] = []
    names: set[str] = set()
    used: set[str] = set()
    for spec in specs:
        at = f"{where}: scenario {spec.name!r}"
        if not spec.name.strip():
            raise DaydreamError(f"{where}: a scenario with an empty name")
        if spec.name in names:
            raise DaydreamError(f"{at}: a second scenario of that name")
        names.add(spec.name)
        if not spec.scripts:
            raise DaydreamError(f"{at}: scripts needs at least one entry")
        scripts = [script_path(base, s, at, include_dirs) for s in spec.scripts]
        declared = _declared_params(scripts, at)
        for name, values in spec.grid.items():
            _check_axis(at, "grid", name, values)
            if name not in declared:
                raise DaydreamError(
                    f"{at}: grid param {name!r}: its scripts declare {', '.join(sorted(declared)) or 'no params'}"
                )
        both = sorted(set(spec.params) & set(spec.grid))
        if both:
            raise DaydreamError(f"{at}: {', '.join(both)} given in params and in grid: give each once")
        axes = dict(spec.grid)
        for name, values in shared.items():
            if name in declared and name not in spec.params and name not in axes:
                axes[name] = values
                used.add(name)
        points = math.prod(len(v) for v in axes.values())
        if len(out) + points > MAX_SCENARIOS:
            raise DaydreamError(f"{at}: the grids make more than {MAX_SCENARIOS:,} scenarios")
        for values in itertools.product(*axes.values()):
            point = dict(zip(axes, values))
            label = " ".join([spec.name, *(f"{k}={value_text(v)}" for k, v in point.items())])
            if label in names and point:
                raise DaydreamError(f"{at}: grid point {label!r} has the name of another scenario")
            names.add(label)
            out.append(Scenario(label, scripts, {**spec.params, **point}))
    unused = sorted(set(shared) - used)
    if unused:
        raise DaydreamError(
            f"{where}: [grid] param {', '.join(unused)}: no scenario's scripts declare it (or each sets it in params)"
        )
    return out


def _check_axis(where: str, table: str, name: str, values: list[Any]) -> None:
    if not values:
        raise DaydreamError(f"{where}: {table} {name} = []: give at least one value")
    if len({repr(v) for v in values}) != len(values):
        raise DaydreamError(f"{where}: {table} {name} repeats a value")


def _declared_params(scripts: list[str], where: str) -> set[str]:
    try:
        infos = describe_scripts(scripts)
        return {n for info in infos for name, _ in info.params for n in (name, f"{script_name(info.path)}.{name}")}
    except DaydreamError as exc:
        raise DaydreamError(f"{where}: {str(exc).splitlines()[0]}") from None


class Bound(msgspec.Struct):
    """What bounds a timeline: its critical path's time by resource, phase and kernel class (largest first)."""

    gpu_pct: float
    cpu_pct: float
    by_phase: dict[str, float]  # % of the path
    by_kernel_class: dict[str, float]

    @classmethod
    def of(cls, path: CriticalPath, total_us: float) -> Bound:
        def pct(d: dict[str, float]) -> dict[str, float]:
            return {k: 100 * v / total_us for k, v in list(d.items())[:3]} if total_us else {}

        return cls(
            gpu_pct=100 * path.gpu_us / total_us if total_us else 0.0,
            cpu_pct=100 * path.cpu_us / total_us if total_us else 0.0,
            by_phase=pct(path.by_phase),
            by_kernel_class=pct(path.by_kernel_class),
        )

    def text(self) -> str:
        """``GPU 82%: backward 45%, gemm 30%``: the resource holding most of the path, then its largest shares."""
        gpu = self.gpu_pct >= self.cpu_pct
        lead = f"GPU {self.gpu_pct:.0f}%" if gpu else f"CPU {self.cpu_pct:.0f}%"
        # a GPU-bound path: its largest phase and kernel class; a CPU-bound one: its two largest phases
        parts = (
            list(self.by_phase.items())[:1] + list(self.by_kernel_class.items())[:1]
            if gpu
            else list(self.by_phase.items())[:2]
        )
        return lead + (": " + ", ".join(f"{k} {v:.0f}%" for k, v in parts) if parts else "")


class ScenarioResult(msgspec.Struct):
    """One scenario's prediction, or why there is none (``error``, with the exit status it would have in ``run``)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    name: str
    scripts: list[str]
    params: dict[str, Any]  # every param as bound (defaults too), JSON values
    predicted_us: float | None
    speedup: float | None  # baseline / predicted: above 1 is faster
    throughput: float | None  # samples/s after / before: the speedup times the samples a step processes (batch_size)
    breakdown: dict[str, float] | None
    bound: Bound | None
    script_sha256: dict[str, str] = {}  # every script file read (includes too), by its key (:func:`script_key`)
    printed: list[str] = []
    warnings: list[str] = []
    error: str | None = None
    exit_code: int = 0
    interval: Interval | None = None  # the prediction's 90% interval (the trace's noise, the scripts' ledger errors)
    rank: int | None = None  # its place: one more than the scenarios decidedly faster (their paired difference)
    ties: list[str] = []  # the scenarios it cannot be told apart from: their paired difference's interval holds zero
    versus_baseline: Paired | None = None  # faster, slower or not decided against the baseline, paired alike
    memory: MemoryChange | None = None  # the step's peak memory before and after (daydream.api.memory)


class Baseline(msgspec.Struct):
    """The unchanged graph, simulated: the baseline (``baseline_us``, as in ``daydream run``)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    measured_us: float
    baseline_us: float
    breakdown: dict[str, float]
    bound: Bound


class Provenance(msgspec.Struct):
    """Where saved results came from: enough to say what changed since."""

    __repr__ = brief_repr  # one screen, whatever it holds

    daydream: str
    date: str  # UTC, ISO 8601
    trace: str
    trace_sha256: str
    step: str | None
    policy: str
    link: str | None
    device: str | None
    scenarios_file: str | None
    script_sha256: dict[str, str]


class Comparison(msgspec.Struct):
    """The baseline and every scenario's prediction, sorted by predicted step time: all data (what ``daydream compare
    --json`` prints and ``--save`` writes, what :func:`load_saved` reads back). ``repr`` is one line; ``rows()`` gives
    a table a DataFrame takes."""

    provenance: Provenance
    baseline: Baseline
    scenarios: list[ScenarioResult]  # by predicted step time, fastest first; those without a prediction last
    warnings: list[str] = []

    def __repr__(self) -> str:
        best = self.scenarios[0] if self.scenarios and self.scenarios[0].predicted_us is not None else None
        lead = (
            f", best {best.name!r} {ms(best.predicted_us)} ({best.speedup:.3f}x)" if best and best.predicted_us else ""
        )
        return (
            f"Comparison(trace={self.provenance.trace!r}, baseline {ms(self.baseline.baseline_us)}, "
            f"{len(self.scenarios)} scenarios{lead})"
        )

    def rows(self) -> list[dict[str, Any]]:
        """One row per scenario, fastest first: name, predicted (us), speedup, throughput, breakdown, bound, error."""
        out = []
        for s in self.scenarios:
            row: dict[str, Any] = {
                "scenario": s.name,
                "predicted_us": s.predicted_us,
                "speedup": s.speedup,
                "throughput": s.throughput,
            }
            row.update(s.breakdown or {})
            row["bound"] = s.bound.text() if s.bound else None
            row["error"] = s.error
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def script_key(path: str, base: Path | None) -> str:
    """A script file named so that the same script has the same key on another machine: a library script by its
    place in the library (``library/amp.whatif``), one beside the scenarios file relative to it, others as they are."""
    real = os.path.realpath(path)
    for root in library_dirs():
        r = os.path.realpath(root)
        if real.startswith(r + os.sep):
            return "library/" + os.path.relpath(real, r)
    if base is not None:
        b = os.path.realpath(base)
        if real.startswith(b + os.sep):
            return os.path.relpath(real, b)
    return path


@dataclass
class _Job:
    """What a worker needs to load the graph and run scenarios, all plain data (it crosses processes)."""

    workload: Workload
    options: RunOptions
    base: str | None  # the scenarios file's folder: script keys relative to it


def predict_scenario(graph: nx.DiGraph, scenario: Scenario, job: _Job) -> ScenarioResult:
    """One scenario on its own copy of ``graph``; a script that stops gives a result with its reason."""
    printed: list[str] = []
    base = Path(job.base) if job.base else None
    try:
        opts = job.options
        result = run_whatif(
            graph,
            scenario.scripts,
            dict(scenario.params),
            opts.policy,
            copy=True,
            on_print=printed.append,
            budget=opts.budget,
            include_dirs=opts.include_dirs,
        )
    except DaydreamError as exc:
        loader = Loader()  # the scripts it names (those that stopped read no includes past the stop)
        for script in scenario.scripts:
            loader.load(script)
        return ScenarioResult(
            scenario.name,
            scenario.scripts,
            {k: json_param(v) for k, v in scenario.params.items()},
            None,
            None,
            None,
            None,
            None,
            script_sha256=_hashes(loader.texts, base),
            printed=printed,
            error=str(exc).splitlines()[0],
            exit_code=int(getattr(exc, "exit_code", 1)),
        )
    hashes = _hashes(result.texts, base)
    total = result.predicted_us
    return ScenarioResult(
        name=scenario.name,
        scripts=scenario.scripts,
        params={k: json_param(v) for k, v in result.param_values.items()},
        predicted_us=total,
        speedup=result.speedup,
        throughput=result.throughput,
        breakdown=result.predicted.breakdown,
        bound=Bound.of(critical_path_summary(result.timeline, top=3), total),
        script_sha256=hashes,
        printed=printed,
        warnings=result.script_warnings,
        interval=result.interval,
        versus_baseline=result.report.versus_baseline,
        memory=with_capacity(result.report.memory, opts.memory_bytes),
    )


def _hashes(texts: dict[str, str], base: Path | None) -> dict[str, str]:
    """The SHA-256 of every script file read, by :func:`script_key`."""
    return {
        script_key(f, base): hashlib.sha256(t.encode()).hexdigest() for f, t in texts.items() if not f.startswith("<")
    }


# one graph per worker process, loaded once by the initializer
_WORKER: tuple[nx.DiGraph, _Job] | None = None


def _init_worker(job: _Job) -> None:
    global _WORKER
    _WORKER = (job.workload.load()[0], job)


def _predict_in_worker(scenario: Scenario) -> ScenarioResult:
    assert _WORKER is not None
    return predict_scenario(_WORKER[0], scenario, _WORKER[1])


def _predict_chunk(job: _Job, chunk: list[Scenario]) -> list[ScenarioResult]:
    """A Ray task: load the graph once, predict a chunk of scenarios."""
    graph = job.workload.load()[0]
    return [predict_scenario(graph, s, job) for s in chunk]


def compare(
    workload: Workload | str | os.PathLike[str],
    scenarios: str | os.PathLike[str] | Sequence[Scenario],
    options: RunOptions | None = None,
    jobs: int = 1,
    ray: str | None = None,
    loaded: tuple[nx.DiGraph, bool] | None = None,
) -> Comparison:
    """Predict scenarios on one workload and rank them by predicted step time (what ``daydream compare`` does).

    Parameters
    ----------
    workload : Workload, str or os.PathLike
        A trace path, or a :class:`~daydream.api.workload.Workload`: a trace or a job folder with its step,
        execution trace and link.
    scenarios : str, os.PathLike or sequence of Scenario
        A scenarios file (TOML, the module's docstring) or :class:`Scenario` values.
    options : RunOptions, optional
        The policy before any script's schedule, the scripts' budget and include folders, the device memory.
    jobs : int, optional
        Worker processes, each loading the trace once (default 1: this process).
    ray : str, optional
        The address of a Ray cluster to predict chunks of scenarios on (``ray://host:10001``, ``auto``, ``local``).
    loaded : tuple of (networkx.DiGraph, bool), optional
        The workload's graph and whether it has GPU work, where the caller built it already (not changed).

    Returns
    -------
    Comparison
        The baseline and each scenario's prediction, ranked (``scenarios``; a scenario that failed carries its
        ``error``), with the provenance that ``save`` writes; ``rows()`` for a DataFrame.

    Raises
    ------
    DaydreamError
        No scenarios, or a scenarios file that cannot be used; :class:`~daydream.errors.TraceError` for the trace, and
        :class:`~daydream.errors.ScriptError` for a script that cannot be read, before any work.

    Notes
    -----
    Each scenario runs on its own copy of the graph. The results are the same whatever ``jobs`` and ``ray`` are. At
    a terminal the scenarios predicted so far show on stderr (:mod:`daydream.progress`).

    Examples
    --------
    >>> from daydream import Scenario, bundled_example, compare
    >>> result = compare(bundled_example(), [Scenario("fused", ["fused_optimizer"]), Scenario("same", [])])
    >>> [s.name for s in result.scenarios]
    ['fused', 'same']
    >>> result.scenarios[0].predicted_us < result.baseline.baseline_us
    True
    """
    jobs = worker_count(jobs, local=ray is None)
    work, opts = Workload.of(workload), options or RunOptions()
    base = None
    file = None
    if isinstance(scenarios, (str, os.PathLike)):
        file = os.fspath(scenarios)
        base = str(Path(file).parent)
        scenarios = load_scenarios(file, opts.include_dirs or ())
    scenarios = list(scenarios)
    if not scenarios:
        raise DaydreamError("no scenarios to compare")
    for s in scenarios:  # every script readable before any work: a typo costs no simulation
        for script in s.scripts:
            Loader().load(script)
    # the scenarios' workers build the trace alone (a job's ranks in this process: the workers are the scenarios')
    work = Workload(work.path, work.step, work.et, work.link)
    opts = RunOptions(opts.policy, opts.budget, [os.fspath(d) for d in opts.include_dirs or []], opts.memory_gb)
    job = _Job(work, opts, base)
    graph, has_gpu = loaded or work.load()
    base_run = replay_graph(graph, opts.policy)
    baseline = Baseline(
        base_run.measured_us,
        base_run.baseline_us,
        base_run.breakdown,
        Bound.of(base_run.report.critical_path, base_run.baseline_us),
    )
    n = len(scenarios)
    with progress.task(f"predicting {n:,} scenario{'s' if n != 1 else ''}", total=n) as advance:
        if ray is not None:
            rt = connect_ray(ray, jobs)
            remote = rt.remote(_predict_chunk)
            size = max(1, math.ceil(n / max(1, jobs)))
            refs = [remote.remote(job, scenarios[i : i + size]) for i in range(0, n, size)]
            results = [r for chunk in rt.get(refs) for r in chunk]
        elif jobs > 1 and n > 1:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(
                max_workers=min(jobs, n), mp_context=ctx, initializer=_init_worker, initargs=(job,)
            ) as pool:
                results = []
                for r in pool.map(_predict_in_worker, scenarios):
                    advance(1)
                    results.append(r)
        else:
            results = []
            for s in scenarios:
                results.append(predict_scenario(graph, s, job))
                advance(1)
    hashes: dict[str, str] = {}
    for r in results:
        hashes.update(r.script_sha256)
    provenance = Provenance(
        daydream=__version__,
        date=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        trace=work.path,
        trace_sha256=work.sha256(),
        step=None if work.step is None else str(work.step),
        policy=opts.policy.text,
        link=None if work.link is None else str(work.link),
        device=graph.graph.get("device"),
        scenarios_file=file,
        script_sha256=dict(sorted(hashes.items())),
    )
    warnings = list(graph.graph.get("warnings", []))
    if not has_gpu:
        warnings.insert(0, f"{work.path}: {CPU_ONLY}")
    ranked = rank_with_ties(sorted(results, key=lambda r: (r.predicted_us is None, r.predicted_us or 0.0)))
    return Comparison(provenance, baseline, ranked, warnings)


def rank_with_ties(scenarios: list[ScenarioResult]) -> list[ScenarioResult]:
    """Each predicted scenario's place (1 the fastest) by paired differences
    (daydream.perf.trust.uncertainty.rank_paired):
    one more than the scenarios decidedly faster than it - the interval of the difference of the two predictions
    holds no zero, the trace's noise cancelling and a model both use erring alike in both - so that scenarios the
    evidence cannot tell apart share a place (``1, 2=, 2=, 4``) and ``ties`` names them."""
    predicted = [s for s in scenarios if s.predicted_us is not None]
    places = rank_paired([(s.predicted_us or 0.0, s.interval.parts if s.interval else []) for s in predicted])
    for s, (place, tied) in zip(predicted, places):
        s.rank = place
        s.ties = [predicted[j].name for j in tied]
    return scenarios


def compare_inputs(
    trace: str | os.PathLike[str],
    scenarios_file: str | os.PathLike[str],
    et: str | None = None,
    include_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> list[str]:
    """Every file ``compare`` reads: the trace (and what it reads beside it), the scenarios file, every scenario's
    scripts and all they include (daydream.api.replay.run_inputs)."""
    scripts = dict.fromkeys(s for sc in load_scenarios(scenarios_file, include_dirs or ()) for s in sc.scripts)
    return [*run_inputs(trace, et, list(scripts), include_dirs), os.fspath(scenarios_file)]


# --- saved results and regressions ----------------------------------------------------------------------------------


def load_saved(path: str | os.PathLike[str]) -> Comparison:
    """Results saved by ``daydream compare --save``."""
    p = Path(path)
    doc = read_json(p, "results file", MAX_SAVED_BYTES, f" (write one with daydream compare ... --save {p})")
    try:
        saved = msgspec.convert(_from_before_one_vocabulary(doc), Comparison)
    except msgspec.ValidationError as exc:
        raise DaydreamError(f"{p}: not results saved by daydream compare --save: {exc}") from None
    check_saved(saved, os.fspath(p))
    return saved


def check_saved(saved: Comparison, where: str) -> None:
    """Refuse saved results whose times cannot be compared against: a baseline or a prediction that is not a positive,
    finite number of microseconds (a prediction of 0 would make every growth "within tolerance"). ``where`` names the
    file in the message, with the field."""
    if len(saved.scenarios) > MAX_SCENARIOS:
        raise DaydreamError(
            f"{where}: {len(saved.scenarios):,} scenarios: a comparison holds at most {MAX_SCENARIOS:,}; "
            "not results daydream compare --save wrote"
        )
    fields = [("baseline.baseline_us", saved.baseline.baseline_us)]
    fields += [
        (f"scenarios[{i}].predicted_us ({s.name!r})", s.predicted_us)
        for i, s in enumerate(saved.scenarios)
        if s.predicted_us is not None
    ]
    for field, us in fields:
        if not (isinstance(us, (int, float)) and math.isfinite(us) and us > 0):
            raise DaydreamError(
                f"{where}: {clip(field, 200)} = {us!r}: a saved time is a positive, finite number of "
                "microseconds; not results daydream compare --save wrote"
            )


def _from_before_one_vocabulary(doc: Any) -> Any:
    """Results saved before the baseline had one name everywhere: ``baseline.simulated_us`` is ``baseline_us``, and a
    scenario without ``throughput`` had the samples per step of the trace (its throughput is its speedup). CI keeps
    saved results across versions; they still load."""
    if not isinstance(doc, dict):
        return doc
    base = doc.get("baseline")
    if isinstance(base, dict) and "simulated_us" in base and "baseline_us" not in base:
        base["baseline_us"] = base.pop("simulated_us")
    for s in doc.get("scenarios") or []:
        if isinstance(s, dict) and "throughput" not in s:
            s["throughput"] = s.get("speedup")
    return doc


def save(comparison: Comparison, path: str | os.PathLike[str]) -> None:
    from daydream.files import json_bytes, write_atomically

    write_atomically(path, json_bytes(comparison, indent=2), "--save")


class Verdict(msgspec.Struct):
    """One scenario against its saved prediction."""

    __repr__ = brief_repr  # one screen, whatever it holds

    name: str
    status: str  # "regressed", "faster", "same", "new", "gone"
    saved_us: float | None
    predicted_us: float | None
    change_pct: float | None
    message: str


class Against(msgspec.Struct):
    """A comparison checked against saved results: each scenario's verdict, and what changed since."""

    __repr__ = brief_repr  # one screen, whatever it holds

    saved: str
    tolerance_pct: float
    verdicts: list[Verdict]
    changed: list[str]  # the trace, scripts, params, version that differ from the saved run's

    @property
    def regressed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "regressed"]


def parse_tolerance(text: str) -> float:
    """``5%`` or ``5`` (percent) as a number of percent."""
    t = text.strip().removesuffix("%").strip()
    try:
        value = input_number(t)  # ASCII digits, finite, at most 10^18
    except ValueError:
        raise DaydreamError(f"--tolerance {text!r}: give a percentage, e.g. 5%") from None
    if not math.isfinite(value) or value < 0:
        raise DaydreamError(f"--tolerance {text!r}: give a percentage of at least 0, e.g. 5%")
    return value


def check_against(comparison: Comparison, saved: Comparison, saved_path: str, tolerance_pct: float) -> Against:
    """Each scenario's prediction against the saved one: regressed when it grew by more than ``tolerance_pct``
    percent (or lost its prediction), faster when it shrank by more, else the same; scenarios new or gone."""
    check_saved(saved, saved_path)  # loaded by load_saved, or made by a caller: a time of 0 would hide a regression
    old = {s.name: s for s in saved.scenarios}
    verdicts = []
    for s in comparison.scenarios:
        o = old.pop(s.name, None)
        if o is None:
            verdicts.append(Verdict(s.name, "new", None, s.predicted_us, None, "not in the saved results"))
            continue
        if s.predicted_us is None:
            status = "regressed" if o.predicted_us is not None else "same"
            why = (
                f"no prediction now: {s.error}"
                if o.predicted_us is not None
                else f"no prediction then or now: {s.error}"
            )
            verdicts.append(Verdict(s.name, status, o.predicted_us, None, None, why))
            continue
        if o.predicted_us is None:
            verdicts.append(Verdict(s.name, "faster", None, s.predicted_us, None, f"predicted now; then: {o.error}"))
            continue
        change = 100 * (s.predicted_us - o.predicted_us) / o.predicted_us
        status = "regressed" if change > tolerance_pct else "faster" if change < -tolerance_pct else "same"
        verdicts.append(
            Verdict(
                s.name,
                status,
                o.predicted_us,
                s.predicted_us,
                change,
                f"{change:+.2f}% ({'beyond' if status != 'same' else 'within'} {tolerance_pct:g}%)",
            )
        )
    for name, o in old.items():
        verdicts.append(Verdict(name, "gone", o.predicted_us, None, None, "in the saved results, not in this run"))
    return Against(
        saved_path,
        tolerance_pct,
        verdicts,
        _changed(comparison.provenance, saved.provenance, comparison.scenarios, saved.scenarios),
    )


def _changed(new: Provenance, old: Provenance, now: list[ScenarioResult], then: list[ScenarioResult]) -> list[str]:
    out = []
    if new.trace_sha256 != old.trace_sha256:
        out.append(
            f"the trace changed ({old.trace} sha256 {old.trace_sha256[:12]} -> {new.trace} {new.trace_sha256[:12]})"
        )
    for key in sorted(set(new.script_sha256) | set(old.script_sha256)):
        a, b = old.script_sha256.get(key), new.script_sha256.get(key)
        if a != b:
            out.append(f"script {key} " + ("is new" if a is None else "is no longer read" if b is None else "changed"))
    if new.daydream != old.daydream:
        out.append(f"daydream {old.daydream} -> {new.daydream}")
    for label, a, b in (("step", old.step, new.step), ("policy", old.policy, new.policy), ("link", old.link, new.link)):
        if a != b:
            out.append(f"{label} {a} -> {b}")
    then_params = {s.name: s.params for s in then}
    for s in now:
        p = then_params.get(s.name)
        if p is not None and p != s.params:
            diff = sorted(k for k in set(p) | set(s.params) if p.get(k) != s.params.get(k))
            out.append(f"scenario {s.name!r}: params {', '.join(diff)} differ")
    return out
