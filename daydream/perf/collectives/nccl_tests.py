"""Collective benchmark sweeps: the output of NVIDIA nccl-tests and of PARAM's comms benchmark, parsed.

Both tools print one row per message size. What "size" means follows nccl-tests (doc/PERFORMANCE.md), and PARAM
uses the same convention (its ``memSize``):

| collective | size is |
| --- | --- |
| all-reduce, broadcast, reduce | the buffer on each rank |
| all-gather | the gathered output on each rank (n x the per-rank input) |
| reduce-scatter | the input on each rank (n x the per-rank output) |
| all-to-all | the send buffer on each rank (n chunks, one per peer) |
| send/recv | the buffer sent by each rank |

``time`` is in microseconds, ``algbw = size / time`` and ``busbw = algbw x factor`` in GB/s (10^9 bytes/s), with the
bus factors of :mod:`daydream.perf.collectives`. Lines prefixed by a launcher (``0: `` from ``srun -l``,
``[1,0]<stdout>:`` from ``mpirun --tag-output``) are read through their prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from daydream.errors import DaydreamError
from daydream.files import read_input
from daydream.graph.kernel_class import collective_of


@dataclass(frozen=True)
class SweepPoint:
    """One message size of a sweep: ``time_us`` is nccl-tests' out-of-place time or PARAM's p50 latency."""

    nbytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    time_inplace_us: float | None = None


@dataclass(frozen=True)
class Sweep:
    """A benchmark sweep of one collective over message sizes on one set of ranks."""

    collective: str
    ranks: int | None
    points: tuple[SweepPoint, ...]
    source: str
    tool: str
    device: str | None = None

    @property
    def sizes(self) -> list[int]:
        return [p.nbytes for p in self.points]

    @property
    def times_us(self) -> list[float]:
        return [p.time_us for p in self.points]


def normalize_collective(name: str) -> str:
    """The canonical name of a collective: ``allreduce``, ``allgather``, ``reducescatter``, ``alltoall``,
    ``broadcast``, ``reduce`` or ``sendrecv``.

    Accepts API and benchmark spellings (``all_reduce``, ``AllReduce``, ``all_to_allv``, ``all_gather_base``,
    ``all_reduce_perf``, ``nccl:all_to_all``) and kernel names (``ncclKernel_AllReduce_RING_LL_Sum_float``),
    through the same pattern the graph uses for its ``collective`` attribute.
    """
    # Underscores and separators go first so that "all_reduce" reads as the "AllReduce" the kernel pattern knows.
    found = collective_of(re.sub(r"[^0-9A-Za-z]", "", name))
    if found is None:
        raise DaydreamError(
            f"unknown collective {name!r}: use allreduce, allgather, reducescatter, alltoall, broadcast, reduce or"
            " sendrecv"
        )
    return "sendrecv" if found in ("send", "recv") else found


# ---- nccl-tests -------------------------------------------------------------------------------------------------

_NCCL_HEADER = re.compile(r"#\s*size\s+count\s+type\b")
_NCCL_BINARY = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_NCCL_TEST_FLAG = re.compile(r"\s-t\s+([a-z_]+)\b")  # wrapper scripts that take the collective as "-t all_gather"
_COUNT_COLUMNS = ("#wrong", "error", "#wrong_count")
_COUNT_VALUE = re.compile(r"^(\d+|N/A|\d(\.\d+)?e[+-]\d+)$")  # wrong-value counts; old versions print "0e+00"
_RANK_LINE = re.compile(r"#\s*Rank\s+(\d+)\b.*?\bdevice\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")


def parse_nccl_tests(
    text: str, source: str = "<text>", collective: str | None = None, ranks: int | None = None
) -> Sweep:
    """The sweep in an nccl-tests output.

    The collective comes from ``collective`` when given, else from the ``# Collective test starting: X_perf`` line
    or any ``X_perf`` command line in the text; the rank count from ``ranks``, else the ``#  Rank N ...`` device
    lines, else the busbw/algbw ratio of the largest size. Rows must follow the column header; a row that does not
    fit it raises :class:`DaydreamError` naming ``source`` and the line.
    """
    lines = text.splitlines()
    found_collective: str | None = None
    rank_ids: set[int] = set()
    device: str | None = None
    columns: list[str] | None = None
    header_line = 0
    prefix = ""
    points: list[SweepPoint] = []
    for lineno, raw in enumerate(lines, start=1):
        if found_collective is None and (m := _NCCL_BINARY.search(raw) or _NCCL_TEST_FLAG.search(raw)):
            found_collective = m.group(1)
        if (m := _RANK_LINE.search(raw)) is not None:
            rank_ids.add(int(m.group(1)))
            device = device or m.group(2)
            continue
        if (m := _NCCL_HEADER.search(raw)) is not None:
            prefix = raw[: m.start()]
            columns = raw[m.start() + 1 :].split()
            header_line = lineno
            continue
        if columns is None:
            continue
        if prefix:
            if not raw.startswith(prefix):
                continue  # another rank's or the launcher's output
            raw = raw[len(prefix) :]
        stripped = raw.strip()
        if not stripped or not stripped[0].isdigit():
            continue  # comments, NCCL INFO lines, launcher noise
        points.append(_nccl_row(stripped.split(), columns, header_line, source, lineno))
    if columns is None:
        raise DaydreamError(f"{source}: no nccl-tests column header ('#  size  count  type ...') found")
    if not points:
        raise DaydreamError(f"{source}: the nccl-tests output has a header (line {header_line}) but no result rows")
    name = collective or found_collective
    if name is None:
        raise DaydreamError(
            f"{source}: cannot tell which collective was measured (no 'Collective test starting' or *_perf line); "
            "name it explicitly"
        )
    canonical = normalize_collective(name)
    n = ranks or (max(rank_ids) + 1 if rank_ids else None) or _ranks_from_ratio(canonical, points)
    return Sweep(canonical, n, tuple(points), source, "nccl-tests", device)


def _nccl_row(tokens: list[str], columns: list[str], header_line: int, source: str, lineno: int) -> SweepPoint:
    # The trailing error count ("#wrong"/"error") is sometimes cut off in pasted output; everything else must be there,
    # which the other error-count column shows: a missing column further left shifts a bandwidth into it.
    counts = [i for i, c in enumerate(columns) if c in _COUNT_COLUMNS]
    cut_tail = len(tokens) == len(columns) - 1 and counts and counts[-1] == len(columns) - 1
    if not (len(tokens) == len(columns) or cut_tail) or any(
        i < len(tokens) and not _COUNT_VALUE.match(tokens[i]) for i in counts
    ):
        raise DaydreamError(
            f"{source}:{lineno}: expected {len(columns)} columns as in the header at line {header_line}, found"
            f" {len(tokens)}"
        )
    where = {name: [i for i, c in enumerate(columns) if c == name] for name in ("size", "time", "algbw", "busbw")}
    if not where["size"] or not where["time"] or len(where["algbw"]) != len(where["time"]):
        raise DaydreamError(f"{source}:{header_line}: the header lacks size/time/algbw/busbw columns")
    try:
        nbytes = int(tokens[where["size"][0]])
        times = [float(tokens[i]) for i in where["time"]]
        algbw = float(tokens[where["algbw"][0]])
        busbw = float(tokens[where["busbw"][0]]) if where["busbw"] else algbw
    except (ValueError, IndexError):
        raise DaydreamError(f"{source}:{lineno}: not a result row: {' '.join(tokens)!r}") from None
    if nbytes <= 0 or times[0] <= 0:
        raise DaydreamError(f"{source}:{lineno}: size and time must be positive")
    return SweepPoint(nbytes, times[0], algbw, busbw, times[1] if len(times) > 1 else None)


def _ranks_from_ratio(collective: str, points: list[SweepPoint]) -> int | None:
    """The rank count that busbw/algbw = factor(n) implies, read at the largest size (where rounding matters least)."""
    best = max(points, key=lambda p: p.algbw_gbs)
    if best.algbw_gbs < 1.0:
        return None
    ratio = best.busbw_gbs / best.algbw_gbs
    if collective == "allreduce" and ratio < 1.999:
        n = 2.0 / (2.0 - ratio)  # 2(n-1)/n
    elif collective in ("allgather", "reducescatter", "alltoall") and ratio < 0.999:
        n = 1.0 / (1.0 - ratio)  # (n-1)/n
    else:
        return None
    return round(n) if abs(n - round(n)) < 0.1 * n else None


# ---- PARAM comms ------------------------------------------------------------------------------------------------

_PARAM_WORLD = re.compile(r"world_size\W{0,3}\s*(\d+)")
_PARAM_COLLECTIVE = re.compile(r"['\"]collective['\"]\s*:\s*['\"](\w+)['\"]|--collective[ =](\w+)")


def parse_param_comms(
    text: str, source: str = "<text>", collective: str | None = None, ranks: int | None = None
) -> Sweep:
    """The sweep in the output of PARAM's ``comms.py`` (train/comms/pt): the ``COMMS-RES`` table.

    Reads both layouts PARAM has printed: the tab-separated ``COMMS-RES  size (B)  num-elements  Latency(us):p50
    p75  p95  algBW(GB/s)  busBW(GB/s)`` and the current fixed-width one whose rows start with
    ``COMMS-RES-<collective>-<dtype>`` and add ``Min``/``Max``. The time is the p50 latency across ranks.
    """
    columns: list[str] | None = None
    header_line = 0
    row_collective: str | None = None
    points: list[SweepPoint] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        at = raw.find("COMMS-RES")
        if at < 0:
            continue
        line = raw[at:]
        if columns is None or "size (B)" in line or "size(B)" in line:
            if "pingLatency" in line or line.startswith("COMMS-RES-QUANT"):
                raise DaydreamError(
                    f"{source}:{lineno}: only PARAM's collective table is read (not pt2pt or quantized)"
                )
            columns = [c.lower() for c in re.sub(r"size \(B\)", "size(B)", line).split()]
            header_line = lineno
            continue
        tokens = line.split()
        if row_collective is None and tokens[0].startswith("COMMS-RES-"):
            row_collective = tokens[0].split("-")[2]
        points.append(_param_row(tokens, columns, header_line, source, lineno))
    if columns is None:
        raise DaydreamError(f"{source}: no PARAM 'COMMS-RES' table found")
    if not points:
        raise DaydreamError(f"{source}: the PARAM table (line {header_line}) has no result rows")
    name = collective or row_collective or _first_group(_PARAM_COLLECTIVE.search(text))
    if name is None:
        raise DaydreamError(f"{source}: cannot tell which collective was measured; name it explicitly")
    canonical = normalize_collective(name)
    world = _PARAM_WORLD.search(text)
    n = ranks or (int(world.group(1)) if world else None) or _ranks_from_ratio(canonical, points)
    return Sweep(canonical, n, tuple(points), source, "param")


def _first_group(m: re.Match[str] | None) -> str | None:
    if m is None:
        return None
    return next((g for g in m.groups() if g), None)


def _param_row(tokens: list[str], columns: list[str], header_line: int, source: str, lineno: int) -> SweepPoint:
    def index(*names: str) -> int:
        for name in names:
            if name in columns:
                return columns.index(name)
        raise DaydreamError(f"{source}:{header_line}: the PARAM header lacks a {names[0]} column")

    i_size, i_lat = index("size(b)"), index("latency(us):p50")
    i_alg, i_bus = index("algbw(gb/s)"), index("busbw(gb/s)")
    if len(tokens) <= max(i_size, i_lat, i_alg, i_bus):
        raise DaydreamError(
            f"{source}:{lineno}: expected at least {max(i_size, i_lat, i_alg, i_bus) + 1} columns as in the header at "
            f"line {header_line}, found {len(tokens)}"
        )
    try:
        point = SweepPoint(int(tokens[i_size]), float(tokens[i_lat]), float(tokens[i_alg]), float(tokens[i_bus]))
    except ValueError:
        raise DaydreamError(f"{source}:{lineno}: not a result row: {' '.join(tokens)!r}") from None
    if point.nbytes <= 0 or point.time_us <= 0:
        raise DaydreamError(f"{source}:{lineno}: size and latency must be positive")
    return point


# a sweep's text: a few hundred lines of a benchmark's output; bounded so that /dev/zero-like input ends
MAX_SWEEP_BYTES = 64 * 1024 * 1024


# ---- files ------------------------------------------------------------------------------------------------------


def load_sweep(path: str | Path, collective: str | None = None, ranks: int | None = None) -> Sweep:
    """A sweep file of either tool (told apart by PARAM's ``COMMS-RES`` marker)."""
    p = Path(path)
    text = read_input(p, "sweep file", MAX_SWEEP_BYTES).decode("utf-8", errors="replace")
    if "COMMS-RES" in text:
        return parse_param_comms(text, str(p), collective, ranks)
    return parse_nccl_tests(text, str(p), collective, ranks)
