"""Names from a trace as people read them: a kernel demangled (a Composable Kernel or CUTLASS template is traced by its
mangled linker name, ``_ZN2ck16tensor_operation...``), without its return type and parameter list, a long name
shortened in its middle (names that differ at their end stay told apart). The full names stay in JSON and, on the
HTML page, on hover."""

from __future__ import annotations

from functools import lru_cache

ANONYMOUS = "(anonymous namespace)"


def middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, shortened in the middle: names that differ at their end (``day_0_sparse[3]``,
    a kernel's template arguments) stay told apart."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


@lru_cache(maxsize=4096)
def demangled(name: str) -> str:
    """A mangled C++ name (``_Z...``) as its source spells it, by the Rust ``cpp_demangle`` crate (the
    ``cpp-demangle`` package: GNU's c++filt gives up on Composable Kernel's templates, as LLVM's does not); the name
    itself where it is not mangled, does not demangle (a profiler truncated it), or the package is absent (the
    ``demangle`` extra: ``pip install 'daydream-whatif[demangle]'``; it ships no wheel for Linux on ARM)."""
    if not name.startswith("_Z"):
        return name
    try:
        from cpp_demangle import demangle
    except ImportError:
        return name
    try:
        return str(demangle(name))
    except Exception:  # noqa: BLE001 - the binding raises its own error types on a name it cannot read
        return name


def kernel_label(name: str) -> str:
    """A kernel's name demangled, without its return type and parameter list (``void f<T>(float*, int)`` ->
    ``f<T>``; ``(anonymous namespace)`` is part of the name, not a parameter list)."""
    text = demangled(name).removeprefix("void ")
    depth = 0
    for i, ch in enumerate(text):  # the parameter list: the first "(" outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i > 0 and not text.startswith(ANONYMOUS, i):
            return text[:i]
    return text


def kernel_short(name: str, width: int) -> str:
    """A kernel's label (:func:`kernel_label`) in ``width`` characters: its qualified name whole where it fits, its
    template arguments shortened in their middle (``ck::...::kernel_grouped_conv_fwd_xdl_cshuffle_v3<ck::Gridw…10>``),
    else the whole label shortened in its middle."""
    label = kernel_label(name)
    head = label.find("<")
    if head > 0 and head + 8 <= width and len(label) > width:
        return label[:head] + middle(label[head:], width - head)
    return middle(label, width)


def track_label(track: str, doing: str | None = None) -> str:
    """A thread or stream of the graph (``cpu:PID/TID``, ``gpu:DEVICE/STREAM``) as a reader names it, with what it
    mostly does where given: ``cpu:2910249/2919752`` -> ``CPU thread 2919752 (backward)``, ``gpu:0/7`` -> ``GPU 0
    stream 7 (gemm)``; other names (``cpu:1/DataLoader workers``) keep their own words."""
    kind, _, rest = track.partition(":")
    owner, _, lane = rest.partition("/")
    if kind == "gpu" and lane:
        text = f"GPU {owner} stream {lane}"
    elif kind == "cpu" and lane:
        text = f"CPU thread {lane}" if lane.lstrip("-").isdigit() else f"CPU {lane}"
    else:
        text = track
    return f"{text} ({doing})" if doing else text
