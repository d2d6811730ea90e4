"""User-facing errors: these carry a message fit to print, never a traceback."""

from __future__ import annotations


class DaydreamError(Exception):
    """An error caused by the user's input (a file, a flag, a script).

    The CLI prints ``str(error)`` on one line and exits non-zero.
    """

    exit_code = 1


class TraceError(DaydreamError):
    """A trace file that cannot be read or does not hold a usable trace."""
