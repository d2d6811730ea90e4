"""Names from a trace as people read them: a kernel demangled (a Composable Kernel or CUTLASS template is traced by its
mangled linker name, ``_ZN2ck16tensor_operation...``), without its return type and parameter list, a long name
shortened in its middle (names that differ at their end stay told apart). The full names stay in JSON and, on the
HTML page, on hover."""

from __future__ import annotations

import re
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


# Text from a trace, a script or a file name, on its way out. One sanitizer per kind of sink; JSON needs none (its
# encoder writes every control character as \uNNNN and a reader gets the name back whole).
#
# A terminal acts on C0 controls, DEL and C1 controls: ESC starts a sequence that can clear the screen, retitle the
# window or (on some terminals) set the clipboard, U+009B is a one-character CSI, CR and BS overwrite what was shown.
# Tab and newline are kept: messages are lines and tables.
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# XML 1.0 forbids C0 controls but tab, newline and CR, lone surrogates and U+FFFE/U+FFFF (one makes a whole SVG
# unreadable); HTML reads C0 and C1 controls and DEL as parse errors (a NUL becomes U+FFFD, or is dropped).
_MARKUP_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` safe to print to a terminal (stdout's tables and lines, stderr's messages): each control character
    but tab and newline shown as ``\\xNN`` (ESC as ``\\x1b``), so a name cannot move the cursor or retitle the window;
    everything else as it is."""
    return _TERMINAL_UNSAFE.sub(_escape, text) if _TERMINAL_UNSAFE.search(text) else text


def markup_text(text: str) -> str:
    """``text`` safe in XML and HTML (the report's SVG figures and page): each character XML 1.0 or HTML forbids
    (C0 controls but tab, newline and CR; DEL; C1 controls; lone surrogates; U+FFFE, U+FFFF) shown as ``\\xNN`` or
    ``\\uNNNN``. The markup's own escaping (``<``, ``&``) is the writer's."""
    return _MARKUP_UNSAFE.sub(_escape, text) if _MARKUP_UNSAFE.search(text) else text
