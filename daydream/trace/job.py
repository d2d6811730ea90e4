"""Finding the rank traces of a multi-GPU job in a folder: one Kineto trace per rank, side by side.

A file is a rank's trace when its name ends in ``.json``, ``.json.gz`` or ``.json.xz`` (:data:`TRACE_SUFFIXES`) and it
is not an execution trace (``*.et.json``, ``*_et.json``) or a recording sidecar (``*.daydream.json``). Its rank is the
trace's ``distributedInfo.rank``, or else the last number in its file name (``rank3.json.gz``,
``worker_3.pt.trace.json``).
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

from daydream.errors import TraceError, listed

# the most ranks a job may have: more than any job recorded (today's largest run ~10^5 GPUs); checked before any list
# is sized by a rank or world size that a file name or a trace states
MAX_RANKS = 1 << 20
# a Kineto trace file's name ends in one of these: plain JSON, gzip or xz (read by their bytes, reading.py)
TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz")
_NOT_RANK_TRACES = tuple(f"{et}{s}" for et in (".et", "_et") for s in TRACE_SUFFIXES) + (".daydream.json",)


def trace_stem(name: str) -> str | None:
    """A trace file's name without its suffix (``rank0.json.xz`` -> ``rank0``), or None when it has none of
    :data:`TRACE_SUFFIXES`."""
    for suffix in sorted(TRACE_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def is_job(path: str | os.PathLike[str]) -> bool:
    """A folder of rank traces (as opposed to one trace file)."""
    return os.path.isdir(path)


def rank_trace_files(directory: str | os.PathLike[str]) -> list[str]:
    """The trace files of the folder ``directory``, in the order of the numbers in their names; an error when it
    holds none."""
    d = Path(directory)
    try:
        entries = sorted(p for p in d.iterdir() if p.is_file())
    except OSError as exc:
        raise TraceError(f"{directory}: cannot list the folder ({exc.strerror or exc})", path=directory) from None
    files = [str(p) for p in entries if p.name.endswith(TRACE_SUFFIXES) and not p.name.endswith(_NOT_RANK_TRACES)]
    files.sort(key=lambda f: (rank_from_name(f) is None, rank_from_name(f) or 0, f))  # rank2 before rank10
    if not files:
        raise TraceError(
            f"{directory}: the folder holds no rank traces (*.json, *.json.gz or *.json.xz files, one per rank)",
            path=directory,
        )
    return files


def rank_from_name(path: str | os.PathLike[str]) -> int | None:
    """The last number in a trace's file name, or None."""
    numbers = re.findall(r"\d+", Path(path).name.split(".json")[0])
    return int(numbers[-1]) if numbers else None


def check_ranks(where: str, found: list[tuple[str, int | None, int | None]]) -> dict[int, str]:
    """Rank -> trace file, from (file, rank the trace names or None, world size it names or None) per file; an
    error naming the files when two claim a rank, a file has no rank, or a rank of the world is missing."""
    by_rank: dict[int, str] = {}
    for path, rank, _ in found:
        r = rank if rank is not None else rank_from_name(path)
        if r is None:
            raise TraceError(
                f"{path}: neither the trace (distributedInfo.rank) nor the file name says which rank it is", path=path
            )
        if not 0 <= r < MAX_RANKS:
            raise TraceError(
                f"{path}: rank {r} (from its {'trace' if rank is not None else 'file name'}): a job has at most "
                f"{MAX_RANKS:,} ranks",
                path=path,
            )
        if r in by_rank:
            raise TraceError(f"{where}: {by_rank[r]} and {path} are both rank {r}", path=where)
        by_rank[r] = path
    sizes = {w for _, _, w in found if w is not None}
    if len(sizes) > 1:
        named = ", ".join(f"{Path(p).name}: {w}" for p, _, w in found if w is not None)
        raise TraceError(f"{where}: the traces name different world sizes ({named})", path=where)
    world = max(sizes | {max(by_rank) + 1})
    if world > MAX_RANKS:
        raise TraceError(f"{where}: a world of {world:,} ranks: a job has at most {MAX_RANKS:,}", path=where)
    n_missing = world - len(by_rank)
    if n_missing:
        missing = list(itertools.islice((r for r in range(world) if r not in by_rank), 10))
        shown = ", ".join(str(r) for r in missing) + (f" and {n_missing - 10} more" if n_missing > 10 else "")
        # which file is which rank: a misnamed or misplaced file is the usual cause
        have = listed([f"{Path(p).name} (rank {r})" for r, p in sorted(by_rank.items())], 8)
        raise TraceError(
            f"{where}: no trace for rank{'s' if n_missing > 1 else ''} {shown} of a world of {world} "
            f"(found {len(by_rank)} rank trace{'s' if len(by_rank) > 1 else ''}: {have})",
            path=where,
        )
    return dict(sorted(by_rank.items()))
