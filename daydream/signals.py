"""Ctrl-C and SIGTERM end a command through its code's cleanup, and are remembered.

Through the cleanup: SIGTERM raises :class:`Terminated` where the program is, as Ctrl-C raises KeyboardInterrupt, so
``finally`` blocks run (a half-written output's temporary file goes; daydream.files). Remembered: a library that
fails while the signal unwinds it (matplotlib's "Invalid bounding box" from a figure half drawn), or that swallows
the exception and fails later, reports the signal (exit 130 or 143), not a bug; and an exception raised inside a
callback Python cannot propagate from (an import lock's) is not printed as a traceback.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

_received: list[int] = []


class Terminated(BaseException):
    """SIGTERM, raised where the program is: ``finally`` blocks run."""


def received() -> int | None:
    """The last signal (SIGINT or SIGTERM) that reached the command, or None."""
    return _received[-1] if _received else None


def forget() -> None:
    """A Ctrl-C that was handled (the REPL's prompt cancels a line): later errors are the command's own."""
    _received.clear()


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt and :class:`Terminated`, remembered (:func:`received`), while the
    block runs; only in the main thread (signals are delivered there); the previous handlers back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        _received.append(signum)
        raise KeyboardInterrupt

    def terminate(signum: int, frame: Any) -> None:
        _received.append(signum)
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
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        sys.unraisablehook = previous_hook
