"""User-facing errors: these carry a message fit to print, never a traceback; and the one "did you mean" every
message that names an unknown thing (a script, a step, a device, a file, a keyword) uses."""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterable, Iterator
from typing import Any


class DaydreamError(Exception):
    """An error caused by the user's input (a file, a flag, a script).

    The CLI prints ``str(error)`` on one line and exits non-zero.
    """

    exit_code = 1


class TraceError(DaydreamError):
    """A trace file that cannot be read or does not hold a usable trace. Its text (``str``) is the message printed,
    which names the file and the place; the place is also in fields, None where it is not known: ``path``, the file
    or folder; ``event``, the index of the event in it (of ``traceEvents``, or of ``nodes`` in an execution trace);
    ``offset``, the byte offset in the file's text (decompressed) where reading it failed.

    >>> from daydream import TraceError, load_trace
    >>> try:
    ...     load_trace("no-such-trace.json")
    ... except TraceError as exc:
    ...     print(exc.path, exc.event, exc.offset)
    no-such-trace.json None None
    """

    def __init__(
        self,
        message: str,
        path: str | os.PathLike[str] | None = None,
        event: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = None if path is None else os.fspath(path)
        self.event, self.offset = event, offset

    def __reduce__(self) -> tuple[type[TraceError], tuple[Any, ...]]:
        # crosses process boundaries (a job's workers) with its fields, not just its text
        return (type(self), (str(self), self.path, self.event, self.offset))


@contextlib.contextmanager
def about_file(path: str | os.PathLike[str]) -> Iterator[None]:
    """Within: a :class:`TraceError` that names no file is about ``path`` (for helpers given the text of a place in
    the file, not the file)."""
    try:
        yield
    except TraceError as exc:
        if exc.path is None:
            exc.path = os.fspath(path)
        raise


class ScriptError(DaydreamError):
    """A .whatif script that cannot be parsed or run. Its parts are fields, formatted where printed (``str``):
    ``message``; where it is, ``file``, ``line`` and ``column`` (None for an error of no one place: a -p value, a
    script too large); ``excerpt``, the source line with a caret under the spot; ``hint``, a line of help; ``note``,
    what it came from (``from -p factor=8``), said after the message. ``str`` reads ``FILE:LINE:COL: MESSAGE
    (NOTE)``, then the excerpt and the hint."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        excerpt: str | None = None,
        hint: str | None = None,
        note: str | None = None,
    ) -> None:
        self.message, self.file, self.line, self.column = message, file, line, column
        self.excerpt, self.hint, self.note = excerpt, hint, note
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}: " if self.file is not None and self.line is not None else ""
        out = [where + self.message + (f" ({self.note})" if self.note else "")]
        if self.excerpt:
            out.append(self.excerpt)
        if self.hint:
            out.append(f"  {self.hint}")
        return "\n".join(out)

    def noted(self, note: str) -> ScriptError:
        """The same error, said to come from ``note``."""
        return ScriptError(self.message, self.file, self.line, self.column, self.excerpt, self.hint, note)

    def __reduce__(self) -> tuple[type[ScriptError], tuple[Any, ...]]:
        # crosses process boundaries (compare --jobs) with its fields, not just its text
        return (ScriptError, (self.message, self.file, self.line, self.column, self.excerpt, self.hint, self.note))


class CheckFailed(DaydreamError):
    """An ``assert`` in a script did not hold: the prediction is not what the script expects."""

    exit_code = 3


class NotApplicable(CheckFailed):
    """A script does not apply to the trace: a ``require`` in it did not hold (the trace lacks what the script
    changes: GPU kernels, a data loader, an optimizer step). The same exit status as a failed assert, and one message
    everywhere: ``SCRIPT does not apply to this trace: WHY (FILE:LINE: CONDITION)``; ``script`` and ``reason`` hold
    its parts for callers that say it their own way (``daydream demo`` lists the script as skipped)."""

    def __init__(self, script: str, reason: str, where: str = "") -> None:
        self.script = script
        self.reason = reason
        self.where = where
        super().__init__(f"{script} does not apply to this trace: {reason}" + (f" ({where})" if where else ""))

    def __reduce__(self) -> tuple[type[NotApplicable], tuple[str, str, str]]:
        # crosses process boundaries (compare --jobs) with its parts, not just its message
        return (NotApplicable, (self.script, self.reason, self.where))


def close_matches(word: str, options: Iterable[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    """The ``n`` options closest to ``word`` by difflib's similarity, best first, compared ignoring case (a name
    typed in the wrong case, ``profilerstep#5``, is the closest of all); each returned as the option is spelled.
    Only ever an option: a suggestion names something that exists."""
    spelled: dict[str, str] = {}
    for option in options:
        spelled.setdefault(str(option).casefold(), str(option))
    return [spelled[c] for c in difflib.get_close_matches(word.casefold(), list(spelled), n=n, cutoff=cutoff)]


def did_you_mean(word: str, options: Iterable[str], n: int = 1, cutoff: float = 0.6) -> str | None:
    """``did you mean 'X'?`` (``'X' or 'Y'`` for ``n`` > 1) for the options closest to ``word``, or None when none
    is close: the one hint for every unknown name."""
    close = close_matches(word, options, n, cutoff)
    return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?" if close else None


def listed(names: Iterable[str], limit: int = 12) -> str:
    """Names for a message: the first ``limit`` joined with commas, then how many more."""
    items = list(names)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit:,} more" if len(items) > limit else "") if items else "none"
