"""How a script's value reads in a print, an assertion's message or a param's listing: lists clipped, whole numbers
too long to print as an exponent, selections and tensor sets by their size; a param's value in the units its default
was written in. Below the evaluator and the functions, which both show values.
"""

from __future__ import annotations

import math
from typing import Any

from daydream.dsl.limits import MAX_NESTING
from daydream.graph.memory import TensorSet
from daydream.graph.select import Selection
from daydream.units import nbytes

_SHOWN_ITEMS = 200  # items format_value shows in all, nested lists included (a list of lists of lists...)
_INT_DIGITS_BITS = 10_000  # whole numbers with more bits show as 1.23457e+3010 (str() stops at 4,300 digits)


_TIME_SCALE = (("ns", 1e-3), ("us", 1.0), ("ms", 1e3), ("s", 1e6))
_BINARY_SCALE = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))
_DECIMAL_SCALE = (("B", 1), ("KB", 10**3), ("MB", 10**6), ("GB", 10**9), ("TB", 10**12))


def format_quantity(value: Any, unit: str | None) -> str:
    """A param's value in the units its default was written in (``25MiB`` -> ``25 MiB``; a time in us, ms or s;
    bytes in binary or decimal multiples as the default was); a string as it is; anything else as
    :func:`format_value`."""
    if isinstance(value, str):
        return value
    if unit is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return format_value(value)
    scale = (
        _TIME_SCALE
        if unit in ("ns", "us", "ms", "s", "min")
        else _BINARY_SCALE
        if unit.endswith("iB")
        else _DECIMAL_SCALE
    )
    name, size = scale[0]
    for n, z in scale:
        if abs(value) >= z:
            name, size = n, z
    return f"{value / size:.6g} {name}"


def format_value(value: Any, limit: int = 8) -> str:
    """A value as a person reads it in a print or an assertion message: at most ``limit`` items of a list, and
    _SHOWN_ITEMS items in all however deep the lists nest."""
    return _format(value, limit, [_SHOWN_ITEMS], 0)


def _format(value: Any, limit: int, left: list[int], depth: int) -> str:
    if isinstance(value, Selection):
        return f"{len(value)} task{'s' if len(value) != 1 else ''}"
    if isinstance(value, TensorSet):
        return f"{len(value)} tensor{'s' if len(value) != 1 else ''} ({nbytes(value.nbytes)})"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return format_int(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        if depth >= MAX_NESTING:
            return "[...]"
        parts = []
        for v in value[:limit]:
            if left[0] <= 0:
                parts.append("...")
                break
            left[0] -= 1
            parts.append(_format(v, 8, left, depth + 1))
        shown = ", ".join(parts)
        return f"[{shown}{', ...' if len(value) > limit else ''}]" + (
            f" ({len(value)} items)" if len(value) > limit else ""
        )
    return str(value)


def format_int(value: int) -> str:
    """A whole number in full, or past _INT_DIGITS_BITS bits to 6 significant digits (``1.23457e+3010``)."""
    if value.bit_length() <= _INT_DIGITS_BITS:
        return str(value)
    log = math.log10(abs(value))  # exact enough for 6 digits, for any size
    exponent = math.floor(log)
    return f"{'-' if value < 0 else ''}{10 ** (log - exponent):.6g}e+{exponent}"
