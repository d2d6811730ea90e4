"""Handing freed heap memory back to the operating system (glibc's ``malloc_trim``).

numpy's arrays below glibc's mmap threshold (which glibc raises as large blocks are freed, up to 32 MiB) live in the
heap; once freed there, their pages stay with the process, and Python's own small objects (dicts, lists), which come
from arenas of their own, cannot reuse them. A large trace's columns, read and dropped before its graph is made, so
kept 0.7 GB that the graph then took again at 10M events (6.04 GiB against 5.36 GiB trimmed). Elsewhere than glibc
this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any


def trim_heap() -> None:
    """Give the heap's free pages back to the operating system, where the C library can (glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim): nothing to do
        return None
