"""The rich console every command prints with: names from traces, scripts and file names reach it as text whose
control characters are shown escaped (:func:`daydream.names.terminal_text`), whatever way they were put on it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from daydream.names import terminal_text


class TerminalConsole(Console):
    """A rich Console whose text is made terminal-safe as it is written: a kernel named ``\\x1b]0;T\\x07`` prints as
    those characters, not as a command to the terminal. Tables hold data already escaped (``terminal.plain``), so
    their widths are right; this catches the rest (an f-string naming a file, a message). rich's own control
    segments (cursor moves of a progress bar) and styles are kept."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # rich's one place segments become text: data segments escaped, its control segments left alone
        return super()._render_buffer(
            Segment(terminal_text(text), style, control) if control is None else Segment(text, style, control)
            for text, style, control in buffer
        )


def terminal_console(**options: Any) -> Console:
    """A :class:`TerminalConsole` made with rich's ``options`` (``stderr=True``, ``soft_wrap=True``, ...), emoji
    codes off: ``:smile:`` in a name is text."""
    return TerminalConsole(**{"emoji": False, **options})
