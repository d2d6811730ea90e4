"""A decoder that makes no Python object per event: Kineto JSON text scanned by compiled code straight into columns.

Not daydream's loader: a measurement of the least such a decoder pays (`bench_floors.py`, part ``scan_columns``), the
decoder a columnar design would need to go below the cost of one object per event (docs/speed.md). It
reads, for each object of the top-level ``traceEvents`` array, ``ts`` and ``dur`` as numbers, ``ph``, ``cat`` and
``name`` as a 64-bit hash of their text (the codes a columnar loader would intern), ``pid`` and ``tid`` as numbers
or text hashes, and the ``args`` fields ``correlation`` and ``External id``; every other value it skips as text.
It checks nothing a real loader must (escapes are skipped, not decoded; a number of more than 18 digits overflows; a
malformed text gives columns, not an error): a real one pays those checks on top.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# the keys read, and the column each fills
KEYS = (b"ts", b"dur", b"ph", b"cat", b"name", b"pid", b"tid", b"correlation", b"External id", b"traceEvents", b"args")
TS, DUR, PH, CAT, NAME, PID, TID, CORR, EXT, TRACE_EVENTS, ARGS = range(len(KEYS))
# columns: floats[:, key] for TS and DUR; ints[:, key - PH] for PH .. EXT (hashes of text, or integers)


def key_table() -> tuple[np.ndarray, np.ndarray]:
    """The keys as one byte array and their offsets (for the compiled matcher)."""
    data = np.frombuffer(b"".join(KEYS), np.uint8).copy()
    offsets = np.zeros(len(KEYS) + 1, np.int64)
    offsets[1:] = np.cumsum([len(k) for k in KEYS])
    return data, offsets


@njit(cache=True, nogil=True)
def _match(text, start, end, keys, offsets):  # type: ignore[no-untyped-def]
    """Which key text[start:end] is, or -1."""
    n = end - start
    for k in range(len(offsets) - 1):
        a, b = offsets[k], offsets[k + 1]
        if b - a != n:
            continue
        same = True
        for i in range(n):
            if text[start + i] != keys[a + i]:
                same = False
                break
        if same:
            return k
    return -1


@njit(cache=True, nogil=True)
def _string_end(text, i):  # type: ignore[no-untyped-def]
    """The index of the closing quote of the string whose first byte after the opening quote is at i."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == 92:  # backslash: skip the escaped byte
            i += 2
            continue
        if c == 34:
            return i
        i += 1
    return n


@njit(cache=True, nogil=True)
def _hash(text, start, end):  # type: ignore[no-untyped-def]
    h = np.uint64(14695981039346656037)
    for i in range(start, end):
        h = (h ^ np.uint64(text[i])) * np.uint64(1099511628211)
    return np.int64(h)


@njit(cache=True, nogil=True)
def _number(text, i):  # type: ignore[no-untyped-def]
    """The number at i and the index after it: its digits as one integer over a power of ten, which rounds as a
    correct decoder does while they fit in 53 bits (a Kineto timestamp in us with three decimals: 16 digits)."""
    n = len(text)
    sign = 1.0
    if text[i] == 45:
        sign = -1.0
        i += 1
    digits = np.int64(0)
    while i < n and 48 <= text[i] <= 57:
        digits = digits * 10 + (text[i] - 48)
        i += 1
    decimals = 0
    if i < n and text[i] == 46:
        i += 1
        while i < n and 48 <= text[i] <= 57:
            digits = digits * 10 + (text[i] - 48)
            decimals += 1
            i += 1
    exponent = 0
    if i < n and (text[i] == 101 or text[i] == 69):
        i += 1
        esign = 1
        if text[i] == 45 or text[i] == 43:
            esign = -1 if text[i] == 45 else 1
            i += 1
        while i < n and 48 <= text[i] <= 57:
            exponent = exponent * 10 + (text[i] - 48)
            i += 1
        exponent *= esign
    power = exponent - decimals
    value = float(digits) * 10.0**power if power >= 0 else float(digits) / 10.0 ** (-power)
    return sign * value, i


@njit(cache=True, nogil=True)
def scan(text, keys, offsets, floats, ints):  # type: ignore[no-untyped-def]
    """Fill ``floats`` (ts, dur: NaN where absent) and ``ints`` (ph, cat, name, pid, tid, correlation, External id:
    -1 where absent) one row per event; the number of events (-1: more than the rows given)."""
    n = len(text)
    depth = 0
    events_depth = -1  # the depth of the traceEvents array once open
    args_depth = -1  # the depth of the current event's args object
    row = -1
    pending = -1  # the key whose value comes next
    i = 0
    while i < n:
        c = text[i]
        if c == 34:  # a string: a key (followed by ':') or a value
            end = _string_end(text, i + 1)
            j = end + 1
            while j < n and (text[j] == 32 or text[j] == 10 or text[j] == 13 or text[j] == 9):
                j += 1
            if j < n and text[j] == 58:  # a key
                k = _match(text, i + 1, end, keys, offsets)
                pending = -1
                if row >= 0 and events_depth >= 0 and depth == events_depth + 1:
                    pending = k  # an event's own key
                elif row >= 0 and args_depth >= 0 and depth == args_depth and CORR <= k <= EXT:
                    pending = k  # an args field read
                elif depth == 1 and k == TRACE_EVENTS:
                    pending = k  # traceEvents
                i = j + 1
                continue
            if PH <= pending <= EXT:  # a text value read as its hash
                ints[row, pending - PH] = _hash(text, i + 1, end)
            pending = -1
            i = end + 1
            continue
        if c == 123 or c == 91:  # { or [
            depth += 1
            if pending == TRACE_EVENTS and c == 91:
                events_depth = depth
            elif events_depth >= 0 and depth == events_depth + 1 and c == 123:
                row += 1
                if row == len(floats):
                    return -1  # more events than room: the caller gives more
                floats[row, 0] = np.nan
                floats[row, 1] = np.nan
                for f in range(ints.shape[1]):
                    ints[row, f] = -1
            elif pending == ARGS and c == 123:
                args_depth = depth
            pending = -1
            i += 1
            continue
        if c == 125 or c == 93:  # } or ]
            if depth == args_depth:
                args_depth = -1
            if depth == events_depth:
                events_depth = -1
            depth -= 1
            i += 1
            continue
        if pending >= 0 and (c == 45 or 48 <= c <= 57):
            value, i = _number(text, i)
            if pending <= DUR:
                floats[row, pending] = value
            elif pending <= EXT:
                ints[row, pending - PH] = np.int64(value)
            pending = -1
            continue
        i += 1
    return row + 1


def scan_columns(text: bytes | bytearray) -> tuple[np.ndarray, np.ndarray]:
    """The columns of the events of a Kineto JSON text: (floats n x 2, ints n x 7)."""
    capacity = text.count(b"{")  # each event opens an object (the rows past the events are never touched)
    keys, offsets = key_table()
    floats = np.empty((capacity, 2), np.float64)
    ints = np.empty((capacity, 7), np.int64)
    rows = scan(np.frombuffer(text, np.uint8), keys, offsets, floats, ints)
    if rows < 0:  # an object per event: only a text that is not JSON gets here
        raise ValueError("more events than objects")
    return floats[:rows], ints[:rows]
