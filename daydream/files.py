"""Output: every file daydream writes goes through here, so none is ever seen half-written and none overwrites an
input of the run; and messages quoting user input are cut to a readable length (:func:`clip`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from daydream.errors import DaydreamError

# printed errors and warnings are cut to this many characters: a message quoting a huge name or line stays readable
MAX_MESSAGE = 2000


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out: for messages that quote user input."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def read_toml(path: str | os.PathLike[str], what: str, hint: str = "") -> dict[str, Any]:
    """A TOML input file (a cases or scenarios file): its tables, or DaydreamError naming the file as ``what``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    p = Path(path)
    if not p.is_file():
        raise DaydreamError(f"{p}: no such {what}{hint}")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DaydreamError(f"{p}: not a TOML {what}: {exc}") from None


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    target, parent = _file_to_write(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; a written file gets the usual permissions
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise DaydreamError(f"{target}: cannot write: {exc.strerror or exc}") from None


def check_output_path(out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None], what: str = "output") -> Path:
    """Refuse an output path before anything is written: empty, a directory, in a folder that does not exist, or
    the same file as one of ``inputs`` (this run's trace, scripts, ...; compared as files, so through symlinks and
    hard links too). ``what`` names the option in messages (``--export-trace``). Returns the path."""
    text = os.fspath(out)
    target, _ = _file_to_write(out, what)
    if target.exists():
        for inp in inputs:
            if inp is None or not str(inp) or str(inp).startswith("<"):
                continue
            try:
                same = os.path.samefile(target, inp)
            except (OSError, ValueError):
                continue
            if same:
                named = "" if os.fspath(inp) == text else f" (the same file as {inp})"
                raise DaydreamError(f"{target}: is an input of this run{named}; refusing to overwrite it ({what})")
    return target


def _file_to_write(path: str | os.PathLike[str], what: str | None = None) -> tuple[Path, Path]:
    """The path and its folder, or DaydreamError when no file can be written there: an empty name, a directory, a
    folder that does not exist. ``what`` names the option in messages."""
    tail = f" ({what})" if what else ""
    if not os.fspath(path).strip():
        raise DaydreamError(f"{what + ': ' if what else ''}empty file name; name the file to write")
    target = Path(path)
    if target.is_dir():
        raise DaydreamError(f"{target}: is a directory, expected a file path to write{tail}")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise DaydreamError(f"{target}: directory {parent} does not exist{tail}")
    return target, parent


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
