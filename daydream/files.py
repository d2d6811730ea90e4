"""Writing files: every output daydream writes goes through here, so none is ever seen half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from daydream.errors import DaydreamError


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    target = Path(path)
    if target.is_dir():
        raise DaydreamError(f"{target}: is a directory, expected a file path to write")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise DaydreamError(f"{target}: directory {parent} does not exist")
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
