"""``daydream report``: the XSP analyses (:mod:`daydream.api.analyses`) of the baseline and of the prediction after
scripts, their figures (:mod:`daydream.presentation.plots`), and one static HTML page that holds them, in a folder: it
opens
from disk, no server, nothing fetched. The page is ``templates/report.html.j2`` (jinja2, autoescaped) filled with
plain rows of text this module prepares."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
import msgspec

from daydream import signals
from daydream.api.analyses import IDLE_CAUSES, Analysis, KernelRow, LayerRow, analyse
from daydream.api.job import JobRank, longest_window_sentence, ranks_legend, straggler_path_sentence, straggler_sentence
from daydream.api.memory import MemoryChange, MemoryReplay, graph_memory, replay_memory, with_capacity
from daydream.api.replay import replay_graph
from daydream.api.whatif import WhatIf, json_param, run_whatif
from daydream.api.workload import RunOptions, Workload
from daydream.errors import DaydreamError
from daydream.files import check_output_path, json_bytes, utf8_text, write_atomically
from daydream.graph.schema import CPU_ONLY
from daydream.names import kernel_short, markup_text
from daydream.perf.trust.uncertainty import Interval, Paired
from daydream.simulation.export import export_chrome_trace
from daydream.simulation.memory import MemoryTimeline, memory_timeline
from daydream.simulation.ranks import RankResult, Straggler, rank_results
from daydream.simulation.timeline import BREAKDOWN_PARTS
from daydream.units import PAGE_MARKS, interval_line, interval_range, ms, nbytes

TOP_ROWS = 25  # rows of each table on the page (the JSON holds every row)
SHOWN_ROWS = 10  # of those, shown open; the rest fold under a summary


TIMELINE_FILE = "timeline.json.gz"  # the report's interactive timeline (Perfetto, chrome://tracing)


class StepRow(msgspec.Struct, frozen=True):
    """One simulated step of the report: its measured period, the baseline's and the prediction's (us); ``context``:
    the step before the measured ones, simulated so that they start with what it left pending, not measured."""

    step: str
    measured_us: float | None
    baseline_us: float
    predicted_us: float | None
    context: bool


def step_rows(base: Any, result: WhatIf | None) -> list[StepRow]:
    """The steps of a replay (``base.rows()``), with the prediction's where scripts ran."""
    predicted = {r["step"]: r["predicted_us"] for r in result.rows() if "step" in r} if result is not None else {}
    return [
        StepRow(r["step"], r["measured_us"], r["baseline_us"], predicted.get(r["step"]), bool(r.get("context")))
        for r in base.rows()
    ]


@dataclass
class Report:
    """What ``daydream report`` wrote and found: the folder, its files, the analyses (baseline first)."""

    trace: str
    out_dir: str
    index: str
    files: list[str]
    analyses: list[Analysis]
    measured_us: float
    device: str | None
    scripts: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    params_text: dict[str, str] = field(default_factory=dict)  # in each default's unit: what a person reads
    warnings: list[str] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)
    samples: float = 1.0  # the samples a step processes after the scripts, relative to the trace (scale samples)
    intervals: list[Interval] = field(default_factory=list)  # 90%, one per analysis: the baseline's, the prediction's
    steps: list[StepRow] = field(default_factory=list)  # each simulated step: measured, baseline, predicted
    versus_baseline: Paired | None = None  # the prediction against the baseline, by their paired difference
    # the step's peak memory: before and after (a what-if) or the replay's (the baseline alone); None without memory
    memory: MemoryChange | MemoryReplay | None = None
    # a multi-rank job: each analysis's step is its slowest rank's window (that rank, one per analysis); the baseline's
    # ranks, each its own window; the straggler the others wait for
    step_ranks: list[int | None] = field(default_factory=list)
    ranks: list[JobRank] | None = None
    straggler: Straggler | None = None

    @property
    def baseline_us(self) -> float:
        return self.analyses[0].step_us

    @property
    def predicted_us(self) -> float | None:
        return self.analyses[1].step_us if len(self.analyses) > 1 else None

    @property
    def speedup(self) -> float | None:
        """Baseline over predicted step time (above 1 is faster); None without scripts."""
        if len(self.analyses) < 2 or not self.analyses[1].step_us:
            return None
        return self.analyses[0].step_us / self.analyses[1].step_us

    @property
    def throughput(self) -> float | None:
        """Samples per second after over before: the speedup times :attr:`samples`."""
        return None if self.speedup is None else self.speedup * self.samples

    def __repr__(self) -> str:
        steps = ", ".join(f"{a.label} {ms(a.step_us)}" for a in self.analyses)
        return f"Report({self.index!r}: {steps})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "device": self.device,
            "scripts": self.scripts,
            "params": self.params,
            "params_text": self.params_text,
            "measured_us": self.measured_us,
            "baseline_us": self.baseline_us,
            "predicted_us": self.predicted_us,
            "speedup": self.speedup,
            "samples": self.samples,
            "throughput": self.throughput,
            "out_dir": self.out_dir,
            "index": self.index,
            "files": self.files,
            "analyses": msgspec.to_builtins(self.analyses),
            "warnings": self.warnings,
            "intervals": msgspec.to_builtins(self.intervals),
            "steps": msgspec.to_builtins(self.steps),
            "step_ranks": self.step_ranks,
            "ranks": msgspec.to_builtins(self.ranks),
            "straggler": msgspec.to_builtins(self.straggler),
            "versus_baseline": msgspec.to_builtins(self.versus_baseline),
            "memory": msgspec.to_builtins(self.memory),
        }


def report_files(out_dir: str, predicted: bool) -> list[str]:
    """The files a report may write into ``out_dir`` (the memory figure where the step's memory is known)."""
    stems = ["breakdown", "layers", "timeline_baseline"] + (["timeline_predicted"] if predicted else []) + ["memory"]
    return [os.path.join(out_dir, f"{s}.{ext}") for s in stems for ext in ("png", "svg")] + [
        os.path.join(out_dir, TIMELINE_FILE),
        os.path.join(out_dir, "report.json"),
        os.path.join(out_dir, "index.html"),
    ]


def check_report_dir(out_dir: str, inputs: Sequence[str], predicted: bool) -> None:
    """Refuse before any work: a path that is a file, a folder whose parent does not exist, or a report file that
    would land on an input of the run."""
    p = Path(out_dir)
    if not out_dir.strip():
        raise DaydreamError("--out: empty folder name; name the folder to write the report in")
    if p.exists() and not p.is_dir():
        raise DaydreamError(f"{p}: is a file, expected a folder to write the report in (--out)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DaydreamError(f"{p}: folder {parent} does not exist (--out)")
    if p.is_dir():
        for f in report_files(out_dir, predicted):
            check_output_path(f, inputs, "--out")


def write_report(
    workload: Workload | str | os.PathLike[str],
    scripts: Sequence[str] = (),
    params: dict[str, Any] | None = None,
    out_dir: str = "daydream-report",
    options: RunOptions | None = None,
) -> Report:
    """Simulate the workload (a trace path, or a :class:`~daydream.api.workload.Workload`) - the baseline - and, with
    ``scripts``, predict the change; analyse both, draw them, and write the folder ``out_dir``: index.html, the
    figures (PNG and SVG) and report.json."""
    work, opts = Workload.of(workload), options or RunOptions()
    path = work.path
    graph, has_gpu = work.load()
    base = replay_graph(graph, opts.policy)
    # before any script: the timeline shares the graph's task dicts
    analyses = [analyse(base.timeline, "baseline", base.report.critical_path)]
    job = rank_results(graph, base.timeline) if graph.graph.get("ranks") else None
    timelines = [base.timeline]
    # the step's memory before any script: from the trace's allocator events, else its shapes (none for a job)
    memory = [("baseline", memory_timeline(base.timeline, graph_memory(graph)))] if not graph.graph.get("ranks") else []
    result: WhatIf | None = None
    if scripts:
        result = run_whatif(
            graph,
            scripts,
            params,
            opts.policy,
            copy=True,
            on_print=lambda _line: None,
            budget=opts.budget,
            include_dirs=opts.include_dirs,
        )
        result.report.memory = with_capacity(result.report.memory, opts.memory_bytes)
        analyses.append(analyse(result.timeline, "predicted"))
        timelines.append(result.timeline)
        if memory:
            memory.append(("predicted", memory_timeline(result.timeline)))
    warnings = list(graph.graph.get("warnings", [])) + (result.script_warnings if result else [])
    if not has_gpu:
        warnings.insert(0, f"{path}: {CPU_ONLY}")
    with _written_whole(out_dir, report_files(out_dir, result is not None)):
        report = _write_folder(
            path,
            out_dir,
            graph,
            base,
            analyses,
            result,
            warnings,
            [t.step_rank() for t in timelines],
            job,
            [(k, m) for k, m in memory if m is not None],
        )
    return report


@contextlib.contextmanager
def _written_whole(out_dir: str, files: Sequence[str]) -> Iterator[None]:
    """A report folder is written whole or not at all: where writing fails or is interrupted, the files this run
    made go (those that were there before keep their last whole version), and the folder too if it made it."""
    made_dir = not os.path.isdir(out_dir)
    existed = {f for f in files if os.path.lexists(f)}

    def remove() -> None:
        for f in files:
            if f not in existed:
                with contextlib.suppress(OSError):
                    os.unlink(f)
        if made_dir:
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)

    try:
        with signals.on_abandon(remove):  # a signal's watchdog that ends the process removes them too
            yield
    except BaseException:
        remove()
        raise


def _write_folder(
    path: str,
    out_dir: str,
    graph: Any,
    base: Any,
    analyses: list[Any],
    result: WhatIf | None,
    warnings: list[str],
    step_ranks: list[int | None],
    job: tuple[list[RankResult], Straggler | None] | None,
    memory: list[tuple[str, MemoryTimeline]],
) -> Report:
    os.makedirs(out_dir, exist_ok=True)
    from daydream.presentation import plots

    intervals = [base.interval] + ([result.interval] if result is not None else [])
    files = plots.breakdown_figure(analyses, out_dir, intervals) + plots.layers_figure(analyses, out_dir)
    span = max(a.step_us for a in analyses)
    files += plots.timeline_figure(base.timeline, "baseline", out_dir, "timeline_baseline", span)
    if result is not None:
        files += plots.timeline_figure(result.timeline, "predicted", out_dir, "timeline_predicted", span)
    summary = (
        (result.report.memory if result is not None else replay_memory(base.timeline, estimate=True))
        if memory
        else None
    )
    if memory:
        capacity = getattr(summary, "capacity_bytes", None)
        files += plots.memory_figure(memory, out_dir, capacity)
    # the interactive timeline: both as processes of one Chrome-trace file, to zoom and search in Perfetto
    files.append(os.path.join(out_dir, TIMELINE_FILE))
    export_chrome_trace(
        [("baseline", base.timeline)] + ([("predicted", result.timeline)] if result is not None else []), files[-1]
    )
    report = Report(
        trace=path,
        out_dir=out_dir,
        index=os.path.join(out_dir, "index.html"),
        files=files,
        analyses=analyses,
        measured_us=base.measured_us,
        device=graph.graph.get("device"),
        scripts=result.scripts if result else [],
        params={k: json_param(v) for k, v in result.param_values.items()} if result else {},
        params_text=result.params_text if result else {},
        warnings=warnings,
        printed=result.printed if result else [],
        samples=result.samples if result else 1.0,
        intervals=intervals,
        steps=step_rows(base, result),
        step_ranks=step_ranks,
        ranks=[JobRank.of(r) for r in job[0]] if job is not None else None,
        straggler=job[1] if job is not None else None,
        versus_baseline=result.versus_baseline if result else None,
        memory=summary,
    )
    data = os.path.join(out_dir, "report.json")
    report.files += [data, report.index]
    write_atomically(data, json_bytes(report.to_dict(), indent=1), "--out")
    # names reach the page escaped by the template; their control characters, which HTML cannot hold, here
    write_atomically(report.index, utf8_text(markup_text(page(report))).encode("utf-8"), "--out")
    return report


# --- the page -------------------------------------------------------------------------------------------------------


def _ms(us: float | None) -> str:
    return "-" if us is None or (isinstance(us, float) and math.isnan(us)) else f"{us / 1e3:,.3f}"


def _range(intervals: list[Interval], i: int) -> str:
    """`` (33.900-36.800)``: the 90% interval of the i-th analysis, in ms; empty where it has no width."""
    if i >= len(intervals) or not intervals[i].half_width_pct:
        return ""
    iv = intervals[i]
    return " " + interval_range(_ms(iv.low_us), _ms(iv.high_us), iv.extrapolated, PAGE_MARKS)


def _interval_line(iv: Interval) -> str:
    return interval_line(iv, PAGE_MARKS)


NAME_CHARS = 90  # a name cell's text: a mangled template kernel's full name runs to 1,600 characters


class Cell(NamedTuple):
    """A table cell as the page shows it: its text, whether it is a figure (right-aligned), its whole text on hover
    where the cell shortened it."""

    text: str
    numeric: bool
    title: str | None = None


class PageTable(NamedTuple):
    """A titled table of the page: its rows shown, and those folded under a summary."""

    title: str
    ident: str
    head: list[str]
    shown: list[list[Cell]]
    more: list[list[Cell]]


def _cell(value: str, numeric: bool) -> Cell:
    """A long name (a kernel's signature) demangled, without its return type and parameters and shortened, whole on
    hover (and in report.json)."""
    if numeric or len(value) <= NAME_CHARS:
        return Cell(value, numeric)
    return Cell(kernel_short(value, NAME_CHARS), False, value)


def _table(title: str, head: list[str], rows: list[list[str]], ident: str, numeric_from: int = 1) -> PageTable:
    """Past SHOWN_ROWS rows, the rest fold under a summary that opens them (the page stays short enough to read the
    verdict and scan each section; report.json holds every row)."""
    cells = [[_cell(c, i >= numeric_from) for i, c in enumerate(r)] for r in rows]
    return PageTable(title, ident, head, cells[:SHOWN_ROWS], cells[SHOWN_ROWS:])


def _layer_rows(rows: list[LayerRow]) -> list[list[str]]:
    shown = [
        [
            r.name,
            r.phase,
            str(r.instances),
            _ms(r.critical_us),
            _ms(r.critical_gpu_us),
            _ms(r.gpu_us),
            _ms(r.cpu_us),
            _ms(r.span_us),
            str(r.kernels),
        ]
        for r in rows[:TOP_ROWS]
    ]
    rest = rows[TOP_ROWS:]
    if rest:  # the rows add up to the step: the rest in one
        shown.append(
            [
                f"{len(rest):,} more layers",
                "",
                str(sum(r.instances for r in rest)),
                _ms(sum(r.critical_us for r in rest)),
                _ms(sum(r.critical_gpu_us for r in rest)),
                _ms(sum(r.gpu_us for r in rest)),
                _ms(sum(r.cpu_us for r in rest)),
                "",
                str(sum(r.kernels for r in rest)),
            ]
        )
    return shown


def _kernel_rows(rows: list[KernelRow]) -> list[list[str]]:
    return [
        [
            r.name,
            r.kernel_class,
            r.bound or "-",
            str(r.count),
            _ms(r.total_us),
            f"{r.mean_us:,.1f}",
            f"{r.share_pct:.1f}",
        ]
        for r in rows[:TOP_ROWS]
    ]


LAYER_HEAD = [
    "layer",
    "phase",
    "n",
    "on path ms",
    "of it GPU",
    "GPU ms, all streams",
    "CPU ms, all threads",
    "mean span ms",
    "kernels",
]
KERNEL_HEAD = ["kernel", "class", "roofline", "count", "total ms (summed over streams)", "mean us", "% of GPU time"]


def _layers_title(kind: str, a: Analysis) -> str:
    return (
        f"{kind} ({a.label}): on path, time on the critical path, the rows adding up to the step ({_ms(a.step_us)} "
        "ms); mean span: an instance's first start to last end (spans overlap: not summed)"
    )


@cache
def _template() -> jinja2.Template:
    """templates/report.html.j2, autoescaped: every value the page shows is text from a trace or a script."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )
    return env.get_template("report.html.j2")


def page(report: Report) -> str:
    """The report as one static HTML page (the figures beside it in the folder)."""
    analyses = report.analyses
    a0 = analyses[0]
    pred = analyses[1] if len(analyses) > 1 else None
    meta = [("trace", report.trace), ("device", report.device or "-")]
    if report.scripts:
        meta.append(("scripts", " ".join(os.path.basename(s) for s in report.scripts)))
        meta.append(("params", ", ".join(f"{k} = {v}" for k, v in report.params_text.items()) or "-"))
    ivs = report.intervals
    # a job's step: its slowest rank's window, named
    of = [f" (the job's step: rank {r}'s window)" if r is not None else "" for r in report.step_ranks] + ["", ""]
    steps = [
        ["measured (the trace)", _ms(report.measured_us)],
        ["baseline (simulated)" + of[0], _ms(a0.step_us) + _range(ivs, 0)],
    ]
    if pred is not None:
        steps += [
            ["predicted" + of[1], _ms(pred.step_us) + _range(ivs, 1)],
            ["speedup (baseline / predicted)", f"{report.speedup:.3f}x"],
            ["throughput (samples/s after / before)", f"{report.throughput:.3f}x"],
        ]
        if report.versus_baseline is not None:
            v = report.versus_baseline
            steps.append(
                [
                    "against the baseline (the paired difference, its 90% interval: the trace's noise cancels)",
                    f"{v.verdict}: {v.difference_us / 1e3:+,.3f} ± {_ms(v.half_width_us)}",
                ]
            )
    each_step = [
        [
            r.step + (" (context)" if r.context else ""),
            _ms(r.measured_us) if r.measured_us else "-",
            _ms(r.baseline_us),
            *([_ms(r.predicted_us)] if pred is not None else []),
        ]
        for r in report.steps
    ]
    job = _job_part(report)
    breakdown_title = "Breakdown (ms)"
    if any(r is not None for r in report.step_ranks):
        breakdown_title = "Breakdown (ms) of the job's step, its slowest rank's window: " + "; ".join(
            f"{a.label} rank {r}'s" for a, r in zip(analyses, report.step_ranks)
        )
    return _template().render(
        name=os.path.basename(report.trace),
        job=job,
        meta=meta,
        warnings=report.warnings[:20],
        verdicts=[(a.label, a.verdict) for a in analyses],
        steps=_table("Step time (ms)", ["", "ms"], steps, "steps"),
        intervals=[(i, _interval_line(iv)) for i, iv in enumerate(ivs) if iv.parts],
        each_step=_table(
            "Each step (ms; the context step is simulated first, so that the measured ones start with what it left "
            "pending, and is not part of the step time)",
            ["step", "measured", "baseline", *(["predicted"] if pred is not None else [])],
            each_step,
            "each-step",
        ),
        breakdown=_table(
            breakdown_title,
            ["", *(a.label for a in analyses)],
            [
                [label, *(_ms(a.breakdown[k]) for a in analyses)]
                for k, label in [*BREAKDOWN_PARTS.items(), ("total_us", "total")]
            ],
            "breakdown",
        ),
        predicted=pred is not None,
        timeline_file=TIMELINE_FILE,
        layers=[
            _table(_layers_title("Layers", a), LAYER_HEAD, _layer_rows(a.layers), f"layers-{a.label}", 2)
            for a in analyses
        ],
        modules=(
            [
                _table(_layers_title("Modules", a), LAYER_HEAD, _layer_rows(a.modules), f"modules-{a.label}", 2)
                for a in analyses
            ]
            if any(a.modules for a in analyses)
            else []
        ),
        kernels=(
            [
                _table(f"Kernels by name ({a.label})", KERNEL_HEAD, _kernel_rows(a.kernels), f"kernels-{a.label}")
                for a in analyses
            ]
            if any(a.kernels for a in analyses)
            else []
        ),
        kernels_by_layer=[
            _table(
                f"Kernels by layer ({a.label})",
                ["layer", *KERNEL_HEAD[1:]],
                _kernel_rows(a.kernels_by_layer),
                f"kernels-by-layer-{a.label}",
            )
            for a in analyses
        ],
        roofline_device=a0.roofline_device or "the trace's GPU",
        idle_by_cause=_table(
            "Idle time by what it waited for (ms, over every stream; each idle stretch put down to what fixed the "
            "start of the task after it)",
            ["waiting for", *(a.label for a in analyses)],
            [
                [label, *(_ms(sum(r.idle_by_cause.get(k, 0.0) for r in a.streams)) for a in analyses)]
                for k, label in IDLE_CAUSES.items()
            ],
            "idle-by-cause",
        ),
        streams=[
            _table(
                f"Idle time per stream ({a.label})",
                ["stream", "busy ms", "idle ms", "idle %", "tasks"],
                [[s.stream, _ms(s.busy_us), _ms(s.idle_us), f"{s.idle_pct:.0f}", str(s.tasks)] for s in a.streams],
                f"streams-{a.label}",
            )
            for a in analyses
        ],
        critical_path=[_critical_path(a) for a in analyses],
        memory=_memory_table(report.memory),
        memory_note=_memory_note(report.memory),
    )


class JobPart(NamedTuple):
    """A job's part of the page: each rank's own window with its wait, the straggler with the evidence (its words,
    the collectives it held, where its time went), and why the longest window is not the straggler's."""

    ranks: PageTable
    legend: str
    straggler: str
    collectives: PageTable | None
    path: str | None
    longest: str | None


def _job_part(report: Report) -> JobPart | None:
    if not report.ranks:
        return None
    ranks = [
        [
            str(r.rank) + (f" (= {r.same_as})" if r.same_as is not None else ""),
            _ms(r.measured_us),
            _ms(r.baseline_us),
            f"{r.error_pct:+.2f}%",
            _ms(r.offset_us),
            _ms(r.wait_us),
            _ms(r.baseline_us - r.wait_us),
            _ms(r.held_us) if r.held_us else "-",
        ]
        for r in report.ranks
    ]
    first = min(report.ranks, key=lambda r: r.offset_us).rank
    legend = f"Each rank's step is its own window, from its own step's start to its end. {ranks_legend(first)}."
    table = _table(
        "Each rank's step (ms): its own window, from its own step's start",
        ["rank", "measured", "baseline", "error", "starts", "waiting", "working", "delays others"],
        ranks,
        "ranks",
    )
    s = report.straggler
    if s is None:
        return JobPart(
            table, legend, "Straggler: none (no rank reached a collective last on its own).", None, None, None
        )
    held = [
        [f"{c.kind or '-'} {c.id}", c.phase or "-", c.name, _ms(c.reached_us), _ms(c.held_us), f"rank {c.next_rank}"]
        for c in s.collectives[:TOP_ROWS]
    ]
    collectives = _table(
        f"Collectives rank {s.rank} reached last, the longest held first (ms; reached: after its own "
        "step's start; held: its arrival after the next-to-last rank's)",
        ["collective", "phase", "kernel", "reached", "held", "next-to-last"],
        held,
        "straggler-collectives",
        3,
    )
    mine = next(r for r in report.ranks if r.rank == s.rank)
    # a straggler delays others alone: the job has two ranks with tasks of their own or more, and a slowest of them
    slowest = next(r for r in report.ranks if r.rank == report.step_ranks[0])
    longest = longest_window_sentence(s, slowest.rank, slowest.baseline_us, slowest.wait_us, slowest.offset_us)
    return JobPart(
        table,
        legend,
        f"Straggler: {straggler_sentence(s)}.",
        collectives,
        _sentence(straggler_path_sentence(s, mine.baseline_us)) if s.tasks else None,
        _sentence(longest) if longest is not None else None,
    )


def _sentence(text: str) -> str:
    """Words that begin a paragraph of the page: a capital first, a full stop last."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _memory_table(m: MemoryChange | MemoryReplay | None) -> PageTable | None:
    """The step's peak memory: measured, baseline (and predicted with its interval), what holds each peak."""
    if m is None:
        return None
    if isinstance(m, MemoryChange):
        iv = m.predicted_interval
        rows = [
            ["measured (the trace)", nbytes(m.measured_peak_bytes) if m.measured_peak_bytes is not None else "-", ""],
            ["peak", nbytes(m.baseline_peak_bytes), nbytes(m.predicted_peak_bytes)],
            [
                "90% interval",
                "",
                f"{nbytes(iv.low_bytes)}-{nbytes(iv.high_bytes)}" + (", extrapolated" if iv.extrapolated else ""),
            ],
        ]
        for k in dict.fromkeys([*m.baseline_at_peak, *m.predicted_at_peak]):
            rows.append(
                [f"at the peak: {k}", nbytes(m.baseline_at_peak.get(k, 0.0)), nbytes(m.predicted_at_peak.get(k, 0.0))]
            )
        if m.capacity_bytes is not None:
            rows.append(["device memory", nbytes(m.capacity_bytes), "fits" if m.fits else "does not fit"])
        return _table(
            f"Peak memory ({m.device};"
            f" {'the trace' + chr(39) + 's allocator events' if m.source == 'trace' else 'estimated from shapes'})",
            ["", "baseline", "predicted"],
            rows,
            "memory",
        )
    rows = [
        ["measured (the trace)", nbytes(m.measured_peak_bytes) if m.measured_peak_bytes is not None else "-"],
        ["peak (replayed)", nbytes(m.baseline_peak_bytes)],
    ]
    rows += [[f"at the peak: {k}", nbytes(v)] for k, v in m.at_peak.items()]
    return _table(
        f"Peak memory ({m.device};"
        f" {'the trace' + chr(39) + 's allocator events' if m.source == 'trace' else 'estimated from shapes'})",
        ["", "baseline"],
        rows,
        "memory",
    )


def _memory_note(m: MemoryChange | MemoryReplay | None) -> str:
    return "" if m is None else f"Counted: {m.counted}. The categories at a peak add up to it."


def _critical_path(a: Analysis) -> PageTable:
    cp = a.critical_path
    rows = [["tasks", f"{cp.tasks:,}"], ["GPU ms", _ms(cp.gpu_us)], ["CPU ms", _ms(cp.cpu_us)]]
    rows += [[f"phase: {k}", _ms(v)] for k, v in cp.by_phase.items()]
    rows += [[f"kernel class: {k}", _ms(v)] for k, v in cp.by_kernel_class.items()]
    rows += [[f"task: {k}", _ms(v)] for k, v in cp.by_name.items()]
    return _table(f"Critical path ({a.label})", ["", "ms"], rows, f"critical-path-{a.label}")
