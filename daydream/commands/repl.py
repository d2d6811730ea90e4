"""``daydream repl``: change a trace's graph one statement at a time and watch the prediction move.

At a terminal it has a prompt, line editing, history (``~/.daydream_history``, or ``$DAYDREAM_HISTORY``)
and completion of keywords, attributes, names and commands. With stdin from a pipe it reads statements
without prompts, so a session can be scripted; it exits non-zero if any input failed: 3 where the first failure was
a script that does not apply to the trace or a failed assert (as ``daydream run`` exits), else 2.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import sys
from collections.abc import Callable
from typing import Any, TextIO

import networkx as nx
from rich.console import Console
from rich.table import Table

from daydream import signals
from daydream.api.workload import RunOptions, Workload
from daydream.dsl import Session, ast
from daydream.dsl.check import BUILTIN_VALUES
from daydream.dsl.functions import FUNCTIONS
from daydream.dsl.parse import KEYWORDS, STATEMENT_KEYWORDS, parse_expression, parse_script
from daydream.dsl.values import format_value
from daydream.errors import CheckFailed, DaydreamError, ScriptError, did_you_mean
from daydream.files import check_output_path, write_atomically
from daydream.graph.adjacency import attrs_of
from daydream.graph.select import KIND_SELECTORS, Selection, in_time_order
from daydream.presentation.console import terminal_console
from daydream.presentation.terminal import ms, plain, styled, warning_line
from daydream.simulation import Policy

COMMANDS = {
    ":predict": "the predicted iteration now, against the baseline, with the breakdown",
    ":show EXPR": "evaluate an expression; a selection lists its tasks (first 20 in time order)",
    ":diff": "what changed: every statement's effect, and GPU time by class before and after",
    ":undo": "take back the last statement",
    ":reset": "back to the unchanged graph (bindings too)",
    ":save FILE": "write the statements applied so far as a .whatif script",
    ":history": "the statements applied so far",
    ":help": "this list; the language is in docs/language.md",
    ":quit": "leave (also Ctrl-D)",
}
PROMPT, MORE = "whatif> ", "   ...> "
# words a Python user types to leave or for help (not names of the language): the commands that do it
_PYTHON_WORDS = {w: ":quit" for w in ("exit", "quit", "exit()", "quit()")} | {w: ":help" for w in ("help", "help()")}


class Repl:
    """The REPL's state: the baseline graph, the session replaying the accepted statements, and output."""

    def __init__(
        self,
        graph: nx.DiGraph,
        params: dict[str, Any] | None,
        policy: Policy,
        console: Console,
        origin: str,
        inputs: list[str] | None = None,
        budget: int | None = None,
        include_dirs: list[str] | None = None,
    ) -> None:
        self.graph = graph
        self.budget, self.include_dirs = budget, list(include_dirs or [])
        self.read: set[str] = set(inputs or [origin])  # every file the session read: :save never writes onto one
        self.params = copy.copy(params) if params is not None else {}  # -p's stay -p's in messages (CommandLineParams)
        self.base_policy = policy
        self.console = console
        self.origin = origin
        self.history: list[str] = []
        self.failed = 0
        self.status = 0  # a piped session's exit status: its first failure's (see run_repl)
        self.session = self._new_session()
        self.baseline_us = self.session.baseline_us
        # the step's memory before any statement (statements change the graph's tensors): from the trace, else shapes
        from daydream.api.memory import graph_memory
        from daydream.simulation.memory import memory_timeline

        self.memory_before = memory_timeline(self.session.baseline, graph_memory(self.session.graph))

    def _new_session(self) -> Session:
        return Session(
            self.graph,
            params=self.params,
            policy=self.base_policy,
            on_print=self._print,
            budget=self.budget,
            include_dirs=self.include_dirs,
        )

    def _print(self, line: str) -> None:
        self.console.print(line, highlight=False, markup=False)

    def inputs(self) -> set[str]:
        """The files this session has read: the trace (and what came with it), every script included so far."""
        self.read |= {f for f in self.session.loader.texts if not f.startswith("<")}
        return self.read

    def _rebuild(self) -> None:
        """Replay the accepted statements on a fresh copy (undo, and repair after a statement failed midway)."""
        self.inputs()  # the old session's includes stay inputs after an undo
        self.session = self._new_session()
        self.session.on_print = None
        for text in self.history:
            self.session.execute(text)
        self.session.on_print = self._print

    # ---- input --------------------------------------------------------------------------------------------

    def handle(self, text: str) -> None:
        """One complete input: a command or statements."""
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            return
        try:
            word = _PYTHON_WORDS.get(stripped)
            if word is not None and stripped.rstrip("()") not in self.session.scope:
                # what Python's REPL takes: done, with the command that does it said once
                self.console.print(f"({word} is the command: {COMMANDS[word]})", highlight=False, markup=False)
                self.command(word)
            elif stripped.startswith(":"):
                self.command(stripped)
            else:
                self.statements(text)
        except (ScriptError, CheckFailed, DaydreamError) as exc:
            self.failed += 1
            # a script that does not apply (NotApplicable) or an assert: 3, as run exits; any other failed input: 2
            self.status = self.status or (
                CheckFailed.exit_code if isinstance(exc, CheckFailed) else ScriptError.exit_code
            )
            self.console.print(styled(("error:", "red"), " ", plain(exc, 2000)))

    def statements(self, text: str) -> None:
        version = self.session.version
        try:
            script = parse_script(text, "<repl>")
        except ScriptError as statement_error:
            stripped = text.strip()
            first = stripped.split(maxsplit=1)[0].split("(")[0]
            if first in KEYWORDS and first != "select":
                raise
            # not a statement: a bare expression (`count(gpu)`, `select comm`), its value as :show gives it; a word
            # with another after it (`scal x by 2`) was meant as a statement, and gets the statement's error
            try:
                parse_expression(stripped, "<repl>")
            except ScriptError:
                if re.match(r"[A-Za-z_]\w*\s+[\w\"(]", stripped):
                    raise statement_error from None
                raise
            self.show(stripped)
            return
        statements = script.statements
        try:
            effects = self.session.run(script, fresh_scope=False)
        except (ScriptError, CheckFailed, DaydreamError):
            if self.session.version != version:
                self._rebuild()  # a loop or include stopped halfway: back to the last good state
            raise
        if effects or any(isinstance(st, (ast.Let, ast.Param, ast.Include)) for st in statements):
            self.history.append(text.strip())  # what :save writes and :undo takes back; prints and asserts are not kept
        warnings = self.session.warnings
        for w in warnings:
            self.console.print(warning_line("warning:", w))
        warnings.clear()
        if effects:
            touched = ", ".join(e.describe() for e in effects if e.describe())
            p = self.session.predicted_us
            self.console.print(
                plain(
                    f"{touched}; predicted {ms(p)} ({self._against(p)})" if p else f"{touched}; predicted {ms(p)}", 2000
                )
            )
        else:
            bound = [s for s in statements if isinstance(s, (ast.Let, ast.Param))]
            for s in bound:
                self.console.print(plain(f"{s.name} = {format_value(self.session.scope.get(s.name))}", 2000))

    def command(self, text: str) -> None:
        name, _, arg = text.partition(" ")
        arg = arg.strip()
        if name in (":quit", ":exit", ":q"):
            raise EOFError
        if name == ":help":
            table = Table(show_header=False, box=None)
            for k, v in COMMANDS.items():
                table.add_row(k, v)
            self.console.print(table)
            self.console.print("statements: " + " ".join(STATEMENT_KEYWORDS), highlight=False)
        elif name == ":predict":
            self.show_prediction()
        elif name == ":show":
            if not arg:
                raise DaydreamError(':show needs an expression, e.g. :show select gpu where class == "gemm"')
            self.show(arg)
        elif name == ":diff":
            self.diff()
        elif name == ":undo":
            if not self.history:
                self.console.print("nothing to undo", highlight=False)
                return
            last = self.history.pop()
            self._rebuild()
            self.console.print(plain(f"undone: {last}; predicted {ms(self.session.predicted_us)}", 2000))
        elif name == ":reset":
            self.history.clear()
            self._rebuild()
            self.console.print(f"reset; predicted {ms(self.session.predicted_us)}", highlight=False)
        elif name == ":save":
            if not arg:
                raise DaydreamError(":save needs a file name, e.g. :save my.whatif")
            check_output_path(arg, self.inputs(), ":save")
            body = f"# saved by daydream repl from {self.origin}\n" + "\n".join(self.history) + "\n"
            write_atomically(arg, body.encode("utf-8"))
            n = len(self.history)
            self.console.print(plain(f"saved {n} statement{'s' if n != 1 else ''} to {arg}", 2000))
        elif name == ":history":
            for line in self.history:
                self.console.print(line, highlight=False, markup=False)
        else:
            hint = did_you_mean(name, [c.split()[0] for c in COMMANDS] + [":exit", ":q"])
            raise DaydreamError(f"unknown command {name}; " + (hint or ":help lists them"))

    def _against(self, predicted: float) -> str:
        """The prediction against the baseline, in run's words: speedup, and throughput where the samples per step
        changed (``scale samples by F``; elsewhere it is the speedup)."""
        speedup = self.baseline_us / predicted
        samples = self.session.samples
        return f"baseline {ms(self.baseline_us)}, speedup {speedup:.3f}x" + (
            f", throughput {speedup * samples:.3f}x" if samples != 1 else ""
        )

    def show_prediction(self) -> None:
        s = self.session
        p = s.predicted_us
        self.console.print(
            f"measured {ms(s.measured_us)}, predicted {ms(p)}, {self._against(p)}" if p else f"predicted {ms(p)}",
            highlight=False,
        )
        if p and s.effects:  # statements typed here are a script of one's own: the ledger never measured them
            from daydream.perf.trust.uncertainty import interval, model_parts, noise_of, versus_baseline
            from daydream.presentation.terminal import versus_note

            iv = interval(p, [noise_of(s.state.graph), *model_parts([None], {}, models=["<repl>"])])
            self.console.print(
                plain(
                    f"90% interval {ms(iv.low_us)}-{ms(iv.high_us)} (+-{iv.half_width_pct:.1f}%, extrapolated: "
                    "statements typed here have no ledger case)",
                    2000,
                )
            )
            self.console.print(plain(versus_note(versus_baseline(p, iv.parts, self.baseline_us)), 2000))
        if p and self.memory_before is not None:
            from daydream.api.memory import memory_change
            from daydream.presentation.terminal import render_memory_change

            change = memory_change(self.memory_before, s.predict(), [None], {})
            if change is not None:
                render_memory_change(change, self.console)
        from daydream.presentation.terminal import breakdown_table, breakdown_title
        from daydream.simulation import breakdown

        after = s.predict()
        title = breakdown_title(s.baseline.step_rank(), after.step_rank())
        self.console.print(breakdown_table(breakdown(s.baseline), breakdown(after), title))

    def show(self, text: str) -> None:
        expr = parse_expression(text, "<show>")
        self.session._texts["<show>"] = text
        self.session.budget.reset()  # each :show has the budget of a run, not what is left of earlier ones
        value = self.session.env.value(expr)
        for w in self.session.warnings:
            self.console.print(warning_line("warning:", w))
        self.session.warnings.clear()
        if not isinstance(value, Selection):
            self.console.print(format_value(value, limit=20), highlight=False, markup=False)
            return
        g = self.session.graph
        ordered = in_time_order(g, (n for n in value if n in g))
        table = Table(title=f"{len(ordered):,} tasks", title_justify="left")
        for col in ("id", "kind", "name", "thread", "phase", "layer", "duration"):
            table.add_column(
                col, justify="right" if col in ("id", "duration") else "left", overflow="ellipsis", max_width=48
            )
        for n in ordered[:20]:
            a = attrs_of(g)[n]
            table.add_row(
                plain(n),
                plain(a["kind"]),
                plain(a["name"]),
                plain(a["thread"]),
                plain(a.get("phase") or ""),
                plain(a.get("layer") or ""),
                f"{a['duration']:,.1f} us",
            )
        if len(ordered) > 20:
            table.add_row("", "", f"... {len(ordered) - 20:,} more", "", "", "", "")
        self.console.print(table)

    def diff(self) -> None:
        from daydream.simulation import totals

        if not self.session.effects:  # nothing to set side by side: no empty table
            self.console.print(
                "no changes yet: the graph is the trace's, replayed (a statement changes it: "
                "scale, set, remove, insert, wait, schedule; :help lists the commands)",
                highlight=False,
                markup=False,
            )
            return
        for e in self.session.effects.values():
            self.console.print(f"{' '.join(e.statement.split())}  ->  {e.describe()}", highlight=False, markup=False)
        before, after = totals(self.session.baseline, "class"), totals(self.session.predict(), "class")
        table = Table(title="GPU time by class", title_justify="left")
        for col in ("class", "baseline", "predicted"):
            table.add_column(col, justify="right" if col != "class" else "left")
        for k in sorted(set(before) | set(after), key=lambda k: -before.get(k, 0.0)):
            if before.get(k) != after.get(k):
                table.add_row(plain(k), ms(before.get(k, 0.0)), ms(after.get(k, 0.0)))
        self.console.print(table)
        self.show_prediction()

    # ---- completion ---------------------------------------------------------------------------------------

    def words(self) -> list[str]:
        return sorted(
            set(KEYWORDS)
            | {"before", "after"}
            | set(KIND_SELECTORS)
            | set(BUILTIN_VALUES)
            | set(FUNCTIONS)
            | self.session.attributes
            | set(self.session.scope)
            | {c.split()[0] for c in COMMANDS}
        )


def complete_input(lines: list[str]) -> bool:
    """Whether typed lines make a whole input: braces balanced, no trailing backslash, no open string."""
    text = "\n".join(lines)
    if text.rstrip().endswith("\\"):
        return False
    depth = 0
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = None
        elif text.startswith('"""', i):
            quote = '"""'
            i += 2
        elif c in "\"'":
            quote = c
        elif c == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        elif c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        i += 1
    return depth <= 0 and quote in (None, '"', "'")


def _setup_readline(repl: Repl) -> Callable[[], None]:
    """History and tab completion at a terminal; returns what to call on exit."""
    try:
        import readline
    except ImportError:  # pragma: no cover - no readline on this platform
        return lambda: None
    path = os.environ.get("DAYDREAM_HISTORY") or os.path.expanduser("~/.daydream_history")
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)
    matches: list[str] = []

    def completer(text: str, state: int) -> str | None:
        nonlocal matches
        if state == 0:
            matches = [w for w in repl.words() if w.startswith(text)]
        return matches[state] if state < len(matches) else None

    readline.set_completer(completer)
    readline.set_completer_delims(" \t\n()[]{},.=<>!~+-*/%&|\"'")
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")

    def save() -> None:
        with contextlib.suppress(OSError):
            readline.write_history_file(path)

    return save


def run_repl(
    workload: Workload | str | os.PathLike[str],
    params: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    stdin: TextIO | None = None,
    console: Console | None = None,
) -> int:
    """The REPL on the workload: a trace file, or a job's folder of rank traces (its collectives priced as ``daydream
    run`` prices them: over the workload's ``link``, or fitted to the job's transfers; every rank its own tasks)."""
    work, opts = Workload.of(workload), options or RunOptions()
    stdin = stdin or sys.stdin
    interactive = stdin.isatty()
    console = console or terminal_console(highlight=False, soft_wrap=not interactive)
    graph = work.load()[0]
    trace, inputs = work.path, work.inputs()
    repl = Repl(
        graph,
        params,
        opts.policy,
        console,
        trace,
        inputs=inputs,
        budget=opts.budget,
        include_dirs=list(opts.include_dirs) if opts.include_dirs is not None else None,
    )
    console.print(
        plain(
            f"daydream repl: {trace}: {graph.number_of_nodes():,} tasks; baseline {ms(repl.baseline_us)}"
            + (" (:help for commands, Ctrl-D to leave)" if interactive else ""),
            2000,
        ),
    )
    finish = _setup_readline(repl) if interactive else (lambda: None)
    pending: list[str] = []
    try:
        while True:
            try:
                if interactive:
                    line = input(MORE if pending else PROMPT)
                else:
                    line = stdin.readline()
                    if not line:
                        raise EOFError
                    line = line.rstrip("\n")
            except KeyboardInterrupt:
                signals.forget()  # handled: a later error is the session's own
                pending.clear()
                console.print("(cancelled)", highlight=False)
                continue
            pending.append(line)
            if not complete_input(pending):
                continue
            text = "\n".join(pending)
            pending.clear()
            try:
                repl.handle(text)
            except EOFError:
                break
    except EOFError:
        if pending:
            repl.handle("\n".join(pending))
    finally:
        finish()
    if interactive:
        console.print("", highlight=False)
    return repl.status if not interactive else 0
