"""Terminal rendering of a replay with rich: the tables a person reads."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from daydream.files import clip
from daydream.graph.gradients import EXACT as EXACT_GRADIENT_SIZES
from daydream.graph.schema import CPU_ONLY, Causality
from daydream.names import kernel_label, middle, terminal_text
from daydream.simulation.timeline import BREAKDOWN_PARTS
from daydream.units import (
    TERMINAL_MARKS,
    change,
    interval_line,
    interval_parts,
    interval_range,
    ms,
    nbytes,
    signed_bytes,
)

if TYPE_CHECKING:  # what each renderer is given: importing them all would cost every command 0.2 s
    from daydream.api.compare import Against, Comparison
    from daydream.api.demo import Demo
    from daydream.api.embeddings import EmbeddingProfile
    from daydream.api.job import JobReplay
    from daydream.api.memory import MemoryChange, MemoryReplay
    from daydream.api.plan import Plans
    from daydream.api.replay import Replay, StepTime
    from daydream.api.validate import Ledger
    from daydream.api.whatif import WhatIf
    from daydream.dsl.library import ScriptInfo
    from daydream.perf.kernels.device_model import DeviceModel
    from daydream.perf.kernels.devices import Device
    from daydream.perf.trust.accuracy import Accuracy
    from daydream.perf.trust.uncertainty import Interval, Paired
    from daydream.presentation.page import Report


def _ms(us: float) -> str:
    """Microseconds as a number of milliseconds, for tables whose title gives the unit."""
    return f"{us / 1e3:,.3f}"


# Names, paths and messages come from traces and scripts: they reach rich as Text (never parsed as markup, so a
# kernel named "[/k]" prints as it is), cut to this many characters (a table cell or line stays a line).
MAX_TEXT = 500


def plain(value: object, limit: int = MAX_TEXT, style: str = "") -> Text:
    """Data for a table cell or a line: a Text of ``str(value)``, cut to ``limit`` characters."""
    return Text(terminal_text(clip(str(value), limit)), style=style)


def styled(*parts: str | Text | tuple[str, str]) -> Text:
    """A line of our own words (str, or (str, style)) and data (Text from :func:`plain`)."""
    return Text.assemble(*parts)


def warning_line(label: str, message: object) -> Text:
    return styled((label, "yellow"), " ", plain(message, 2000))


# Where a line may not break: a figure and its unit ("19.163 ms", "16.7 MiB"), a word and its figure ("thread 259"),
# a name and its "=" ("factor =": a long value may start the next line)
_KEPT = re.compile(r"(?<=\d) (?=(?:ms|us|s|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b)|(?<=[A-Za-z]) (?=\d)|(?<=\S) (?==)")


def line_width(console: Console) -> int | None:
    """The width our lines are wrapped to: the terminal's, or one given (``COLUMNS``, a console made with a width);
    None for a pipe with neither, whose reader (grep, a file) gets each line whole. Tables keep to rich's width
    either way."""
    given = getattr(console, "_width", None)  # (rich keeps COLUMNS, or the width it was made with, here)
    return max(20, console.width) if console.is_terminal or given is not None else None


def wrapped(text: str | Text, width: int | None, indent: str = "") -> list[Text]:
    """``text`` as lines of at most ``width`` characters, broken at spaces only (never inside a word, a figure's
    unit kept with it, a name with its value): the one way our prose and data lines fit a terminal. A paragraph's
    leading spaces start each of its lines, ``indent`` more its continuations; a word longer than a line (a path)
    is cut into lines, the one case a word breaks. ``width`` None: each paragraph whole, one line."""
    whole = text if isinstance(text, Text) else Text(clip(text, 4000))
    out: list[Text] = []
    for para in whole.split("\n", allow_blank=True):
        s = para.plain
        if width is None or len(s) <= width:
            out.append(para)
            continue
        lead = len(s) - len(s.lstrip(" "))
        kept = {m.start() for m in _KEPT.finditer(s)}
        cuts = [i for i in range(lead, len(s)) if s[i] == " " and i not in kept]
        tokens, start = [], lead
        for cut in [*cuts, len(s)]:
            if cut > start:
                tokens.append((start, cut))
            start = cut + 1
        prefix, more = s[:lead], s[:lead] + indent
        lines: list[tuple[int, int]] = []
        room = max(1, width - len(prefix))
        first: int | None = None
        last = 0
        for a, b in tokens:
            if first is not None and b - first <= room:
                last = b
                continue
            if first is not None:
                lines.append((first, last))
                room = max(1, width - len(more))
            while b - a > room:  # a word longer than a line
                lines.append((a, a + room))
                a += room
                room = max(1, width - len(more))
            first, last = a, b
        if first is not None:
            lines.append((first, last))
        for k, (a, b) in enumerate(lines):
            out.append(Text(prefix if k == 0 else more) + para[a:b])
    return out


def words(text: str | Text, console: Console, indent: str = "") -> None:
    """A line of our words with data in it (names from the trace), wrapped at word boundaries to the console's width
    (:func:`wrapped`), never read as markup."""
    for line in wrapped(text, line_width(console), indent):
        console.print(line, soft_wrap=True)


def show_table(table: Table, console: Console) -> None:
    """A table with its title said as a line above it (wrapped as our lines are: rich would fold a long title to the
    table's own width)."""
    title, table.title = table.title, None
    if title:
        words(title if isinstance(title, Text) else Text(str(title)), console)
    console.print(table)


def say_warnings(warnings: Sequence[str], console: Console, label: str = "warning:") -> bool:
    """Each warning as a line, but a trace's having no GPU activity: a fact about the trace, not something to act on,
    said on its device line (:func:`device_text`) by every command. Returns whether the trace is such."""
    cpu_only = False
    for w in warnings:
        if w.endswith(CPU_ONLY):
            cpu_only = True
            continue
        words(warning_line(label, w), console, "  ")
    return cpu_only


def device_text(name: str | None, kind: str | None, cpu_only: bool = False) -> str:
    """The device as every command names it: ``NVIDIA H100 80GB HBM3 (gpu)``, ``x86_64 (cpu)``; a trace without GPU
    activity says so (``CPU only (no GPU activity in the trace)`` where it names no device); ``unknown``."""
    if name is None and kind is None:
        return "CPU only (no GPU activity in the trace)" if cpu_only else "unknown"
    said = "no GPU activity in the trace" if cpu_only and kind != "cpu" else kind
    return (name or "unknown") + (f" ({said})" if said else "")


def _header(command: str, *parts: object) -> Text:
    """``daydream run TRACE amp``: the command's first line, its inputs one space apart (a library script by its
    name)."""
    return styled((f"daydream {command}", "b"), " ", plain(" ".join(str(p) for p in parts if p), 2000))


def script_label(path: str) -> str:
    """A script as a person names it: a library script by its name (``batch_size``), one's own by its path."""
    from daydream.dsl.library import library_name

    try:
        return library_name(path) or path
    except Exception:  # noqa: BLE001 - a path that cannot be looked up is shown as it is
        return path


def render_replay(result: Replay, console: Console) -> None:
    from daydream.api.replay import recording_device  # loaded already: it made ``result``

    d = result.report
    cpu_only = say_warnings(result.warnings, console)
    words(_header("simulate", d.trace), console)
    head = Table(show_header=False, box=None)
    head.add_row(
        "device", plain(device_text(*recording_device(result.graph), cpu_only)), "rank", f"{d.rank} of {d.world_size}"
    )
    head.add_row("tasks", f"{d.tasks:,}", "edges", f"{d.edges:,}")
    show_table(head, console)

    steps = Table(title="Iteration time", title_justify="left")
    steps.add_column("step")
    steps.add_column("measured", justify="right")
    steps.add_column("baseline (simulated)", justify="right")
    steps.add_column("error", justify="right")
    for s in d.steps:
        if s.context:  # simulated so that the step after it starts with what it left pending; not measured
            steps.add_row(styled(plain(s.name), (" (context)", "dim")), "", "", "")
            continue
        err = (s.baseline_us - s.measured_us) / s.measured_us * 100 if s.measured_us else 0.0
        steps.add_row(plain(s.name), ms(s.measured_us), ms(s.baseline_us), f"{err:+.2f}%")
    if sum(not s.context for s in d.steps) > 1:
        steps.add_row("[b]median[/]", ms(d.measured_us), ms(d.baseline_us), f"{d.error_pct:+.2f}%")
    if d.baseline_interval.half_width_pct:
        steps.add_row("90% interval", "", _range(d.baseline_interval), "")
    show_table(steps, console)
    if any(s.context for s in d.steps):
        words(CONTEXT_NOTE, console)
    words(_causality_line(d.edges_by_kind, d.causality, d.steps), console)

    show_table(breakdown_shares(d.breakdown, "Breakdown (baseline)"), console)
    if d.memory is not None:
        render_replay_memory(d.memory, console)

    cp = d.critical_path
    measured = sum(1 for s in d.steps if not s.context)
    per = f" (one step's share of the {measured} measured steps')" if measured > 1 else ""
    words(
        f"Critical path{per}: {cp.tasks:,} tasks; GPU holds it {ms(cp.gpu_us)}, CPU {ms(cp.cpu_us)}, adding up to "
        "the step; the top tasks' and layers' times are parts of it",
        console,
    )
    names, layers = list(cp.by_name.items()), list(cp.by_layer.items())
    # the times keep their widths; the names take the rest of the terminal, cut at their end (--json has them whole)
    time_w = max([4, *(len(ms(t)) for _, t in names + layers)])
    name_w = max([30, *(len(str(n)) for n, _ in names)])
    layer_w = max([31, *(len(str(n)) for n, _ in layers)])
    if console.width < 110:  # side by side the two need ~105 columns: one under the other, each fits 80
        for label, items, width in (
            ("top tasks on the critical path", names, name_w),
            ("top layers on the critical path", layers, layer_w),
        ):
            one = Table()
            one.add_column(
                label, overflow="ellipsis", no_wrap=True, max_width=max(20, min(width, console.width - time_w - 7))
            )
            one.add_column("time", justify="right", no_wrap=True, min_width=time_w)
            for name, t in items:
                one.add_row(plain(name), ms(t))
            show_table(one, console)
        return
    spare = console.width - 2 * time_w - 13  # the table's borders and padding: 13 columns
    layer_w = min(layer_w, max(31, spare // 3))
    name_w = min(name_w, spare - layer_w)
    crit = Table()
    crit.add_column("top tasks on the critical path", overflow="ellipsis", max_width=name_w, no_wrap=True)
    crit.add_column("time", justify="right", no_wrap=True, min_width=time_w)
    crit.add_column("top layers on the critical path", overflow="ellipsis", max_width=layer_w, no_wrap=True)
    crit.add_column("time", justify="right", no_wrap=True, min_width=time_w)
    for i in range(max(len(names), len(layers))):
        n = names[i] if i < len(names) else ("", None)
        la = layers[i] if i < len(layers) else ("", None)
        crit.add_row(
            plain(n[0]), ms(n[1]) if n[1] is not None else "", plain(la[0]), ms(la[1]) if la[1] is not None else ""
        )
    show_table(crit, console)


# what "(context)" on a step means, wherever steps are listed
CONTEXT_NOTE = (
    "(context): a step simulated before the measured one, so that the measured step starts with the work "
    "it left pending; not measured, not part of the step time"
)


def render_job(result: JobReplay, console: Console) -> None:
    """A simulated multi-rank job: each rank measured against its baseline (simulated), its own window with its wait
    beside it, the straggler the others wait for with the evidence, and the breakdown of the job's step."""
    from daydream.api.job import longest_window_sentence, ranks_legend  # loaded already: it made ``result``

    d = result.report
    cpu_only = say_warnings(result.warnings, console)
    words(_header("simulate", d.trace), console)
    pricing = (d.collectives or {}).get("pricing")
    world, simulated = d.world_size, d.simulated_ranks
    head = Table(show_header=False, box=None)
    head.add_row(
        "device",
        plain(device_text(d.device, d.device_type, cpu_only)),
        "ranks",
        (
            f"{world} ({simulated} simulated, the others share their tasks)"
            if world is not None and simulated < world
            else str(world)
        ),
    )
    head.add_row("tasks", f"{d.tasks:,}", "steps", plain(", ".join(d.steps) or "-"))
    if pricing is not None:
        head.add_row(
            "collectives",
            f"{pricing['collectives']:,}",
            "priced by",
            plain(f"{pricing['model']} ({pricing['modelled']} modelled, {pricing['as_traced']} as traced)"),
        )
    if d.workers is not None:
        used = d.workers
        head.add_row(
            "simulated by",
            f"{used.count} worker{'s' if used.count > 1 else ''} ({used.kind})",
            "rounds",
            f"{used.rounds:,}",
        )
    show_table(head, console)
    # numbers in ms, the unit in the title: the table fits 80 columns (its headers fold)
    table = Table(title="Each rank's step, ms: its own window, from its own step's start", title_justify="left")
    for col in ("rank", "measured", "baseline", "error", "starts", "waiting", "working", "delays others"):
        table.add_column(col, justify="right")
    for r in result.ranks:
        table.add_row(
            str(r.rank) + (f" (= {r.same_as})" if r.same_as is not None else ""),
            _ms(r.measured_us),
            _ms(r.step_us),
            f"{r.error_pct:+.2f}%",
            _ms(r.offset_us),
            _ms(r.wait_us),
            _ms(r.step_us - r.wait_us),
            _ms(r.held_us) if r.held_us else "-",
        )
    table.add_row(
        "[b]job[/]", _ms(result.measured_us), _ms(result.baseline_us), f"{100.0 * result.error:+.2f}%", "", "", "", ""
    )
    show_table(table, console)
    first = min(result.ranks, key=lambda r: r.offset_us).rank
    words(f"{ranks_legend(first)}; job: the job's step, its slowest rank's (rank {d.slowest_rank}'s)", console)
    s = result.straggler
    if s is not None:
        _straggler_block(s, next(r.step_us for r in result.ranks if r.rank == s.rank), "straggler", console)
        slowest = next(r for r in result.ranks if r.rank == d.slowest_rank)
        why = longest_window_sentence(s, slowest.rank, slowest.step_us, slowest.wait_us, slowest.offset_us)
        if why is not None:
            words(why, console)
    else:
        words("straggler: none (no rank reached a collective last on its own)", console)
    show_table(
        breakdown_shares(
            d.breakdown,
            f"Breakdown of the job's step, {ms(d.baseline_us)}: rank {d.slowest_rank}'s window (its slowest rank's)",
        ),
        console,
    )


if TYPE_CHECKING:  # what the job's renderers below read
    from daydream.api.whatif import WhatIfReport
    from daydream.simulation.ranks import Straggler

SHOWN_COLLECTIVES = 8  # the collectives a straggler held, in the terminal (the JSON and the page hold them all)


def _straggler_block(s: Straggler, step_us: float, label: str, console: Console) -> None:
    """The straggler named, with the evidence: its late start and held time, the collectives it reached last (the
    longest held first), and where its time went on the way."""
    from daydream.api.job import straggler_path_sentence, straggler_sentence

    words(f"{label}: {straggler_sentence(s)}", console)
    shown = s.collectives[:SHOWN_COLLECTIVES]
    rows = [
        (
            f"{c.kind or '-'} {c.id}",
            c.phase or "-",
            kernel_label(c.name),
            _ms(c.reached_us),
            _ms(c.held_us),
            f"rank {c.next_rank}",
        )
        for c in shown
    ]
    heads = ("collective", "phase", "kernel", "reached", "held", "next-to-last")
    # the figures keep their widths; the kernel's name gives way, cut at its end (--json has it whole)
    fixed = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads) if h != "kernel"]
    kernel_w = max(8, console.width - sum(fixed) - 3 * len(heads) - 1)
    held = Table(title=f"Collectives rank {s.rank} reached last, the longest held first (ms)", title_justify="left")
    widths = iter(fixed)
    for h in heads:
        if h == "kernel":
            held.add_column(h, overflow="ellipsis", no_wrap=True, max_width=kernel_w)
        else:
            held.add_column(
                h, justify="left" if h in ("collective", "phase") else "right", no_wrap=True, min_width=next(widths)
            )
    for row in rows:
        held.add_row(*(plain(x) for x in row))
    show_table(held, console)
    if len(s.collectives) > SHOWN_COLLECTIVES:
        words(f"... and {len(s.collectives) - SHOWN_COLLECTIVES:,} more (--json for all)", console)
    words(
        "reached: after its own step's start; held: its arrival after the next-to-last rank's, how much earlier "
        "the collective would have started without it; next-to-last: the rank the others would have waited for "
        "instead",
        console,
    )
    if s.tasks:
        words(straggler_path_sentence(s, step_us), console)


def _causality_line(edges_by_kind: dict[str, int], causality: Causality | None, steps: list[StepTime]) -> str:
    """What explains the timeline: the dependencies by kind, and what nothing in the graph explains."""
    edges = ", ".join(f"{k} {n:,}" for k, n in edges_by_kind.items())
    c = causality or Causality()
    weak = []
    if c.pinned_tasks:
        weak.append(f"{_count(c.pinned_tasks, 'task')} pinned to a release time")
    if c.unanchored_tasks:
        weak.append(
            f"{_count(c.unanchored_tasks, 'task')} with no dependency that explains its start "
            f"({ms(c.unanchored_lead_us)} of traced lead time dropped)"
        )
    if c.held_back_us:
        context = any(s.context for s in steps or ())
        first = "the context step (the step before the measured one)" if context else "the step"
        weak.append(
            f"work before {first} held it back up to {ms(c.held_back_us)} in the trace "
            f"({'it is' if context else 'the step is'} simulated with nothing pending)"
        )
    if c.bridged_orders:
        n = c.bridged_orders
        weak.append(
            f"{n:,} stretch{'' if n == 1 else 'es'} of work between the steps kept as traced on "
            f"{'its thread' if n == 1 else 'their threads'}"
        )
    return f"dependencies (the graph's edges, by kind): {edges}\n" + (
        "every task's start is explained by a dependency" if not weak else "not explained: " + "; ".join(weak)
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def breakdown_title(before: int | None, after: int | None) -> str:
    """The title of a breakdown before and after: what it sums over, a job's slowest rank's window (its step) where the
    timelines are a job's (``before``, ``after``: that rank; None: not a job)."""
    if before is None and after is None:
        return "Breakdown (the parts add up to each step)"
    if before == after:
        return f"Breakdown of the job's step, its slowest rank's window (rank {before}'s, both)"
    return (
        f"Breakdown of the job's step, its slowest rank's window (baseline: rank {before}'s; predicted: rank {after}'s)"
    )


def breakdown_table(
    before: dict[str, float], after: dict[str, float], title: str = "Breakdown (the parts add up to each step)"
) -> Table:
    """CPU only / GPU only / overlap / idle / total, before and after a change (each column adds up to its step)."""
    table = Table(title=title, title_justify="left")
    for col in ("", "baseline", "predicted", "change"):
        table.add_column(col, justify="right" if col else "left")
    for key, label in [*BREAKDOWN_PARTS.items(), ("total_us", "total")]:
        table.add_row(label, ms(before[key]), ms(after[key]), change(before[key], after[key], before["total_us"]))
    return table


def render_whatif(result: WhatIf, console: Console) -> None:
    """Baseline against prediction, where the time went, and what each statement did."""
    from daydream.api.replay import recording_device

    d = result.report
    cpu_only = say_warnings(d.warnings, console)
    words(_header("run", d.trace, *map(script_label, d.scripts)), console)
    words(plain(f"device: {device_text(*recording_device(result.graph), cpu_only)}"), console)
    if result.workers is not None:  # a job too large for one process: its ranks held apart (daydream.api.job_whatif)
        used = result.workers
        words(
            plain(
                f"simulated by {used.count} worker{'s' if used.count > 1 else ''} ({used.kind}) in {used.rounds:,} "
                "rounds, the scripts run on each rank where it lives"
            ),
            console,
        )
    if d.params_text:
        words(plain("params: " + ", ".join(f"{k} = {v}" for k, v in d.params_text.items()), 2000), console)
    head = Table(title="Iteration time", title_justify="left")
    for col in ("measured", "baseline (simulated)", "predicted", "speedup", "throughput"):
        head.add_column(col, justify="right")
    measured = d.measured_us
    head.add_row(
        ms(measured) if measured == measured else "-",
        ms(d.baseline_us),
        ms(d.predicted_us),
        f"[b]{d.speedup:.3f}x[/]",
        f"[b]{d.throughput:.3f}x[/]",
    )
    head.add_row("", _range(d.baseline_interval), _range(d.predicted_interval), "", "")
    show_table(head, console)
    words(speedup_note(d.samples), console)
    words(interval_note(d.predicted_interval), console)
    words(plain(versus_note(d.versus_baseline), 2000), console)
    if d.memory is not None:
        render_memory_change(d.memory, console)
    if d.ranks:
        _render_rank_changes(d, console)
    b_steps, a_steps = d.step_us.baseline, d.step_us.predicted
    if len(a_steps) > 1:
        per = Table(title="Per step (from the end of the step before to its end)", title_justify="left")
        for col in ("step", "baseline", "predicted", "change"):
            per.add_column(col, justify="right" if col != "step" else "left")
        context = {s.name for s in result.graph.graph.get("steps") or () if s.context}
        for name, a in a_steps.items():
            b = b_steps.get(name)
            label = styled(plain(name), (" (context)", "dim")) if name in context else plain(name)
            per.add_row(label, ms(b) if b is not None else "-", ms(a), change(b, a) if b is not None else "")
        show_table(per, console)
        if context & set(a_steps):
            words(CONTEXT_NOTE, console)
    slowest = d.slowest_rank
    title = breakdown_title(slowest.baseline, slowest.predicted) if slowest is not None else "Breakdown"
    show_table(breakdown_table(d.breakdown.baseline, d.breakdown.predicted, title), console)
    b_cls, a_cls = d.gpu_time_by_class.baseline, d.gpu_time_by_class.predicted
    if b_cls or a_cls:  # a CPU recording has no GPU time to show
        cls = Table(title="GPU time by kernel class (the step's kernels, summed over streams)", title_justify="left")
        for col in ("class", "baseline", "predicted", "change"):
            cls.add_column(col, justify="right" if col != "class" else "left")
        for name in sorted(set(b_cls) | set(a_cls), key=lambda n: -max(b_cls.get(n, 0.0), a_cls.get(n, 0.0)))[:12]:
            b, a = b_cls.get(name, 0.0), a_cls.get(name, 0.0)
            cls.add_row(plain(name), ms(b), ms(a), change(b, a, d.baseline_us))
        show_table(cls, console)
    st = Table(title="Statements", title_justify="left")
    rows = [
        (f"{os.path.basename(e.file)}:{e.line}", " ".join(e.statement.split()), e.describe()) for e in result.effects
    ]
    # widths set here, not left to the table: the place and the effect keep every figure (the effect folds at 80
    # columns); the statement's text gives way, cut at its end (the file:line says where it is in full)
    where_w = max([5, *(len(r[0]) for r in rows)])
    effect_w = max([6, *(len(r[2]) for r in rows)])
    spare = console.width - where_w - 10  # the table's borders and padding: 10 columns
    statement_w = min(max([9, *(len(r[1]) for r in rows)]), spare - effect_w)
    if statement_w < 30:
        statement_w = min(30, max([9, *(len(r[1]) for r in rows)]))
        effect_w = max(16, spare - statement_w)
    st.add_column("where", no_wrap=True, width=where_w)
    st.add_column("statement", overflow="ellipsis", no_wrap=True, width=statement_w)
    st.add_column("effect", overflow="fold", width=effect_w)
    for where, statement, effect in rows:
        st.add_row(plain(where), plain(statement), plain(effect))
    show_table(st, console)


def _render_rank_changes(d: WhatIfReport, console: Console) -> None:
    """A job's ranks before and after the scripts, each its own window with its wait beside it; whose step start the
    scripts moved; the straggler before, with the evidence, and after."""
    ranks = Table(title="Per rank, ms: each its own window, from its own step's start", title_justify="left")
    for col in ("rank", "measured", "baseline", "predicted", "change", "waiting before", "waiting after"):
        ranks.add_column(col, justify="right")
    for r in d.ranks or ():
        change = f"{100 * (r['predicted_us'] / r['baseline_us'] - 1):+.1f}%" if r["baseline_us"] else "-"
        ranks.add_row(
            str(r["rank"]),
            _ms(r["measured_us"]),
            _ms(r["baseline_us"]),
            _ms(r["predicted_us"]),
            change,
            _ms(r["baseline_wait_us"]),
            _ms(r["wait_us"]),
        )
    show_table(ranks, console)
    # a rank whose step the scripts start earlier has a longer window: it now waits for the others in it
    moved = [r for r in d.ranks or () if abs(r["offset_us"] - r["baseline_offset_us"]) >= 0.5]
    for r in moved[:3]:
        sooner = r["offset_us"] < r["baseline_offset_us"]
        words(
            f"rank {r['rank']}'s step starts {ms(abs(r['offset_us'] - r['baseline_offset_us']))} "
            f"{'earlier' if sooner else 'later'} ({ms(r['offset_us'])} after the first rank's, was "
            f"{ms(r['baseline_offset_us'])}): its window, from its own step's start, "
            f"{'grows' if sooner else 'shrinks'} with it; it waits {ms(r['wait_us'])} for the others in it "
            f"(was {ms(r['baseline_wait_us'])})",
            console,
        )
    if len(moved) > 3:
        words(f"... and {len(moved) - 3} more ranks' steps start at another time", console)
    if d.straggler is None:
        return
    before, after = d.straggler.baseline, d.straggler.predicted
    if before is not None:
        step = next(r["baseline_us"] for r in d.ranks or () if r["rank"] == before.rank)
        _straggler_block(before, step, "straggler (baseline)", console)
    else:
        words("straggler (baseline): none (no rank reached a collective last on its own)", console)
    words(
        "straggler (predicted): "
        + (
            f"rank {after.rank}, holding the others back {ms(after.held_us)} at "
            f"{_count(len(after.collectives), 'collective')}"
            if after is not None
            else "none (no rank reaches a collective last on its own)"
        ),
        console,
    )


def _range(iv: Interval | None) -> str:
    """``(33.900-36.800)``: a 90% interval under its value (ms), ``extrapolated`` where it is; empty with no width."""
    if iv is None or not iv.half_width_pct:
        return ""
    return interval_range(_ms(iv.low_us), _ms(iv.high_us), iv.extrapolated, TERMINAL_MARKS)


def interval_note(iv: Interval | None) -> str:
    """What the predicted interval is made of: 90% interval +-H%, driven by PART; each part and where it is from."""
    if iv is None or not iv.parts:
        return "interval: none (one step in the trace: no noise measured; no script run)"
    return interval_line(iv, TERMINAL_MARKS)


def versus_note(p: Paired) -> str:
    """The prediction against the baseline: the verdict, the difference and its 90% interval's half-width."""
    where = "within" if p.verdict == "not decided" else "beyond"
    return (
        f"against the baseline: {p.verdict}: {p.difference_us / 1e3:+,.3f} ms, {where} the 90% interval of the "
        f"difference, +-{p.half_width_us / 1e3:,.3f} ms (the scripts' measured errors; the trace's noise cancels in "
        "a difference)"
    )


def speedup_note(samples: float | None = None) -> str:
    """What the speedup and throughput columns mean, and the samples per step a script left (None: several rows,
    each its own)."""
    per_step = (
        ""
        if samples is None
        else " (the same samples per step)"
        if samples == 1
        else f" ({samples:g}x the samples per step)"
    )
    return (
        f"speedup: baseline / predicted step time (above 1 is faster); throughput: samples/s after / before{per_step}"
    )


def render_demo(demo: Demo, console: Console) -> None:
    """``daydream demo``: the replayed step, where its time goes, and each what-if's prediction."""
    d = demo.report
    cpu_only = say_warnings(d.warnings, console, "note:")
    trace = _near(d.trace)
    words(_header("demo", trace), console)
    words(plain(f"device: {device_text(d.device, d.device_type, cpu_only)}"), console)
    head = Table(title="The recorded step, replayed", title_justify="left")
    for col in ("measured", "baseline (simulated)", "error"):
        head.add_column(col, justify="right")
    err = (d.baseline_us - d.measured_us) / d.measured_us * 100 if d.measured_us else 0.0
    head.add_row(ms(d.measured_us), ms(d.baseline_us), f"{err:+.2f}%")
    show_table(head, console)
    show_table(breakdown_shares(d.breakdown, "Where the time goes"), console)
    # the interval as its half-width (as compare and plan show it): the label keeps the room to stay one line at 80
    table = Table(title=f"What if (baseline: {ms(d.baseline_us)} per step)", title_justify="left")
    for col in ("#", "optimization", "predicted", "±", "speedup", "throughput"):
        table.add_column(col, justify="left" if col == "optimization" else "right", no_wrap=col != "optimization")
    labels = []
    for w in d.whatifs:
        label = w.script + "".join(f" {k}={v}" for k, v in w.params.items())
        labels.append((label, w.ties))
        table.add_row(
            f"{w.rank}{'=' if w.ties else ''}",
            plain(label),
            ms(w.predicted_us),
            _half_width(w.interval),
            f"{w.speedup:.3f}x",
            f"[b]{w.throughput:.3f}x[/]",
        )
    show_table(table, console)
    words(
        speedup_note() + "; ±: the 90% interval's half-width: the trace's own step-to-step noise and each script's "
        "largest error on the validation ledger",
        console,
    )
    words(
        plain(
            RANKING_NOTE.replace("faster", "ahead in throughput")
            + ("; tied: " + tie_pairs(labels) if any(t for _, t in labels) else ""),
            4000,
        ),
        console,
    )
    verdicts = {
        v: [lab for (lab, _), w in zip(labels, d.whatifs) if w.versus_baseline.verdict == v]
        for v in ("faster", "slower", "not decided")
    }
    said = "; ".join(f"{v}: {', '.join(names)}" for v, names in verdicts.items() if names)
    if said:
        words(plain(f"step time against the baseline, by the same paired rule: {said}", 4000), console)
    extrapolated = [lab for (lab, _), w in zip(labels, d.whatifs) if w.interval is not None and w.interval.extrapolated]
    if extrapolated:
        words(plain(f"{EXTRAPOLATED}: {', '.join(extrapolated)}", 4000), console)
    with_memory = [(lab, w.memory) for (lab, _), w in zip(labels, d.whatifs) if w.memory is not None]
    if with_memory:
        first = with_memory[0][1]
        assert first is not None
        words(
            plain(
                f"peak memory ({_source(first.source, first.device)}; baseline {nbytes(first.baseline_peak_bytes)}): "
                + "; ".join(f"{lab} {nbytes(m.predicted_peak_bytes)}" for lab, m in with_memory if m is not None),
                4000,
            ),
            console,
        )
    for w in d.whatifs:
        words(styled("  ", plain(w.script, style="b"), ": ", plain(w.summary, 2000)), console, "  ")
    for sk in d.skipped:
        words(styled("  ", plain(f"{sk.script}: not applied: {sk.reason}", 2000, style="dim")), console, "  ")
    words(plain(f"one at a time, with every table: daydream run {trace} SCRIPT [-p NAME=VALUE]", 2000), console)


def _near(path: str) -> str:
    """A path as the user would type it here: relative to the working folder where it is below it (the bundled
    trace, run from a checkout), else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return rel if not rel.startswith("..") and len(rel) < len(path) else path


# said under every ranking whose intervals some scenario's widened
EXTRAPOLATED = "extrapolated (a script or param the validation ledger never measured; the interval widened)"


def _half_width(iv: Interval | None) -> str:
    """``±13%``: a 90% interval as its half-width, in % of its value (empty with no width)."""
    return f"±{iv.half_width_pct:.0f}%" if iv is not None and iv.half_width_pct else ""


def _held(at_peak: dict[str, float]) -> str:
    """``activations 1.50 GiB, gradients 0.38 GiB``: what holds memory at a peak, largest first."""
    return ", ".join(f"{k} {nbytes(v)}" for k, v in sorted(at_peak.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.5)


def _source(source: str, device: str) -> str:
    return (
        f"{device}, from the trace's allocator events"
        if source == "trace"
        else f"{device}, estimated from the trace's shapes (no allocator events: record with profile_memory=True)"
    )


def render_replay_memory(m: MemoryReplay, console: Console) -> None:
    """The step's peak memory: measured (the trace's own totals) and replayed, and what holds it at the peak."""
    measured = f"measured {nbytes(m.measured_peak_bytes)}, " if m.measured_peak_bytes is not None else ""
    capacity = f" of {nbytes(m.capacity_bytes)}" if m.capacity_bytes else ""
    words(
        plain(
            f"Peak memory ({_source(m.source, m.device)}): {measured}replayed {nbytes(m.baseline_peak_bytes)}"
            f"{capacity}; at the peak: {_held(m.at_peak)}",
            2000,
        ),
        console,
    )
    words(plain(f"  counted: {m.counted}", 2000), console)


def render_memory_change(m: MemoryChange, console: Console) -> None:
    """The step's peak memory before and after a what-if, its 90% interval, and whether it fits."""
    table = Table(title=f"Peak memory ({_source(m.source, m.device)})", title_justify="left")
    for col in ("", "baseline", "predicted", "change"):
        table.add_column(col, justify="right" if col else "left")
    iv = m.predicted_interval
    table.add_row(
        "peak",
        nbytes(m.baseline_peak_bytes),
        nbytes(m.predicted_peak_bytes),
        signed_bytes(m.predicted_peak_bytes - m.baseline_peak_bytes),
    )
    table.add_row(
        "90% interval",
        "",
        interval_range(nbytes(iv.low_bytes), nbytes(iv.high_bytes), iv.extrapolated, TERMINAL_MARKS),
        "",
    )
    for category in dict.fromkeys([*m.baseline_at_peak, *m.predicted_at_peak]):
        b, a = m.baseline_at_peak.get(category, 0.0), m.predicted_at_peak.get(category, 0.0)
        table.add_row(f"  {category}", nbytes(b), nbytes(a), signed_bytes(a - b))
    show_table(table, console)
    fits = (
        ""
        if m.fits is None
        else (
            f"; fits the device's {nbytes(m.capacity_bytes)}"
            if m.fits
            else f"; does NOT fit the device's {nbytes(m.capacity_bytes)}"
        )
    )
    measured = f"measured {nbytes(m.measured_peak_bytes)} before; " if m.measured_peak_bytes is not None else ""
    words(
        plain(f"memory: {measured}the categories at each peak add up to it{fits}; counted: {m.counted}", 2000), console
    )
    if iv.parts:
        words(plain("memory interval: " + interval_parts(iv.parts, TERMINAL_MARKS), 2000), console)


def breakdown_shares(bd: dict[str, float], title: str) -> Table:
    """One timeline's breakdown: each part's time and share."""
    brk = Table(title=title, title_justify="left")
    for col in BREAKDOWN_PARTS.values():
        brk.add_column(col, justify="right")
    total = bd["total_us"] or 1.0
    brk.add_row(*(f"{ms(bd[k])} ({bd[k] / total:.0%})" for k in BREAKDOWN_PARTS))
    return brk


def render_script_list(scripts: list[ScriptInfo], console: Console) -> None:
    """``daydream list``: each script's name, first docstring line and params, as a listing (a table's narrow
    columns would fold a regex param mid-word at 80 columns): the name, then its lines indented, each wrapped at
    word boundaries, a param never apart from its value."""
    if not scripts:
        console.print("no .whatif scripts found", highlight=False)
        return
    words("What-if scripts (daydream run TRACE NAME -p PARAM=VALUE; the params with their defaults)", console)
    for s in scripts:
        if s.error is not None:  # said in full on stderr (the command line); here its first line
            words(
                styled(
                    plain(s.name, style="b red"),
                    ": ",
                    plain(f"cannot be used: {s.error.splitlines()[0]}", 2000, style="red"),
                ),
                console,
                "  ",
            )
            continue
        words(styled(plain(s.name, style="b"), ": ", plain(s.summary, 2000)), console, "  ")
        if s.params:
            words(plain("  params: " + ", ".join(f"{n} = {v}" for n, v in s.params), 2000), console, "  ")


def render_accuracy(rows: list[Accuracy], console: Console) -> None:
    """``daydream models accuracy``: each model's held-out error, as the papers state it."""
    table = Table(
        title="Model accuracy on held-out data (GMAE: geometric mean of |predicted - measured| / measured)",
        title_justify="left",
    )
    table.add_column("model", ratio=1, overflow="fold")
    table.add_column("GMAE", justify="right", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column(
        "checked against", ratio=2, overflow="fold"
    )  # names and data fold at 80 columns; the figures keep their widths
    for r in rows:
        table.add_row(plain(r.name), f"{r.gmae_pct:.2f}%", str(r.n), plain(r.data))
    show_table(table, console)


def render_ledger(ledger: Ledger, console: Console) -> None:
    """``daydream validate``: each case's prediction next to its measured runs and the naive predictions."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1f}%"

    def short(us: float, spread: float) -> str:
        return f"{us / 1e3:.2f} ms ±{spread:.0f}%"

    table = Table(title=plain(f"Predictions of measured changes ({ledger.path})", 2000), title_justify="left")
    table.add_column("case")
    for name in ("before", "after (measured)", "predicted", "error", "no change", "ratio"):
        table.add_column(name, justify="right")
    for c in ledger.cases:
        after = short(c.measured_us, c.spread_pct) + ("" if c.moved else " (noise)")
        predicted = "stopped" if c.predicted_us is None else f"{c.predicted_us / 1e3:.2f} ms"
        table.add_row(
            plain(c.name),
            short(c.before_us, c.before_spread_pct),
            after,
            predicted,
            pct(c.error_pct),
            pct(c.no_change_error_pct),
            pct(c.ratio_error_pct),
        )
    geo = ledger.geomean_error_pct
    if geo is not None:
        ratio = ledger.ratio_geomean_error_pct
        stopped = len(ledger.cases) - len(ledger.predicted)
        label = f"geomean |error|, {len(ledger.cases)} cases" + (
            f" ({stopped} stopped: as no change)" if stopped else ""
        )
        table.add_row(
            label,
            "",
            "",
            "",
            f"{geo:.1f}%",
            f"{ledger.no_change_geomean_error_pct:.1f}%",
            "-" if ratio is None else f"{ratio:.1f}%",
            style="bold",
        )
    show_table(table, console)
    words(
        "±: spread of the runs (half their range); (noise): the change moved the time less than the two "
        "settings' spreads; ratio: the BEFORE times the case's whole-step ratio",
        console,
    )
    for c in ledger.cases:
        if c.predicted_us is None:
            words(plain(f"{c.name}: no prediction: {c.message}", 2000), console)
        elif c.moved and not c.beats_no_change:
            words(plain(f'{c.name}: the prediction is no closer than "no change"', 2000), console)
    cov = ledger.coverage
    if cov.cases:
        words(
            plain(
                "90% intervals (each case's BEFORE noise and its scripts' largest error on the other cases): "
                f"{cov.covered} of {cov.cases} measured AFTERs inside ({cov.coverage_pct:.0f}%); median half-width "
                f"{cov.median_half_width_pct:.1f}% against a median |error| of {cov.median_abs_error_pct:.1f}%",
                2000,
            ),
            console,
        )
        for c in ledger.cases:
            if c.interval is not None and not c.covered:
                words(
                    plain(
                        f"  outside: {c.name}: measured {ms(c.measured_us)}, predicted {ms(c.interval.value_us)} "
                        f"({ms(c.interval.low_us)}-{ms(c.interval.high_us)})",
                        2000,
                    ),
                    console,
                )
    if ledger.memory_cases:
        _render_memory_ledger(ledger, console)


def _render_memory_ledger(ledger: Ledger, console: Console) -> None:
    """The memory cases: each peak predicted next to the AFTER's measured one and "no change"."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1f}%"

    table = Table(title="Predictions of measured peak memory (the traces' allocator events)", title_justify="left")
    table.add_column("case")
    for name in ("before", "after (measured)", "predicted", "error", "no change"):
        table.add_column(name, justify="right")
    for c in ledger.memory_cases:
        after = nbytes(c.measured_bytes) + ("" if c.moved else " (same)")
        predicted = "stopped" if c.predicted_bytes is None else nbytes(c.predicted_bytes)
        table.add_row(
            plain(c.name), nbytes(c.before_bytes), after, predicted, pct(c.error_pct), pct(c.no_change_error_pct)
        )
    geo, nc = ledger.memory_geomean_error_pct, ledger.memory_no_change_geomean_error_pct
    if geo is not None and nc is not None:
        table.add_row(
            f"geomean |error|, {len(ledger.memory_cases)} cases", "", "", "", f"{geo:.2f}%", f"{nc:.2f}%", style="bold"
        )
    show_table(table, console)
    cov = ledger.memory_coverage
    if cov.cases:
        words(
            plain(
                f"(same): the change did not move the peak; 90% intervals: {cov.covered} of {cov.cases} measured "
                f"peaks inside ({cov.coverage_pct:.0f}%), median half-width {cov.median_half_width_pct:.1f}%",
                2000,
            ),
            console,
        )
    for c in ledger.memory_cases:
        if c.predicted_bytes is None:
            words(plain(f"{c.name}: no prediction: {c.message}", 2000), console)
        elif c.moved and not c.beats_no_change:
            words(plain(f'{c.name}: the predicted peak is no closer than "no change"', 2000), console)


def render_devices(devices: list[Device], console: Console) -> None:
    """``daydream models devices``: the catalog's peaks per GPU. Narrower than 110 columns the full names go (the
    keys say the part; ``--json`` has every field) and the columns are set apart by spaces, so that every figure shows
    whole at 80."""
    wide = console.width >= 110
    table = Table(
        title="Device catalog (kernels/devices.toml; dense peaks)",
        title_justify="left",
        **({} if wide else {"box": box.SIMPLE_HEAD, "padding": (0, 1), "pad_edge": False, "collapse_padding": True}),
    )
    table.add_column("name", no_wrap=True)
    if wide:
        table.add_column("GPU", ratio=1)
    for col in (
        "fp32",
        "tf32",
        "fp16",
        "bf16",
        "fp8",
        "HBM GB/s" if wide else "GB/s",
        "L2 MB" if wide else "L2",
        "SMs",
        "PCIe",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for d in devices:
        peaks = [
            f"{d.peak_tflops[k]:g}" if k in d.peak_tflops else "-" for k in ("fp32", "tf32", "fp16", "bf16", "fp8")
        ]
        full = [plain(d.full_name)] if wide else []
        table.add_row(plain(d.key), *full, *peaks, f"{d.hbm_gbps:g}", f"{d.l2_mb:g}", str(d.sms), f"gen{d.pcie_gen}")
    show_table(table, console)
    words('TFLOP/s per dtype; `-p device=NAME` / device = "NAME" in scripts take the first column.', console)


def render_kernel_model(model: DeviceModel, console: Console) -> None:
    """``daydream models kernels``: the device-swap model's error per class and target GPU, that GPU left out."""
    table = Table(
        title=plain(
            f"Device swaps, kernel by kernel (fitted on {model.data}, {model.dtype}): error of the "
            "predicted target/source time, each GPU left out (GMAE)",
            2000,
        ),
        title_justify="left",
    )
    table.add_column("class", no_wrap=True)
    table.add_column("target GPU", no_wrap=True)
    table.add_column("kernel pairs", justify="right")
    table.add_column("measured target", justify="right")
    table.add_column("datasheet only", justify="right")
    table.add_column("roofline ratio", justify="right")
    for r in model.accuracy:
        table.add_row(
            plain(r.kernel_class),
            plain(r.target),
            f"{r.pairs:,}",
            f"{r.calibrated_gmae_pct:.1f}%",
            f"{r.gmae_pct:.1f}%",
            f"{r.roofline_gmae_pct:.1f}%",
        )
    show_table(table, console)
    words(
        "measured target: the target's own kernels fitted its efficiency and fixed time (a GPU the model has measured: "
        + ", ".join(sorted(model.anchors))
        + "); datasheet only: the median of its vendor's measured GPUs (any other GPU, and GEMMs in a dtype other than "
        + model.dtype
        + ": said as extrapolated); roofline ratio: the rule without the model.",
        console,
    )


# short column names: the comparison table fits 80 columns
_BREAKDOWN = tuple(zip(BREAKDOWN_PARTS, ("CPU", "GPU", "both", "idle")))


def render_comparison(result: Comparison, console: Console, against: Against | None = None) -> None:
    """``daydream compare``: the scenarios by predicted step time, where each one's time goes and what bounds it;
    those the scripts stopped on; against saved results, each regression and what changed since."""
    cpu_only = say_warnings(result.warnings, console)
    p, b = result.provenance, result.baseline
    words(_header("compare", p.trace, p.scenarios_file), console)
    if cpu_only:
        words(plain(f"device: {device_text(p.device, None, cpu_only)}"), console)
    measured = f"; measured {ms(b.measured_us)}" if b.measured_us == b.measured_us else ""
    words(
        plain(
            f"baseline (the trace unchanged, simulated): {ms(b.baseline_us)}{measured}; bound by {b.bound.text()}", 2000
        ),
        console,
    )
    # numbers in ms, shares in % of each scenario's step, the units in the title: the table fits 80 columns
    table = Table(
        title="Scenarios by predicted step time (ms; breakdown in % of the step)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("#", justify="right")
    table.add_column("scenario", overflow="fold")
    table.add_column("step", justify="right")
    table.add_column("speedup", justify="right")
    predicted = [s for s in result.scenarios if s.predicted_us is not None]
    for _, label in _BREAKDOWN:
        table.add_column(label, justify="right")
    table.add_column("bound by", overflow="fold")
    tied = any(s.ties for s in predicted)
    for i, s in enumerate(predicted, 1):
        bd, total = s.breakdown or {}, (s.breakdown or {}).get("total_us") or 1.0
        place = f"{s.rank if s.rank is not None else i}{'=' if s.ties else ''}"
        # the half-width beside the step where the terminal has the room, under it at 80 columns
        step = _ms(s.predicted_us or 0.0) + (
            (" " if console.width >= 100 else "\n") + _half_width(s.interval) if _half_width(s.interval) else ""
        )
        table.add_row(
            place,
            plain(s.name),
            step,
            f"{s.speedup or 0.0:.3f}x",
            *(f"{100 * bd.get(k, 0.0) / total:.0f}" for k, _ in _BREAKDOWN),
            plain(s.bound.text() if s.bound else "-"),
        )
    total = b.breakdown.get("total_us") or 1.0
    table.add_row(
        "",
        "[i]baseline[/]",
        _ms(b.baseline_us),
        "1.000x",
        *(f"{100 * b.breakdown.get(k, 0.0) / total:.0f}" for k, _ in _BREAKDOWN),
        plain(b.bound.text()),
    )
    show_table(table, console)
    words(
        "speedup: baseline over predicted (above 1 is faster); CPU/GPU: only that one busy; both: the two at once; "
        "bound by: the critical path's largest shares; ±: the 90% interval's half-width",
        console,
    )
    if tied:
        words(plain(RANKING_NOTE + "; tied: " + tie_pairs([(s.name, s.ties) for s in predicted]), 4000), console)
    verdicts = {
        v: [s.name for s in predicted if s.versus_baseline and s.versus_baseline.verdict == v]
        for v in ("faster", "slower", "not decided")
    }
    if any(verdicts.values()):
        said = "; ".join(f"{v}: {', '.join(names)}" for v, names in verdicts.items() if names)
        words(plain(f"against the baseline, by the same paired rule: {said}", 4000), console)
    extrapolated = [s.name for s in predicted if s.interval is not None and s.interval.extrapolated]
    if extrapolated:
        words(plain(f"{EXTRAPOLATED}: " + ", ".join(extrapolated), 4000), console)
    # throughput where a scenario changes the samples a step processes (batch_size); elsewhere it is the speedup. A
    # line of its own: the table keeps to 80 columns
    more = [
        s
        for s in predicted
        if s.throughput is not None and s.speedup and abs(s.throughput - s.speedup) > 1e-9 * s.speedup
    ]
    if more:
        words(
            plain(
                "throughput (samples/s after over before; these scenarios change the samples a step processes): "
                + "; ".join(f"{s.name} {s.throughput:.3f}x" for s in more),
                4000,
            ),
            console,
        )
    with_memory = [s for s in predicted if s.memory is not None]
    if with_memory:
        first = with_memory[0].memory
        assert first is not None
        mem = Table(
            title=f"Peak memory ({_source(first.source, first.device)}; baseline {nbytes(first.baseline_peak_bytes)})",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        for col in ("scenario", "peak", "90% interval", "change", "fits"):
            mem.add_column(col, justify="left" if col == "scenario" else "right", overflow="fold")
        for s in with_memory:
            m = s.memory
            assert m is not None
            iv = m.predicted_interval
            mem.add_row(
                plain(s.name),
                nbytes(m.predicted_peak_bytes),
                f"{nbytes(iv.low_bytes)}-{nbytes(iv.high_bytes)}",
                signed_bytes(m.predicted_peak_bytes - m.baseline_peak_bytes),
                "-" if m.fits is None else "yes" if m.fits else "[red]no[/]",
            )
        show_table(mem, console)
    for s in result.scenarios:
        if s.predicted_us is None:
            words(styled(("not predicted:", "yellow"), " ", plain(f"{s.name}: {s.error}", 2000)), console)
    if against is not None:
        render_against(against, console)


# the ranking rule, said once wherever a ranking is shown (docs/compare.md says it with an example)
RANKING_NOTE = (
    "#: one more than the number decidedly faster; =: tied with another, the interval of the difference of the two "
    "predictions holds zero (the trace's noise cancels in a difference; a model both use errs alike in both)"
)


def tie_pairs(rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    """Each tie once, from each row's name and the names it is tied with: rows all tied with each other as one
    group (``a = b = c``), the ties left over as pairs (``a = d``)."""
    tied = {name: set(ties) for name, ties in rows}
    said: set[frozenset[str]] = set()
    groups = []
    for name, ties in rows:
        group = [name]
        for other in ties:  # grow a group whose members are all tied with each other
            if all(other in tied.get(g, ()) for g in group):
                group.append(other)
        pairs = {frozenset((a, b)) for i, a in enumerate(group) for b in group[i + 1 :]}
        if len(group) > 1 and not pairs <= said:
            said |= pairs
            groups.append(" = ".join(group))
        for other in ties:
            key = frozenset((name, other))
            if key not in said:
                said.add(key)
                groups.append(f"{name} = {other}")
    return "; ".join(groups)


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:,.2f}"


def render_plans(result: Plans, console: Console, top: int | None = None) -> None:
    """``daydream plan``: the plans by throughput among those that fit, each one's step time, interval, memory and
    what bounds it; then those that do not fit, and those not predicted."""
    cpu_only = say_warnings(result.warnings, console)
    cap = f"{_gib(result.memory_bytes)} GiB" if result.memory_bytes is not None else "memory unknown"
    words(
        _header(
            "plan",
            f"{result.trace}: {result.gpus} GPUs ({result.gpus_per_node} a node), {result.device or 'CPU'}, {cap} each",
        ),
        console,
    )
    if cpu_only:
        words(plain(f"device: {device_text(result.device, None, cpu_only)}"), console)
    estimated = "" if result.gradient_sizes in EXACT_GRADIENT_SIZES else f" (estimated from {result.gradient_sizes})"
    words(
        plain(
            f"one GPU (the trace, simulated): {ms(result.baseline_us)} a step; {result.parameters:,} parameters"
            f"{estimated}, {result.optimizer or 'no optimizer step'}"
            + (
                f"; {_gib(result.baseline_memory_bytes)} GiB of state and activations (the plans' memory model, "
                "from the trace's shapes: +-9%)"
                if result.baseline_memory_bytes
                else ""
            ),
            2000,
        ),
        console,
    )
    for note in result.notes:
        words(plain(f"note: {note}", 2000), console)
    predicted = [p for p in result.plans if p.predicted_us is not None]
    shown = predicted if top is None else predicted[:top]
    table = Table(
        title=(
            "Plans by throughput (throughput: samples/s over one GPU's; memory: the fullest rank's GiB, "
            "state + activations)"
        ),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("plan", no_wrap=True)
    table.add_column("step (ms)", justify="right", no_wrap=True)
    table.add_column("throughput", justify="right", no_wrap=True)
    table.add_column("memory (GiB)", justify="right", no_wrap=True)
    table.add_column("bound by", overflow="fold")
    for p in shown:
        fullest = max(p.memory, key=lambda m: m.total)
        state = fullest.parameters + fullest.gradients + fullest.optimizer + fullest.buckets
        place = "-" if p.fits is False else f"{p.rank}{'=' if p.ties else ''}"
        step = _ms(p.predicted_us or 0.0) + (f" {_half_width(p.interval)}" if _half_width(p.interval) else "")
        memory = f"{_gib(p.memory_bytes)} ({_gib(state)}+{_gib(fullest.activations)})" + (
            " [red]no fit[/]" if p.fits is False else ""
        )
        table.add_row(
            place,
            plain(p.name),
            step,
            f"{p.throughput or 0.0:,.2f}x",
            Text.from_markup(memory),
            plain(p.bound.text() if p.bound else "-"),
        )
    show_table(table, console)
    if top is not None and len(predicted) > top:
        words(plain(f"... and {len(predicted) - top} more plans (--top, or --json for all)"), console)
    extrapolated = [p.name for p in shown if p.interval is not None and p.interval.extrapolated]
    if extrapolated:
        words(plain(f"{EXTRAPOLATED}: {len(extrapolated)} of {len(shown)} shown", 4000), console)
    batch = (
        "each replica keeps the traced batch"
        if result.global_batch is None
        else (
            f"{result.global_batch:,} samples a step, {result.global_batch:,} / dp a replica (the trace:"
            f" {result.batch:,})"
        )
    )
    words(
        plain(
            f"plan: data x tensor x pipeline parallel ranks, m micro-batches; {batch}; ±: the 90% interval's "
            "half-width; -: does not fit",
            4000,
        ),
        console,
    )
    if any(p.ties for p in shown):
        words(
            plain(
                RANKING_NOTE.replace("faster", "ahead in throughput")
                + "; tied: "
                + tie_pairs([(p.name, [t for t in p.ties if t in {q.name for q in shown}]) for p in shown]),
                4000,
            ),
            console,
        )
    best = result.best
    if best is not None:
        words(
            styled(
                ("best:", "b"),
                " ",
                plain(
                    f"{best.name}: {best.throughput:,.2f}x one GPU's throughput, "
                    f"{ms(best.predicted_us or 0.0)} a step, {_gib(best.memory_bytes)} GiB"
                    + (f"; not told apart from it (tied): {', '.join(best.ties)}" if best.ties else ""),
                    4000,
                ),
            ),
            console,
        )
    elif predicted:
        words(
            styled(
                ("no plan fits", "yellow"),
                plain(f" in {cap}: the fewest GiB, {min(predicted, key=lambda p: p.memory_bytes).name}"),
            ),
            console,
        )
    for p in result.plans:
        if p.predicted_us is None:
            words(styled(("not predicted:", "yellow"), " ", plain(f"{p.name}: {p.error}", 2000)), console)


def render_against(against: Against, console: Console) -> None:
    """Each scenario that moved against the saved results, and what changed since they were saved."""
    moved = [v for v in against.verdicts if v.status != "same"]
    words(
        plain(
            f"against {against.saved} (tolerance {against.tolerance_pct:g}%): {len(against.regressed)} regressed, "
            f"{sum(v.status == 'same' for v in against.verdicts)} within the tolerance, "
            f"{len(moved) - len(against.regressed)} faster, new or gone",
            2000,
        ),
        console,
    )
    if moved:
        table = Table(title="Changed predictions (ms)", title_justify="left")
        for col in ("scenario", "status", "saved", "now", "change"):
            table.add_column(col, justify="right" if col in ("saved", "now", "change") else "left", overflow="fold")
        for v in moved:
            style = "red" if v.status == "regressed" else ""
            table.add_row(
                plain(v.name),
                plain(v.status, style=style),
                _ms(v.saved_us) if v.saved_us is not None else "-",
                _ms(v.predicted_us) if v.predicted_us is not None else "-",
                f"{v.change_pct:+.2f}%" if v.change_pct is not None else plain(v.message, 200),
            )
        show_table(table, console)
    for line in against.changed:
        words(plain(f"since saved: {line}", 2000), console)


def render_report(report: Report, console: Console) -> None:
    """``daydream report``: the verdicts, the step, the layers and kernels that take longest, and where the page is."""
    cpu_only = say_warnings(report.warnings, console)
    words(_header("report", report.trace, *map(script_label, report.scripts)), console)
    if cpu_only:
        words(plain(f"device: {device_text(None, None, cpu_only)}"), console)
    if report.params_text:
        words(plain("params: " + ", ".join(f"{k} = {v}" for k, v in report.params_text.items()), 2000), console)
    for a in report.analyses:
        words(styled((f"{a.label}: ", "b"), plain(a.verdict, 2000)), console)
    steps = f"baseline (simulated) {ms(report.analyses[0].step_us)}"
    if report.speedup is not None:
        steps += (
            f", predicted {ms(report.analyses[1].step_us)}, speedup {report.speedup:.3f}x, throughput"
            f" {report.throughput or 0.0:.3f}x"
        )
    words(plain(steps), console)
    if report.versus_baseline is not None:
        words(plain(versus_note(report.versus_baseline), 2000), console)
    if report.straggler is not None:  # a job: the rank the others wait for, in the words of simulate
        from daydream.api.job import straggler_sentence

        words(plain(straggler_sentence(report.straggler), 2000), console)
    last = report.analyses[-1]
    if last.layers:
        layers = Table(
            title=(
                f"Layers that hold the step longest ({last.label}, ms): time on the critical path, the "
                f"rows adding up to the step ({ms(last.step_us)}); GPU: kernels summed over streams"
            )
            + (" and ranks" if report.ranks else ""),
            title_justify="left",
        )
        for col in ("layer", "phase", "n", "on path", "GPU"):
            layers.add_column(col, justify="left" if col in ("layer", "phase") else "right", overflow="fold")
        for r in last.layers[:8]:
            layers.add_row(plain(r.name, 200), plain(r.phase), str(r.instances), _ms(r.critical_us), _ms(r.gpu_us))
        rest = last.layers[8:]
        if rest:
            layers.add_row(
                plain(f"{len(rest):,} more"),
                "",
                "",
                _ms(sum(r.critical_us for r in rest)),
                _ms(sum(r.gpu_us for r in rest)),
            )
        show_table(layers, console)
    if not last.kernels:  # a CPU recording: no GPU table
        words(plain(f"report written to {report.index} (figures and report.json beside it)"), console)
        return
    kernels = Table(
        title=(
            f"Kernels that take longest ({last.label}, ms; total: over the step, summed over streams; %: of "
            "the GPU's kernel time)"
        ),
        title_justify="left",
    )
    rows = [
        (kernel_label(k.name), k.kernel_class, k.bound or "-", str(k.count), _ms(k.total_us), f"{k.share_pct:.0f}")
        for k in last.kernels[:8]
    ]
    # the figures keep their widths; the kernel's name gives way (cut at its end: the page has it whole)
    fixed = [
        max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("class", "roofline", "n", "total", "%"), 1)
    ]
    name_w = max(12, console.width - sum(fixed) - 3 * (len(fixed) + 1) - 1)
    kernels.add_column("kernel (its signature in the HTML)", overflow="ellipsis", no_wrap=True, max_width=name_w)
    for col, width in zip(("class", "roofline", "n", "total", "%"), fixed):
        kernels.add_column(
            col, justify="left" if col in ("class", "roofline") else "right", no_wrap=True, min_width=width
        )
    for name, *rest in rows:
        kernels.add_row(plain(name), *(plain(x) for x in rest))
    show_table(kernels, console)
    words(plain(f"report written to {report.index} (figures and report.json beside it)"), console)


def render_embedding_profile(result: EmbeddingProfile, console: Console) -> None:
    """The hot rows per table and what they make of inputs and mini-batches."""
    from daydream.api.embeddings import size_text  # its module is loaded already: it made ``result``

    how = (
        "exact: every input read, every row counted"
        if result.method == "exact"
        else (
            f"FAE's estimator on {result.sample_fraction:.1%} of the inputs, {result.confidence:.1%} upper bound held"
            " to the budget"
        )
    )
    words(
        plain(
            f"{result.inputs:,} inputs in {len(result.tables)} tables; budget {size_text(result.budget_bytes)}; {how}"
        ),
        console,
    )
    table = Table(
        title=f"Hot rows: at least {result.threshold:.3g} of their table's lookups",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    rows = [
        (
            f"{t.rows:,}",
            f"{t.pooling:.3g}",
            f"{t.hot_rows:,.0f}" + (" (<1 MB)" if t.small else ""),
            f"{t.hot_rows_high:,.0f}",
            size_text(t.hot_bytes),
            f"{100 * t.hot_access_fraction:.1f}%",
        )
        for t in result.tables
    ]
    heads = ("rows", "per input", "hot rows", "upper", "hot bytes", "hot lookups")
    fixed = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]
    # the figures keep their widths; a table's name gives way in its middle (they differ at their end: file[3])
    # (each column's padding and the gap between columns: 3 characters a column after the first, 4 at the edges)
    name_w = max(8, min(60, console.width - sum(fixed) - 3 * len(fixed) - 4))
    table.add_column("table", no_wrap=True, max_width=name_w)
    for col, width in zip(heads, fixed):
        table.add_column(col, justify="right", no_wrap=True, min_width=width)
    for t, row in zip(result.tables, rows):
        table.add_row(plain(middle(t.name, name_w)), *row)
    show_table(table, console)
    words(
        plain(
            f"hot set {size_text(result.hot_bytes)} (upper bound {size_text(result.hot_bytes_high)}); "
            f"{100 * result.hot_input_fraction:.1f}% of inputs hit only hot rows"
        ),
        console,
    )
    if result.batch is None:
        words(plain("mini-batches: give --batch B to see how many are all hot"), console)
    else:
        words(
            plain(
                f"mini-batches of {result.batch:,}: with FAE's input classification {result.hot_batches:,} hot and "
                f"{result.cold_batches:,} cold per epoch ({100 * (result.hot_batch_fraction or 0):.1f}% hot); "
                f"drawn at random, {100 * (result.random_hot_batch_fraction or 0):.3g}% would be all hot"
            ),
            console,
        )
        batches = (result.hot_batches or 0) + (result.cold_batches or 0)
        words(
            plain(
                "the epoch with FAE, from a hybrid trace: daydream run TRACE fae -p"
                f" hot_bytes={round(result.hot_bytes_high)} -p hot_fraction={result.hot_batch_fraction:.4g} -p"
                f" batches={batches}"
            ),
            console,
        )
    for w in result.warnings:
        words(plain(f"warning: {w}", style="yellow"), console)
