"""Ctrl-C and SIGTERM end a command through its code's cleanup, and are remembered; and end it within
``GRACE_S`` seconds whatever it is doing.

Through the cleanup: SIGTERM raises :class:`Terminated` where the program is, as Ctrl-C raises KeyboardInterrupt, so
``finally`` blocks run (a half-written output's temporary file goes; daydream.files). Remembered: a library that
fails while the signal unwinds it (matplotlib's "Invalid bounding box" from a figure half drawn), or that swallows
the exception and fails later, reports the signal (exit 130 or 143), not a bug; and an exception raised inside a
callback Python cannot propagate from (an import lock's) is not printed as a traceback.

Whatever it is doing: an exception raised where Python cannot propagate it (a finalizer, a weakref or import-lock
callback: the unraisable hook drops it), one a library catches and carries on from, or a ``finally`` that blocks,
would leave the command running after the signal, as if it had never come. So the first signal also starts a
watchdog: if the command has not returned ``GRACE_S`` seconds later, the watchdog does what the unwinding would
have (the cleanups registered with :func:`on_abandon`: temporary files, a half-written report folder; the worker
processes this process started), says the signal's line and ends the process with its exit status. A command
that waits on purpose for what the signal stops (``record`` waits for the traced program to stop) says so with
:func:`patient`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_received: list[int] = []

# how long a command has to unwind after a signal before the watchdog ends it: the unwinding of every command takes
# well under this (the fuzzer's signalled runs: under 0.5 s), a person or `timeout` waits no longer
GRACE_S = 1.5
# the exit status and line of each signal, as the command line says them (daydream.commands.cli)
EXITS = {signal.SIGINT: (130, "daydream: interrupted"), signal.SIGTERM: (143, "daydream: terminated")}

_cleanups: list[Callable[[], None]] = []  # what must go where the watchdog ends the process (on_abandon)
_lock = threading.RLock()  # reentrant: the signal handler arms the watchdog in the thread that may hold it
_watchdog: dict[str, Any] = {"armed": None, "patient": 0}  # armed: the threading.Event that cancels the running one


class Terminated(BaseException):
    """SIGTERM, raised where the program is: ``finally`` blocks run."""


def received() -> int | None:
    """The last signal (SIGINT or SIGTERM) that reached the command, or None."""
    return _received[-1] if _received else None


def forget() -> None:
    """A Ctrl-C that was handled (the REPL's prompt cancels a line): later errors are the command's own, and the
    watchdog stands down."""
    _received.clear()
    _disarm()


@contextlib.contextmanager
def on_abandon(cleanup: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``cleanup`` is what the watchdog does before it ends the process (the block's own
    ``finally`` does it otherwise): remove a temporary file, a folder half written. It must not raise or block."""
    with _lock:
        _cleanups.append(cleanup)
    try:
        yield
    finally:
        with _lock:
            _cleanups.remove(cleanup)


@contextlib.contextmanager
def patient() -> Iterator[None]:
    """While the block runs, the watchdog waits (then gives GRACE_S more): a wait a signal ends by itself, such as
    ``record``'s for the traced program, which got the signal too."""
    with _lock:
        _watchdog["patient"] += 1
    try:
        yield
    finally:
        with _lock:
            _watchdog["patient"] -= 1
            _watchdog["since"] = time.monotonic()


def _arm(signum: int) -> None:
    """Start the watchdog at the first signal (a later one finds it running)."""
    with _lock:
        if _watchdog["armed"] is not None:
            return
        cancel = _watchdog["armed"] = threading.Event()
        _watchdog["since"] = time.monotonic()
    threading.Thread(target=_watch, args=(signum, cancel), name="daydream-signal-watchdog", daemon=True).start()


def _disarm() -> None:
    with _lock:
        armed, _watchdog["armed"] = _watchdog["armed"], None
    if armed is not None:
        armed.set()


def _watch(signum: int, cancel: threading.Event) -> None:
    while not cancel.wait(0.05):
        with _lock:
            waited = time.monotonic() - _watchdog["since"]
            if _watchdog["patient"] or waited < GRACE_S:
                continue
            cleanups = list(_cleanups)
        _abandon(signum, cleanups)


def _abandon(signum: int, cleanups: list[Callable[[], None]]) -> None:
    """End the process now, as the signal would have: the cleanups, the worker processes it started, the line, the
    exit status. Standard output is not flushed: the main thread may hold its lock, blocked on a full pipe."""
    for cleanup in reversed(cleanups):
        with contextlib.suppress(Exception):
            cleanup()
    with contextlib.suppress(Exception):
        import multiprocessing

        for child in multiprocessing.active_children():  # only the processes this one started, by their ids
            child.terminate()
    code, line = EXITS.get(signum, (128 + signum, f"daydream: signal {signum}"))
    with contextlib.suppress(OSError):
        os.write(2, (line + " (ended after a " + f"{GRACE_S:g} s grace)\n").encode())
    os._exit(code)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt and :class:`Terminated`, remembered (:func:`received`), while the
    block runs; only in the main thread (signals are delivered there); the previous handlers back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        _received.append(signum)
        _arm(signum)
        raise KeyboardInterrupt

    def terminate(signum: int, frame: Any) -> None:
        _received.append(signum)
        _arm(signum)
        raise Terminated()

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, (KeyboardInterrupt, Terminated)):
            return  # raised in a callback that cannot raise (an import lock's): the signal is remembered above
        previous_hook(info)

    forget()
    previous = signal.signal(signal.SIGINT, interrupt), signal.signal(signal.SIGTERM, terminate)
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        _disarm()  # the command unwound: what follows is the exit, or (a test, the API) the caller's own
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        sys.unraisablehook = previous_hook
