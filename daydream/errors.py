"""User-facing errors: these carry a message fit to print, never a traceback."""

from __future__ import annotations


class DaydreamError(Exception):
    """An error caused by the user's input (a file, a flag, a script).

    The CLI prints ``str(error)`` on one line and exits non-zero.
    """

    exit_code = 1


class TraceError(DaydreamError):
    """A trace file that cannot be read or does not hold a usable trace."""


class ScriptError(DaydreamError):
    """A .whatif script that cannot be parsed or run: the message names the file, line and column."""

    exit_code = 2


class CheckFailed(DaydreamError):
    """An ``assert`` in a script did not hold: the prediction is not what the script expects."""

    exit_code = 3
