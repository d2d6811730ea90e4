"""Names from a trace as people read them: a kernel without its return type and parameter list, a long name
shortened in its middle (names that differ at their end stay told apart). The full names stay in JSON and, on the
HTML page, on hover."""

from __future__ import annotations


def middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, shortened in the middle: names that differ at their end (``day_0_sparse[3]``,
    a kernel's template arguments) stay told apart."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def kernel_label(name: str) -> str:
    """A kernel's name without its return type and parameter list (``void f<T>(float*, int)`` -> ``f<T>``)."""
    text = name.removeprefix("void ")
    depth = 0
    for i, ch in enumerate(text):  # the parameter list: the first "(" outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i > 0:
            return text[:i]
    return text
