"""Progress of long steps on stderr, a bar at a terminal and a line every few seconds elsewhere: the one helper every
long step uses (reading a big trace, building and simulating a graph of every step, a job's ranks, ``models
accuracy``, ``record``, ``compare``, ``plan``).

Silent unless turned on (:func:`shown`): the command line turns it on unless stdout carries ``--json``, as bars when
stderr is a terminal and as lines (``daydream: predicting 40 scenarios: 12 of 40, 15 s``) when it is not; the Python
API never sees it. A bar shows only once its step has lasted ``DELAY_S``, so a quick command draws nothing; finished
steps leave no trace on the screen (the bar is transient).

    with progress.task("reading trace.json.gz", total=size) as advance:
        for chunk in chunks:
            advance(len(chunk))

:func:`counted` is the same for a step that learns its total as it goes (``update(done, total)``), and
:func:`lines` says progress a line at a time where another program shares the terminal (``record``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

DELAY_S = 0.5  # a step shorter than this draws nothing: a quick command's output stays as it was

EVERY_S = 5.0  # where stderr is no terminal (a pipe, a log): a line per running step this often, not a bar

_console: Console | None = None  # set while shown(): where the bars go; None: silent
_as_lines = False  # set while shown(..., lines=True): progress said as lines, not drawn
_lock = threading.Lock()
_display: _Display | _Lines | None = None  # the live bars (or the lines' timer), while any step runs


def _noop(_amount: float = 1.0) -> None:
    pass


class _Display:
    """One rich Progress for the steps running now (nested steps are lines of it), started after DELAY_S."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            # output printed while a bar shows goes above it; stdout only where it is the same terminal (a piped
            # stdout keeps its bytes)
            redirect_stdout=sys.stdout.isatty(),
            redirect_stderr=True,
        )
        self.tasks = 0
        self.started = False
        self.timer = threading.Timer(DELAY_S, self._start)
        self.timer.daemon = True
        self.timer.start()

    def _start(self) -> None:
        with _lock:
            if self.tasks and not self.started:
                self.started = True
                self.progress.start()

    def stop(self) -> None:
        self.timer.cancel()
        if self.started:
            self.progress.stop()


class _Lines:
    """Progress as a line per running step every EVERY_S seconds (``daydream: predicting 40 scenarios: 12 of 40,
    15 s``): for a stderr that is no terminal, where a redrawn bar would be noise and silence looks like a hang. The
    steps are kept by a rich Progress that is never drawn."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(console=console, disable=True)
        self.tasks = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._say, daemon=True)
        self.thread.start()

    def _say(self) -> None:
        while not self.stopped.wait(EVERY_S):
            with _lock:
                lines = [_progress_line(t) for t in self.progress.tasks]
            for line in lines:
                self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def stop(self) -> None:
        self.stopped.set()


def _progress_line(task: Any) -> str:
    done = f": {task.completed:,.0f} of {task.total:,.0f}" if task.total else ""
    return f"daydream: {task.description}{done}, {task.elapsed or 0.0:.0f} s"


@contextlib.contextmanager
def shown(console: Console | None, lines: bool = False) -> Iterator[None]:
    """Show the steps that run inside on ``console`` (None: nothing): as bars, or (``lines``) as a line per running
    step every EVERY_S seconds; the command line's switch."""
    global _console, _as_lines
    before = _console, _as_lines
    _console, _as_lines = console, lines
    try:
        yield
    finally:
        _console, _as_lines = before


def enabled() -> bool:
    return _console is not None


@contextlib.contextmanager
def task(description: str, total: float | None = None) -> Iterator[Callable[[float], None]]:
    """A long step: a line with a bar (``total`` known: how far it is, e.g. bytes or ranks) or a spinner (unknown),
    gone once the step ends; nothing when progress is not shown. Yields ``advance(amount=1)``."""
    with _line(description, total) as (progress, tid):
        if progress is None:
            yield _noop
            return
        bar = progress

        def advance(amount: float = 1.0) -> None:
            bar.advance(tid, amount)

        yield advance


@contextlib.contextmanager
def counted(description: str) -> Iterator[Callable[[float, float], None]]:
    """:func:`task` for a step that learns its total as it goes (a sample read in chunks): yields
    ``update(done, total)``."""
    with _line(description, None) as (progress, tid):
        if progress is None:
            yield lambda _done, _total: None
            return
        bar = progress

        def update(done: float, total: float) -> None:
            bar.update(tid, completed=done, total=total)

        yield update


@contextlib.contextmanager
def _line(description: str, total: float | None) -> Iterator[tuple[Progress | None, TaskID]]:
    """One step's line in the display (made at the first step, stopped after the last); (None, 0) when not shown."""
    global _display
    console = _console
    if console is None:
        yield None, TaskID(0)
        return
    with _lock:
        if _display is None:
            _display = _Lines(console) if _as_lines else _Display(console)
        display = _display
        display.tasks += 1
        tid = display.progress.add_task(description, total=total)
    try:
        yield display.progress, tid
    finally:
        with _lock:
            display.progress.remove_task(tid)
            display.tasks -= 1
            last = display.tasks == 0
            if last:
                _display = None
        if last:
            display.stop()


def lines(description: str, total: int) -> Callable[[int], None]:
    """Progress said as a line per change (``description: 3 of 5``) rather than a bar: for a step that shares the
    terminal with another program's output (``record`` runs the training program), which a redrawn bar would
    overwrite. Returns ``update(done)``; nothing is said when progress is not shown."""
    console = _console
    if console is None:
        return lambda _done: None
    said = [-1]

    def update(done: int) -> None:
        if done != said[0]:
            said[0] = done
            console.print(f"{description}: {done} of {total}", highlight=False, markup=False)

    return update
