"""The accuracy ledger: predictions of measured changes, compared with the measured runs (``daydream validate``).

A case is a BEFORE trace (one or more runs of one setting), the scripts and params a user would choose without seeing
the AFTER, and the AFTER runs: the same program with the change made, measured. Per case the ledger reports the
measured AFTER step time (median over its runs, with their spread), the prediction, and two naive predictions to beat:
"no change" (the measured BEFORE) and, where the case states one, a whole-step ratio (the BEFORE times the factor a
back-of-envelope estimate would use, such as 2 for twice the batch). Errors are relative, signed per case; over cases
the geometric mean of their sizes, as the papers state accuracy. A case whose scripts stop (an assertion, a param the
library lacks) has no prediction and counts in the mean with its "no change" error: what the user is left with.

A trace's step time is the median of its steps' periods (``--step all``; each step from the end of the one before to
its own end; the first step is the others' context, not measured), over every measured step of every run; the
prediction is the same median of the predicted steps,
``daydream run --step all`` on every BEFORE run (so an unchanged script predicts the BEFORE exactly). The noise of a
setting is the spread of its runs' step times: half
their range, relative to the median. A change "moved" the time where the AFTER and BEFORE medians differ by more
than the two spreads together.

``jobs`` (``daydream validate --jobs N``): worker processes, each predicting the cases of one BEFORE setting at a
time (the cases that share its graphs); the ledger is the same.

Cases file (TOML; paths relative to the file)::

    [[case]]
    name = "batch size x2"
    before = ["traces/base/run1/rank0.json.xz", ...]
    after = ["traces/batch256/run1/rank0.json.xz", ...]
    scripts = ["batch_size"]          # library names or .whatif paths
    params = { factor = 2 }           # optional
    ratio = 2.0                       # optional: the whole-step ratio baseline
    note = "..."                      # optional
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from daydream import progress
from daydream.api.whatif import run_whatif
from daydream.api.workload import Workload
from daydream.dsl.library import library_name, script_path
from daydream.errors import DaydreamError
from daydream.files import read_toml
from daydream.graph.memory import memory_of
from daydream.perf.trust.uncertainty import (
    ErrorTable,
    Interval,
    Part,
    ScriptErrors,
    interval,
    memory_parts,
    model_parts,
    noise_of,
    noise_part,
    numeric_params,
)
from daydream.units import brief_repr
from daydream.workers import worker_count

DEFAULT_CASES = Path("validation") / "cases.toml"
# Geometric means of error sizes: an exact prediction counts as this error (%), so that one case does not zero it.
ERROR_FLOOR_PCT = 0.01


class Case(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    before: list[str]
    after: list[str]
    scripts: list[str]
    params: dict[str, Any] = {}
    ratio: float | None = None
    note: str = ""


class _CasesFile(msgspec.Struct, forbid_unknown_fields=True):
    case: list[Case]
    memory_case: list[Case] = []  # judged on the step's peak memory (the traces' own allocator events)


@dataclass
class CaseResult:
    __repr__ = brief_repr  # one screen, whatever it holds
    name: str
    before_us: float  # measured BEFORE: the "no change" prediction
    before_spread_pct: float
    measured_us: float  # measured AFTER (median)
    spread_pct: float  # AFTER runs' spread
    runs: int  # AFTER runs
    predicted_us: float | None  # None where the scripts stopped on this case
    ratio_us: float | None
    message: str = ""  # why there is no prediction
    note: str = ""
    scripts: list[str | None] = field(
        default_factory=list
    )  # the library's names of the scripts run (None: a file of one's own)
    params: dict[str, float] = field(default_factory=dict)  # the numeric params the scripts bound
    noise: Part | None = None  # the BEFORE runs' own step-to-step noise (the median run's)
    interval: Interval | None = None  # the 90% interval of the prediction, its model part from the other cases

    @property
    def covered(self) -> bool | None:
        """Whether the measured AFTER lies inside the predicted interval."""
        if self.interval is None:
            return None
        return self.interval.low_us <= self.measured_us <= self.interval.high_us

    @property
    def error_pct(self) -> float | None:
        return None if self.predicted_us is None else _error(self.predicted_us, self.measured_us)

    @property
    def no_change_error_pct(self) -> float:
        return _error(self.before_us, self.measured_us)

    @property
    def ratio_error_pct(self) -> float | None:
        return None if self.ratio_us is None else _error(self.ratio_us, self.measured_us)

    @property
    def moved(self) -> bool:
        """Whether the change moved the measured time by more than the noise of the two settings."""
        change = abs(self.measured_us - self.before_us) / self.before_us * 100
        return change > self.spread_pct + self.before_spread_pct

    @property
    def beats_no_change(self) -> bool | None:
        error = self.error_pct
        return None if error is None else abs(error) < abs(self.no_change_error_pct)

    def report(self) -> CaseReport:
        return CaseReport(
            name=self.name,
            measured_us=self.measured_us,
            predicted_us=self.predicted_us,
            error_pct=self.error_pct,
            no_change_error_pct=self.no_change_error_pct,
            ratio_us=self.ratio_us,
            ratio_error_pct=self.ratio_error_pct,
            spread_pct=self.spread_pct,
            runs=self.runs,
            before_us=self.before_us,
            before_spread_pct=self.before_spread_pct,
            moved=self.moved,
            beats_no_change=self.beats_no_change,
            message=self.message,
            note=self.note,
            interval=self.interval,
            covered=self.covered,
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`report` as JSON values."""
        return msgspec.to_builtins(self.report())


@dataclass
class MemoryCaseResult:
    """A memory case: the step's peak memory measured BEFORE and AFTER (each run's largest total over its measured
    steps, as its allocator events report it; the median over runs), and the peak predicted from each BEFORE run
    (``daydream run``'s ``memory.predicted_peak_bytes``; the median)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    name: str
    before_bytes: float
    before_spread_pct: float
    measured_bytes: float
    spread_pct: float
    runs: int
    predicted_bytes: float | None
    message: str = ""
    note: str = ""
    scripts: list[str | None] = field(default_factory=list)
    params: dict[str, float] = field(default_factory=dict)
    noise: Part | None = None  # the BEFORE's step-to-step spread of its peak
    interval: Interval | None = (
        None  # of the predicted peak (bytes in the fields named _us), its model part from the others
    )

    @property
    def error_pct(self) -> float | None:
        return None if self.predicted_bytes is None else _error(self.predicted_bytes, self.measured_bytes)

    @property
    def no_change_error_pct(self) -> float:
        return _error(self.before_bytes, self.measured_bytes)

    @property
    def moved(self) -> bool:
        """Whether the change moved the measured peak by more than the runs' spread (a peak repeats to the byte)."""
        change = abs(self.measured_bytes - self.before_bytes) / self.before_bytes * 100
        return change > max(self.spread_pct + self.before_spread_pct, ERROR_FLOOR_PCT)

    @property
    def beats_no_change(self) -> bool | None:
        error = self.error_pct
        return None if error is None else abs(error) < abs(self.no_change_error_pct)

    @property
    def covered(self) -> bool | None:
        if self.interval is None:
            return None
        return self.interval.low_us <= self.measured_bytes <= self.interval.high_us

    def report(self) -> MemoryCaseReport:
        return MemoryCaseReport(
            name=self.name,
            measured_bytes=self.measured_bytes,
            predicted_bytes=self.predicted_bytes,
            error_pct=self.error_pct,
            no_change_error_pct=self.no_change_error_pct,
            spread_pct=self.spread_pct,
            runs=self.runs,
            before_bytes=self.before_bytes,
            before_spread_pct=self.before_spread_pct,
            moved=self.moved,
            beats_no_change=self.beats_no_change,
            message=self.message,
            note=self.note,
            interval_low_bytes=self.interval.low_us if self.interval else None,
            interval_high_bytes=self.interval.high_us if self.interval else None,
            covered=self.covered,
        )


@dataclass
class Ledger:
    __repr__ = brief_repr  # one screen, whatever it holds
    path: str
    cases: list[CaseResult] = field(default_factory=list)
    memory_cases: list[MemoryCaseResult] = field(default_factory=list)

    @property
    def predicted(self) -> list[CaseResult]:
        return [c for c in self.cases if c.predicted_us is not None]

    @property
    def geomean_error_pct(self) -> float | None:
        """Over every case; where the scripts stopped, the user is left with the BEFORE: its "no change" error."""
        return geomean_pct([c.no_change_error_pct if c.error_pct is None else c.error_pct for c in self.cases])

    @property
    def no_change_geomean_error_pct(self) -> float | None:
        return geomean_pct([c.no_change_error_pct for c in self.cases])

    @property
    def ratio_geomean_error_pct(self) -> float | None:
        """Over the cases that state a ratio (None where none does)."""
        return geomean_pct([c.ratio_error_pct for c in self.cases if c.ratio_error_pct is not None])

    @property
    def coverage(self) -> Coverage:
        """How many measured AFTERs fall inside their predicted 90% intervals, and how wide those are: the check
        that the intervals are calibrated, not decorative (each case's model part from the other cases)."""
        with_interval = [c for c in self.cases if c.interval is not None]
        covered = sum(1 for c in with_interval if c.covered)
        widths = [c.interval.half_width_pct for c in with_interval if c.interval is not None]
        errors = [abs(c.error_pct) for c in with_interval if c.error_pct is not None]
        return Coverage(
            cases=len(with_interval),
            covered=covered,
            coverage_pct=100.0 * covered / len(with_interval) if with_interval else None,
            median_half_width_pct=statistics.median(widths) if widths else None,
            median_abs_error_pct=statistics.median(errors) if errors else None,
        )

    def errors(self, skip: int | None = None, skip_memory: int | None = None) -> ErrorTable:
        """The ledger's errors by script (what ``--errors-out`` writes, the intervals' model parts read), of the step
        time and of the peak memory; ``skip`` / ``skip_memory``: without that case."""
        return ErrorTable(
            cases_file=self.path,
            scripts=_by_script(self.cases, skip),
            memory=_by_script(self.memory_cases, skip_memory),
        )

    @property
    def memory_geomean_error_pct(self) -> float | None:
        return geomean_pct([c.no_change_error_pct if c.error_pct is None else c.error_pct for c in self.memory_cases])

    @property
    def memory_no_change_geomean_error_pct(self) -> float | None:
        return geomean_pct([c.no_change_error_pct for c in self.memory_cases])

    @property
    def memory_coverage(self) -> Coverage:
        with_interval = [c for c in self.memory_cases if c.interval is not None]
        covered = sum(1 for c in with_interval if c.covered)
        widths = [c.interval.half_width_pct for c in with_interval if c.interval is not None]
        errors = [abs(c.error_pct) for c in with_interval if c.error_pct is not None]
        return Coverage(
            cases=len(with_interval),
            covered=covered,
            coverage_pct=100.0 * covered / len(with_interval) if with_interval else None,
            median_half_width_pct=statistics.median(widths) if widths else None,
            median_abs_error_pct=statistics.median(errors) if errors else None,
        )

    def report(self) -> LedgerReport:
        return LedgerReport(
            cases_file=self.path,
            cases=[c.report() for c in self.cases],
            geomean_error_pct=self.geomean_error_pct,
            no_change_geomean_error_pct=self.no_change_geomean_error_pct,
            ratio_geomean_error_pct=self.ratio_geomean_error_pct,
            predicted_cases=len(self.predicted),
            failed_cases=len(self.cases) - len(self.predicted),
            coverage=self.coverage,
            memory=(
                MemoryLedgerReport(
                    cases=[c.report() for c in self.memory_cases],
                    geomean_error_pct=self.memory_geomean_error_pct,
                    no_change_geomean_error_pct=self.memory_no_change_geomean_error_pct,
                    coverage=self.memory_coverage,
                )
                if self.memory_cases
                else None
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`report` as JSON values: what ``daydream validate --json`` prints."""
        return msgspec.to_builtins(self.report())


class CaseReport(msgspec.Struct):
    """One case as the ledger's JSON has it, in this order (see :class:`CaseResult`)."""

    name: str
    measured_us: float
    predicted_us: float | None
    error_pct: float | None
    no_change_error_pct: float
    ratio_us: float | None
    ratio_error_pct: float | None
    spread_pct: float
    runs: int
    before_us: float
    before_spread_pct: float
    moved: bool
    beats_no_change: bool | None
    message: str
    note: str
    interval: Interval | None = None  # the 90% interval of the prediction (its model part from the other cases)
    covered: bool | None = None  # whether the measured AFTER lies inside it


class MemoryCaseReport(msgspec.Struct):
    """One memory case as the ledger's JSON has it (see :class:`MemoryCaseResult`)."""

    name: str
    measured_bytes: float
    predicted_bytes: float | None
    error_pct: float | None
    no_change_error_pct: float
    spread_pct: float
    runs: int
    before_bytes: float
    before_spread_pct: float
    moved: bool
    beats_no_change: bool | None
    message: str
    note: str
    interval_low_bytes: float | None = None
    interval_high_bytes: float | None = None
    covered: bool | None = None


class Coverage(msgspec.Struct):
    """How calibrated the intervals are: measured AFTERs inside their 90% intervals, and the median half-width next
    to the median error."""

    cases: int
    covered: int
    coverage_pct: float | None
    median_half_width_pct: float | None
    median_abs_error_pct: float | None


class LedgerReport(msgspec.Struct):
    """What ``daydream validate --json`` prints (:meth:`Ledger.to_dict`), in this order."""

    __repr__ = brief_repr  # one screen, whatever it holds

    cases_file: str
    cases: list[CaseReport]
    geomean_error_pct: float | None
    no_change_geomean_error_pct: float | None
    ratio_geomean_error_pct: float | None
    predicted_cases: int
    failed_cases: int
    coverage: Coverage | None = None
    memory: MemoryLedgerReport | None = None  # the memory cases, where the cases file has them


class MemoryLedgerReport(msgspec.Struct):
    """The memory cases: each one, the geometric mean of the errors next to "no change", the intervals' coverage."""

    cases: list[MemoryCaseReport]
    geomean_error_pct: float | None
    no_change_geomean_error_pct: float | None
    coverage: Coverage


def _by_script(cases: list[Any], skip: int | None) -> dict[str, ScriptErrors]:
    """Each script's errors (and the params its cases bound) over ``cases``, but the one at ``skip``."""
    scripts: dict[str, ScriptErrors] = {}
    for i, c in enumerate(cases):
        if i == skip or c.error_pct is None:
            continue
        for name in c.scripts:
            if name is None:
                continue
            entry = scripts.setdefault(name, ScriptErrors([]))
            entry.errors_pct.append(c.error_pct)
            for k, v in c.params.items():
                entry.params.setdefault(k, []).append(v)
    for entry in scripts.values():
        entry.params = {k: sorted(set(v)) for k, v in sorted(entry.params.items())}
    return dict(sorted(scripts.items()))


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured * 100


def geomean_pct(errors: list[float]) -> float | None:
    """Geometric mean of the errors' sizes (%), each at least ERROR_FLOOR_PCT; None for no errors."""
    if not errors:
        return None
    return math.exp(statistics.fmean(math.log(max(abs(e), ERROR_FLOOR_PCT)) for e in errors))


def load_cases(path: str | os.PathLike[str], memory: bool = False) -> list[Case]:
    """The cases of a cases file (``memory``: its memory cases), with their trace paths made absolute (relative to
    the file)."""
    p = Path(path)
    hint = " (run it in the project's folder, or name a cases file)" if p == DEFAULT_CASES else ""
    doc = read_toml(p, "cases file", hint)
    try:
        parsed = msgspec.convert(doc, _CasesFile)
    except msgspec.ValidationError as exc:
        raise DaydreamError(
            f"{p}: {exc} (each [[case]] has name, before, after, scripts; see daydream.api.validate)"
        ) from None
    cases = parsed.memory_case if memory else parsed.case
    names = set()
    for c in cases:
        where = f"{p}: case {c.name!r}"
        if c.name in names:
            raise DaydreamError(f"{where}: a second case of that name")
        names.add(c.name)
        if not c.before or not c.after or not c.scripts:
            raise DaydreamError(f"{where}: before, after and scripts each need at least one entry")
        if c.ratio is not None and not (math.isfinite(c.ratio) and c.ratio > 0):
            raise DaydreamError(f"{where}: ratio must be a positive number, not {c.ratio}")
        c.before = [_resolve(p.parent, x, where) for x in c.before]
        c.after = [_resolve(p.parent, x, where) for x in c.after]
        c.scripts = [script_path(p.parent, x, where) for x in c.scripts]
    return cases


def _resolve(base: Path, path: str, where: str) -> str:
    full = base / path
    if full.is_dir():  # "." or a job's folder: a case compares single traces
        raise DaydreamError(f"{where}: trace {full}: is a folder; before and after name trace files")
    if os.path.lexists(full) and not full.is_file():
        raise DaydreamError(f"{where}: trace {full}: not a regular file (a FIFO, device, socket or dangling link)")
    if not full.is_file():
        raise DaydreamError(f"{where}: trace {full} does not exist (record the corpus: python validation/record.py)")
    return str(full)


class _Graphs:
    """Each trace's graph of all its steps (what ``daydream run --step all`` builds), built once for a ledger where
    several cases read the trace (a BEFORE setting shared by the cases of one program), else on each use."""

    def __init__(self, shared: set[str] | frozenset[str] = frozenset()) -> None:
        self.shared = shared
        self.built: dict[str, Any] = {}

    def get(self, path: str) -> Any:
        graph = self.built.get(path)
        if graph is None:
            graph = Workload(path, step="all").load()[0]
            if path in self.shared:
                self.built[path] = graph
        return graph


def step_times_us(path: str, graphs: _Graphs | None = None) -> list[float]:
    """The periods of the measured steps of a trace (``--step all``: every step but the first, its context)."""
    graph = (graphs or _Graphs()).get(path)
    return [float(s.measured_us) for s in graph.graph["steps"] if not s.context]


def setting_us(paths: list[str], graphs: _Graphs | None = None) -> tuple[float, float]:
    """(median step time over all steps of all runs, spread of the runs' medians: half their range over the median,
    in %)."""
    per_run = [step_times_us(p, graphs) for p in paths]
    runs = [statistics.median(times) for times in per_run]
    median = statistics.median([t for times in per_run for t in times])
    spread = (max(runs) - min(runs)) / 2 / median * 100 if len(runs) > 1 else 0.0
    return median, spread


def validate_case(case: Case, graphs: _Graphs | None = None) -> CaseResult:
    graphs = graphs or _Graphs(frozenset(case.before))
    before_us, before_spread = setting_us(case.before, graphs)
    measured_us, spread = setting_us(case.after, graphs)
    predictions, message = [], ""
    params: dict[str, float] = {}
    noises = []
    for path in case.before:
        graph = graphs.get(path)
        noises.append(noise_of(graph))
        try:
            # on a copy: the graph may serve the next case too
            result = run_whatif(graph, case.scripts, dict(case.params), on_print=lambda _line: None)
            periods = result.timeline.step_periods()
            predictions.extend(periods[n] for n in result.timeline.measured_steps() if n in periods)
            params = params or numeric_params(result.param_values)
        except DaydreamError as exc:
            message = str(exc).splitlines()[0]
            break
    predicted = statistics.median(predictions) if predictions and not message else None
    known = sorted((n for n in noises if n is not None), key=lambda n: n.half_width_pct)
    return CaseResult(
        name=case.name,
        before_us=before_us,
        before_spread_pct=before_spread,
        measured_us=measured_us,
        spread_pct=spread,
        runs=len(case.after),
        predicted_us=predicted,
        ratio_us=None if case.ratio is None else before_us * case.ratio,
        message=message,
        note=case.note,
        scripts=[library_name(s) for s in case.scripts],
        params=params,
        noise=known[(len(known) - 1) // 2] if known else None,
    )


def validate_memory_case(case: Case, graphs: _Graphs | None = None) -> MemoryCaseResult:
    """A memory case: each BEFORE run's measured and predicted peak, each AFTER run's measured one (module docstring
    of daydream.api.memory; the median over runs)."""
    graphs = graphs or _Graphs(frozenset(case.before))
    before, before_spread = _peaks(case.before, graphs, case.name)
    measured, spread = _peaks(case.after, graphs, case.name)
    predictions, message = [], ""
    params: dict[str, float] = {}
    noises = []
    for path in case.before:
        graph = graphs.get(path)
        memory = memory_of(graph)
        peaks = list(memory.devices[memory.main_device()].step_peaks.values()) if memory is not None else []
        noises.append(noise_part(peaks))
        try:
            result = run_whatif(graph, case.scripts, dict(case.params), on_print=lambda _line: None)
            if result.report.memory is None:
                raise DaydreamError("no memory predicted: the BEFORE trace holds no allocator events")
            predictions.append(result.report.memory.predicted_peak_bytes)
            params = params or numeric_params(result.param_values)
        except DaydreamError as exc:
            message = str(exc).splitlines()[0]
            break
    known = sorted((n for n in noises if n is not None), key=lambda n: n.half_width_pct)
    return MemoryCaseResult(
        name=case.name,
        before_bytes=before,
        before_spread_pct=before_spread,
        measured_bytes=measured,
        spread_pct=spread,
        runs=len(case.after),
        predicted_bytes=statistics.median(predictions) if predictions and not message else None,
        message=message,
        note=case.note,
        scripts=[library_name(s) for s in case.scripts],
        params=params,
        noise=known[(len(known) - 1) // 2] if known else None,
    )


def _peaks(paths: list[str], graphs: _Graphs, name: str) -> tuple[float, float]:
    """(the median of the runs' measured peaks, their spread: half their range over the median, in %)."""
    peaks = []
    for p in paths:
        memory = memory_of(graphs.get(p))
        peak = memory.devices[memory.main_device()].measured_peak_bytes if memory is not None else None
        if peak is None:
            raise DaydreamError(
                f"memory case {name!r}: {p} holds no allocator events (record it with profile_memory=True)"
            )
        peaks.append(peak)
    median = statistics.median(peaks)
    return median, (max(peaks) - min(peaks)) / 2 / median * 100 if len(peaks) > 1 and median else 0.0


def with_intervals(ledger: Ledger) -> Ledger:
    """Each predicted case's 90% interval: its BEFORE's noise and its scripts' model part from the other cases'
    errors (leave one out: a case never vouches for itself)."""
    for i, c in enumerate(ledger.cases):
        if c.predicted_us is None:
            continue
        parts = [c.noise, *model_parts(c.scripts, c.params, ledger.errors(skip=i))]
        c.interval = interval(c.predicted_us, parts)
    for i, m in enumerate(ledger.memory_cases):
        if m.predicted_bytes is None:
            continue
        parts = [m.noise, *memory_parts(m.scripts, m.params, ledger.errors(skip_memory=i))]
        m.interval = interval(m.predicted_bytes, parts)
    return ledger


def _validate_group(cases: list[Case], advance: Callable[[float], None] | None = None) -> list[CaseResult]:
    """The cases of one group in order, each trace read by several of them built once; ``advance`` after each."""
    uses: dict[str, int] = {}
    for c in cases:
        for p in {*c.before, *c.after}:
            uses[p] = uses.get(p, 0) + 1
    graphs = _Graphs({p for p, n in uses.items() if n > 1})
    out = []
    for c in cases:
        out.append(validate_case(c, graphs))
        if advance is not None:
            advance(1)
    return out


def validate(path: str | os.PathLike[str] = DEFAULT_CASES, jobs: int = 1) -> Ledger:
    """Predict every case of the cases file and compare with its measured runs. ``jobs`` > 1: that many worker
    processes, each taking the cases of one BEFORE setting at a time (they share its graphs); the same ledger."""
    jobs = worker_count(jobs)
    cases = load_cases(path)
    memory = _validate_memory(load_cases(path, memory=True))
    groups: dict[tuple[str, ...], list[int]] = {}  # the cases of one BEFORE setting: the traces they share
    for i, c in enumerate(cases):
        groups.setdefault(tuple(c.before), []).append(i)
    n = len(cases)
    # at a terminal the cases done so far show on stderr (a ledger takes minutes); nothing when piped
    with progress.task(f"validating {n:,} case{'s' if n != 1 else ''}", total=n) as advance:
        if jobs == 1 or len(groups) == 1:
            return with_intervals(Ledger(str(path), _validate_group(cases, advance), memory))
        results: dict[int, CaseResult] = {}
        # the largest groups first, so that the last to finish is a small one
        order = sorted(groups.values(), key=lambda idx: -sum(len(cases[i].before) + len(cases[i].after) for i in idx))
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(order)), mp_context=ctx) as pool:
            futures = [(idx, pool.submit(_validate_group, [cases[i] for i in idx])) for idx in order]
            for idx, future in futures:
                results.update(zip(idx, future.result()))
                advance(len(idx))
    return with_intervals(Ledger(str(path), [results[i] for i in range(len(cases))], memory))


def _validate_memory(cases: list[Case]) -> list[MemoryCaseResult]:
    """The memory cases in order, each trace read by several of them built once."""
    uses: dict[str, int] = {}
    for c in cases:
        for p in {*c.before, *c.after}:
            uses[p] = uses.get(p, 0) + 1
    graphs = _Graphs({p for p, n in uses.items() if n > 1})
    return [validate_memory_case(c, graphs) for c in cases]
