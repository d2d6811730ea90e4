"""The repository's tracked files stay small enough to travel: a lent GPU machine takes the working tree (tracked
files and untracked ones git does not ignore) of at most 64 MiB a call, with the wheels its script carries (.whl/,
about 3 MB). The gzip corpus had grown to 84 MB and would have been refused; stored as xz it is 51 MB. A commit
that brings the tree past MAX_TRACKED_BYTES fails here, before a lease finds out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_TRACKED_BYTES = 60 << 20  # 64 MiB a call, less the wheels and a margin


def test_the_tracked_tree_fits_what_travels_to_a_lent_gpu() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
    ).stdout
    files = [ROOT / name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]
    sizes = {f: f.stat().st_size for f in files if f.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert total <= MAX_TRACKED_BYTES, (
        f"the tracked files come to {total / 2**20:.1f} MiB, over {MAX_TRACKED_BYTES >> 20} MiB: a lent GPU takes 64 "
        f"MiB a call (validation/compact_traces.py stores traces as xz); the largest: "
        + ", ".join(f"{f.relative_to(ROOT)} ({sizes[f] / 2**20:.1f} MiB)" for f in largest)
    )
