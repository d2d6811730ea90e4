"""Progress of long steps, on stderr at a terminal: the one helper every long step uses (reading a big trace,
building and simulating a graph of every step, a job's ranks, ``models accuracy``, ``record``, ``compare``).

Silent unless turned on (:func:`shown`): the command line turns it on when stderr is a terminal and stdout is not
carrying ``--json``; the Python API, tests and pipes never see a bar. A step shows only once it has lasted
``DELAY_S``, so a quick command draws nothing; finished steps leave no trace on the screen (the bar is transient).

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

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

DELAY_S = 0.5  # a step shorter than this draws nothing: a quick command's output stays as it was

_console: Console | None = None  # set while shown(): where the bars go; None: silent
_lock = threading.Lock()
_display: _Display | None = None  # the live bars, while any step runs


def _noop(_amount: float = 1.0) -> None:
    pass


class _Display:
    """One rich Progress for the steps running now (nested steps are lines of it), started after DELAY_S."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=True,
            # output printed while a bar shows goes above it; stdout only where it is the same terminal (a piped
            # stdout keeps its bytes)
            redirect_stdout=sys.stdout.isatty(), redirect_stderr=True,
        )  # fmt: skip
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


@contextlib.contextmanager
def shown(console: Console | None) -> Iterator[None]:
    """Show the steps that run inside on ``console`` (None: nothing); the command line's switch."""
    global _console
    before = _console
    _console = console
    try:
        yield
    finally:
        _console = before


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
            _display = _Display(console)
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
