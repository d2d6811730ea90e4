"""How the commands print: tables on a console, one JSON object, a line on stderr."""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console

from daydream.files import clip, json_bytes
from daydream.names import terminal_text


def tables_console(stderr: bool = False) -> Console:
    """A console for the tables; names from traces and scripts reach it as data (Text), never as markup or emoji
    codes."""
    from daydream.presentation.console import terminal_console

    return terminal_console(stderr=stderr, soft_wrap=True)


def print_json(obj: object) -> None:
    sys.stdout.buffer.write(json_bytes(obj, enc_hook=json_value) + b"\n")


def json_value(obj: object) -> object:
    """numpy scalars and other number-likes in results, as JSON numbers."""
    if hasattr(obj, "item"):
        return obj.item()  # type: ignore[attr-defined]
    raise NotImplementedError(f"cannot write {type(obj).__name__} as JSON")


def say(line: str) -> None:
    """One line to stderr, cut to MAX_MESSAGE; never raises (an error about an error would hide the first)."""
    with contextlib.suppress(Exception):  # stderr closed or unencodable: nothing left to tell the user with
        print(terminal_text(clip(line)), file=sys.stderr, flush=True)
