"""Times and sizes as people read them: microseconds shown as milliseconds, signed changes without signed zeros, and
percentages only of quantities that are not near zero. One set of rules for every screen (the terminal, a script's
statements table, the page)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

ZERO_US = 0.5  # a change that rounds to 0.000 ms is no change: no sign, no percent


def ms(us: float) -> str:
    """``1,234.567 ms``."""
    return f"{us / 1e3:,.3f} ms"


def signed_ms(us: float) -> str:
    """``+1.234 ms``, ``-0.250 ms``; ``0.000 ms`` (unsigned) for what rounds to nothing."""
    return "0.000 ms" if abs(us) < ZERO_US else f"{us / 1e3:+,.3f} ms"


def change(before: float, after: float, whole: float | None = None) -> str:
    """After less before (:func:`signed_ms`), with its percentage of before where before is not near zero: at least
    ZERO_US, and at least 1% of ``whole`` (the step the quantity is part of) where given - a part of 0.3 us gone is
    no -100%, nor a part of 1 us grown to 60 us a +6,000%."""
    d = after - before
    text = signed_ms(d)
    if text.startswith("0.000") or abs(before) < ZERO_US or (whole is not None and abs(before) < 0.01 * abs(whole)):
        return text
    return f"{text} ({d / before:+.1%})"


def nbytes(n: float) -> str:
    """``1.50 GiB``, ``12.0 MiB``, ``512 KiB``, ``100 B``: a size in the largest binary unit that keeps it >= 1."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:,.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{n:,.0f} B"


def signed_bytes(n: float) -> str:
    """``+12.0 MiB``, ``-1.50 GiB``; ``0 B`` for nothing."""
    return "0 B" if abs(n) < 0.5 else ("+" if n > 0 else "-") + nbytes(abs(n))


class IntervalMarks(NamedTuple):
    """How one screen writes an interval: the terminal in ASCII and short, the page in typography."""

    plus_minus: str  # before a half-width
    extrapolated_inside: str  # an extrapolated range's mark, inside its parentheses
    extrapolated_after: str  # and after them
    extrapolated_line: str  # an extrapolated interval's mark after its driver, in its line


TERMINAL_MARKS = IntervalMarks("+-", "", " extrap.", " (extrapolated)")
PAGE_MARKS = IntervalMarks("±", ", extrapolated", "", "")


class _Part(Protocol):
    name: str
    half_width_pct: float
    source: str


class _Interval(Protocol):
    half_width_pct: float
    driver: str
    extrapolated: bool
    parts: list[_Part]  # type: ignore[misc]


def interval_range(low: str, high: str, extrapolated: bool, marks: IntervalMarks) -> str:
    """``(33.900-36.800)``: an interval's ends as the screen writes them (ms, bytes), marked where it is extrapolated
    (a script or param the validation ledger never measured)."""
    if not extrapolated:
        return f"({low}-{high})"
    return f"({low}-{high}{marks.extrapolated_inside}){marks.extrapolated_after}"


def interval_parts(parts: Iterable[_Part], marks: IntervalMarks) -> str:
    """``noise +-1.2% (the trace's steps); amp +-8.9% (ledger)``: what an interval is made of, each part's half-width
    and where it is from."""
    return "; ".join(f"{p.name} {marks.plus_minus}{p.half_width_pct:.1f}% ({p.source})" for p in parts)


def interval_line(iv: _Interval, marks: IntervalMarks) -> str:
    """``90% interval +-9.0%, driven by amp: PARTS``: an interval's half-width, its largest part and its parts."""
    mark = marks.extrapolated_line if iv.extrapolated else ""
    return (
        f"90% interval {marks.plus_minus}{iv.half_width_pct:.1f}%, driven by {iv.driver}{mark}:"
        f" {interval_parts(iv.parts, marks)}"
    )


def brief(value: object, width: int = 60) -> str:
    """A value as a one-screen repr shows it: a number to 7 significant digits, a long string cut, a container by its
    size where it holds more than a few, a nested result by its own short repr (or its type)."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return f"{value:.7g}"
    if isinstance(value, str):
        return repr(value if len(value) <= width else value[: width - 1] + "…")
    if isinstance(value, (list, tuple, dict)):
        noun = "entries" if isinstance(value, dict) else "items"
        if len(value) > 4:  # (never each of a million items)
            return f"<{len(value):,} {noun}>"
        if isinstance(value, dict):
            text = "{" + ", ".join(f"{brief(k, 30)}: {brief(v, 30)}" for k, v in value.items()) + "}"
        else:
            text = "[" + ", ".join(brief(v, 30) for v in value) + "]"
        return text if len(text) <= width else f"<{len(value):,} {noun}>"
    text = repr(value)  # a result of ours: its own one-line repr, where it is short
    return text if len(text) <= 2 * width else f"{type(value).__name__}(…)"


def brief_repr(self: object) -> str:
    """``Name(field=value, ...)`` with each value :func:`brief`: the repr of a result struct or dataclass, one screen
    whatever it holds (a plain one prints every task, step and float it holds)."""
    import dataclasses

    import msgspec

    names = msgspec.structs.fields(self) if isinstance(self, msgspec.Struct) else dataclasses.fields(self)  # type: ignore[arg-type]
    shown = ", ".join(f"{f.name}={brief(getattr(self, f.name))}" for f in names if not f.name.startswith("_"))
    return f"{type(self).__name__}({shown})"
