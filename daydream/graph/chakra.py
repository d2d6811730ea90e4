"""Chakra execution traces in and out: MLCommons' graph of a distributed training step (``et_def.proto``), which
ASTRA-sim and other simulators read, written from a task graph and read into one.

A Chakra trace of a job is one file per rank (``NAME.RANK.et``): a ``GlobalMetadata`` message, then one ``Node``
message per node, each length-prefixed (``protolib``'s framing). Both are made and read through ``mlc-chakra``'s
generated schema and its ``protolib`` encoder and decoder (the optional extra ``[chakra]``); nothing here writes
protobuf by hand.

Written (:func:`write_chakra`): every task a node - a GPU kernel, copy or fill a ``COMP_NODE`` (``is_cpu_op``
false), a host task a ``COMP_NODE`` with ``is_cpu_op`` true, a collective a ``COMM_COLL_NODE`` (``comm_type``,
``comm_size``, ``pg_name``), a send or receive a ``COMM_SEND_NODE`` / ``COMM_RECV_NODE`` - in an order where every
dependency comes before its dependents (the graph is acyclic, so the ids are too), ``duration_micros`` the duration
rounded to whole microseconds. Every dependency is a ``data_deps`` entry (ASTRA-sim's ETFeeder reads no other; with
``order_deps="ctrl"`` a thread's and a stream's order go to ``ctrl_deps``). What a consumer cannot read from Chakra's
fields becomes nodes it can: a host task's framework time after it on its thread (its ``gap``) a CPU node after it
(``NAME [gap]``) that the next task on the thread depends on, and a rank's late start (a job's ``release``) a node
its first tasks depend on. Every task attribute rides along as a node attribute of its own name (exact durations,
gaps, threads, steps, phases, ...), each dependency's kind and delay as ``data_dep_kinds`` / ``data_dep_lags_us``,
and the graph's own (steps, measured times, delays, collective pricing) as the metadata's ``daydream`` attribute, so
that daydream reads its own files back to the graph it wrote. ``comm_group.json`` names each process group's ranks
(ASTRA-sim's ``--comm-group-configuration``). A job written for more ranks than it holds (a scale-out: ``world``)
repeats its ranks: rank r of k stands for r, r + k, r + 2k, ...; a process group smaller than the traced world is
repeated with them, under a name of its own per copy.

Read (:func:`read_chakra`): a file or a folder of one file per rank, of any producer. daydream's own files give back
their graph; another producer's nodes become tasks (``COMP_NODE`` with ``is_cpu_op`` a host task, else a kernel;
memory nodes copies; communication nodes comm tasks), their ``data_deps`` and ``ctrl_deps`` dependencies (a kernel's
on a host task its launch), and what a Chakra trace lacks is said once: without ``tid`` and ``stream`` attributes a
rank's host nodes share one thread, its kernels one stream and each process group's collectives one stream, each
run in the file's order; launches have no latency, threads no gaps. Collectives are matched across ranks by process
group and order of issue, as a traced job's; a send and its receive by their ranks (``comm_src``, ``comm_dst``).

Inputs are untrusted: a file that is not a Chakra trace, a node that breaks the schema's rules (a duplicate id, a
duration beyond MAX_TIME_US, an attribute of the wrong type), or dependencies in a cycle, is a one-line TraceError
naming the file (and the node); a dependency on a node the file does not hold is dropped, and said.
"""

from __future__ import annotations

import gzip
import heapq
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

import msgspec
import networkx as nx
import numpy as np

from daydream._version import __version__
from daydream.errors import DaydreamError, TraceError, about_file, listed
from daydream.files import check_output_path, json_bytes, open_input, write_atomically
from daydream.graph.adjacency import attrs_of, fill, predecessors_of
from daydream.graph.job import WORLD, join_ranks, rank_fingerprint
from daydream.graph.kernel_class import classify_kernel
from daydream.graph.schema import (
    CPU_KINDS,
    EDGE_KINDS,
    GPU_KINDS,
    ORDER_KINDS,
    TASK_KINDS,
    Causality,
    CollectivePricing,
    Delays,
    ExecutionTraceUse,
    RankInfo,
    StepInfo,
    new_edge_attrs,
    new_task_attrs,
)
from daydream.trace.job import MAX_RANKS, check_ranks
from daydream.trace.reading import GZIP_RATIO_FLOOR, MAX_EVENTS, MAX_GZIP_RATIO, MAX_TIME_US, MAX_TRACE_BYTES

# how a Chakra file is named: NAME.RANK.et (ASTRA-sim's --workload-configuration=DIR/NAME reads DIR/NAME.RANK.et)
ET_SUFFIXES = (".et", ".et.gz")
COMM_GROUP_FILE = "comm_group.json"  # process group -> its ranks (ASTRA-sim's --comm-group-configuration)
PRODUCER = "daydream"  # the metadata's ``producer`` attribute of daydream's own files
CHAKRA_VERSION = "1.0.0"  # the schema version written (mlc-chakra 1.0.0's)
MAX_MESSAGE_BYTES = 64 << 20  # one node or the metadata: real ones are bytes to kilobytes
MAX_NODES = MAX_EVENTS  # nodes of one file
# a dependency's kind in a written file beyond the graph's edge kinds: on a rank's start (its release), on a gap node
RELEASE, GAP = "release", "gap"
WHOLE = "trace"  # the one step of another producer's file: all of it (as a Kineto trace without ProfilerStep's)
ORDER_DEPS = ("data", "ctrl")  # where a thread's or a stream's order goes: data_deps (every consumer) or ctrl_deps
INSTALL = "pip install 'daydream-whatif[chakra]' (or mlc-chakra)"

# Chakra's collective types (CollectiveCommType) by daydream's collective names, and back
COMM_TYPES: dict[str, int] = {
    "allreduce": 0,
    "reduce": 1,
    "allgather": 2,
    "gather": 3,
    "scatter": 4,
    "broadcast": 5,
    "alltoall": 6,
    "reducescatter": 7,
    "barrier": 9,
}
COLLECTIVE_OF_TYPE: dict[int, str] = {v: k for k, v in COMM_TYPES.items()} | {
    8: "reducescatter"
}  # REDUCE_SCATTER_BLOCK
# node attributes Chakra's consumers read (and daydream writes from the task): never written from a task's own
CHAKRA_ATTRIBUTES = frozenset(
    {
        "is_cpu_op",
        "num_ops",
        "tensor_size",
        "comm_type",
        "comm_priority",
        "comm_size",
        "comm_src",
        "comm_dst",
        "comm_tag",
        "pg_name",
        "involved_dim",
        "data_dep_kinds",
        "data_dep_lags_us",
        "ctrl_dep_kinds",
        "ctrl_dep_lags_us",
        "gap_of",
        "release_of",
        "task_id",
        "tid",
    }
)
# task attributes a written file states its own way (the node's name; the rank, group and collective per copy)
_NOT_WRITTEN = frozenset({"name", "rank", "collective_id", "group", "group_size", "group_ranks"})


def _schema() -> SimpleNamespace:
    """mlc-chakra's generated schema and protolib, imported when first needed (an optional extra)."""
    try:
        from chakra.schema.protobuf import et_def_pb2 as pb
        from chakra.src.third_party.utils import protolib
        from google.protobuf.message import DecodeError
    except ImportError as exc:
        raise DaydreamError(
            f"Chakra execution traces need mlc-chakra, which is not installed ({exc}): {INSTALL}"
        ) from None
    return SimpleNamespace(pb=pb, encode=protolib.encodeMessage, decode=protolib.decodeMessage, DecodeError=DecodeError)


# --- finding the files


def _stripped(name: str) -> str | None:
    """A file name without its Chakra suffix, or None where it is not a Chakra file."""
    for suffix in ET_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def is_chakra(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Chakra trace: a ``.et`` file, or a folder that holds one (a job's, one per rank)."""
    p = Path(path)
    if _stripped(p.name) is not None and not p.is_dir():
        return True
    try:
        return p.is_dir() and any(_stripped(e.name) is not None and e.is_file() for e in p.iterdir())
    except OSError:
        return False


def chakra_files(path: str | os.PathLike[str]) -> list[str]:
    """The Chakra files of ``path``: itself, or a folder's ``.et`` files in the order of the numbers in their names."""
    p = Path(path)
    if not p.is_dir():
        return [os.fspath(path)]
    try:
        files = [str(e) for e in sorted(p.iterdir()) if _stripped(e.name) is not None and e.is_file()]
    except OSError as exc:
        raise TraceError(f"{path}: cannot list the folder ({exc.strerror or exc})", path=path) from None
    if not files:
        raise TraceError(f"{path}: the folder holds no Chakra traces (*.et files, one per rank)", path=path)
    files.sort(key=lambda f: (rank_of_name(f) is None, rank_of_name(f) or 0, f))
    return files


def chakra_inputs(path: str | os.PathLike[str]) -> list[str]:
    """The files reading ``path`` reads: its Chakra files and the folder's comm-group file."""
    try:
        files = chakra_files(path)
    except TraceError:
        return []
    group_file = Path(path) / COMM_GROUP_FILE
    return files + ([str(group_file)] if Path(path).is_dir() and group_file.is_file() else [])


def chakra_is_job(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds the Chakra files of more than one rank."""
    return Path(path).is_dir() and len(chakra_files(path)) > 1


def rank_of_name(path: str | os.PathLike[str]) -> int | None:
    """The last number in a Chakra file's name (``dlrm8.3.et``: 3), or None."""
    numbers = re.findall(r"\d+", _stripped(Path(path).name) or Path(path).name)
    return int(numbers[-1]) if numbers else None


# --- node attributes: each value in the field of its type


def _attr(s: SimpleNamespace, name: str, value: Any) -> Any:
    """A task attribute as an AttributeProto of its name: none an attribute with no value, a number, text or flag
    in its field, anything else (dims, tensor ids) JSON text marked ``json`` (``tuple`` for a tuple)."""
    A = s.pb.AttributeProto
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return A(name=name)
    if isinstance(value, bool):
        return A(name=name, bool_val=value)
    if isinstance(value, int) and -(1 << 63) <= value < 1 << 63:
        return A(name=name, int64_val=value)
    if isinstance(value, float):
        return A(name=name, double_val=value)
    if isinstance(value, str):
        return A(name=name, string_val=value)
    try:
        text = json_bytes(value, enc_hook=_json_value).decode()
    except (TypeError, ValueError, NotImplementedError):
        return A(name=name, string_val=str(value), doc_string="text")
    return A(name=name, string_val=text, doc_string="tuple" if isinstance(value, tuple) else "json")


def _json_value(obj: object) -> object:
    if hasattr(obj, "item"):
        return obj.item()  # type: ignore[attr-defined]
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    raise NotImplementedError(type(obj).__name__)


_SCALARS = frozenset(
    {
        "double_val",
        "float_val",
        "int32_val",
        "int64_val",
        "uint32_val",
        "uint64_val",
        "sint32_val",
        "sint64_val",
        "fixed32_val",
        "fixed64_val",
        "sfixed32_val",
        "sfixed64_val",
        "bool_val",
        "string_val",
        "bytes_val",
    }
)


def _value(a: Any, where: str) -> Any:
    """An AttributeProto's value: None where it holds none; a list's values as a list; JSON text (``json``,
    ``tuple``) decoded."""
    field_name = a.WhichOneof("value")
    if field_name is None:
        return None
    value = getattr(a, field_name)
    if field_name not in _SCALARS:
        return list(value.values)
    if field_name == "bytes_val":
        return bytes(value)
    if field_name == "string_val" and a.doc_string in ("json", "tuple"):
        try:
            decoded = msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):
            raise TraceError(f"{where}: attribute {a.name!r} is marked JSON but is not") from None
        if _depth(decoded) > 64:
            raise TraceError(f"{where}: attribute {a.name!r} nests deeper than 64 levels")
        return tuple(decoded) if a.doc_string == "tuple" and isinstance(decoded, list) else decoded
    return value


def _depth(value: Any, level: int = 0) -> int:
    if level > 64:
        return level
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    return level


# --- writing


class ChakraWritten(msgspec.Struct):
    """What :func:`write_chakra` wrote: the files (one per rank, in rank order), the comm-group file, the ranks
    written and the ranks of the graph they repeat, the nodes and dependencies in all (gap and start nodes
    included), and the name ASTRA-sim's ``--workload-configuration`` takes (the folder and the files' prefix)."""

    files: list[str]
    comm_groups: str
    workload: str
    world: int
    traced_ranks: int
    nodes: int
    dependencies: int
    groups: dict[str, list[int]]  # the process groups named in the files (pg_name -> ranks); the world's is not


@dataclass
class _Source:
    """One rank of the graph as written: its tasks in the file's order, each's id, its gap node's id, and its
    metadata."""

    rank: int
    tasks: list[Any]
    ids: dict[Any, int]
    gap_ids: dict[Any, int]
    releases: dict[float, int]
    info: dict[str, Any]
    nodes: list[Any] = field(default_factory=list)  # the Node messages, comm nodes' groups set per copy
    comm: list[tuple[Any, Any]] = field(default_factory=list)  # (node message, task) of its comm tasks
    dependencies: int = 0


def output_names(out_dir: str | os.PathLike[str], name: str, world: int) -> list[str]:
    """The files a write of ``world`` ranks named ``name`` makes in ``out_dir``."""
    return [os.path.join(os.fspath(out_dir), f"{name}.{r}.et") for r in range(world)]


def write_chakra(
    graph: nx.DiGraph,
    out_dir: str | os.PathLike[str],
    name: str,
    world: int | None = None,
    order_deps: str = "data",
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> ChakraWritten:
    """Write ``graph`` (one trace's or a job's) as Chakra execution traces, one file per rank, ``OUT_DIR/NAME.RANK.et``,
    and ``OUT_DIR/comm_group.json``. ``world``: the ranks to write (None: the graph's world size); more than the graph
    holds repeat its ranks (rank r of k stands for r, r + k, ...), fewer write its first. ``order_deps``: ``data``,
    every dependency a data dependency; ``ctrl``, a thread's and a stream's order control dependencies. No file is
    written onto one of ``inputs``; a folder holding other Chakra files (an earlier export of more ranks) is refused,
    as the files left would join the new ones' job."""
    s = _schema()
    if order_deps not in ORDER_DEPS:
        raise DaydreamError(f"order dependencies go to 'data' or 'ctrl' deps, not {order_deps!r}")
    by_rank = _tasks_by_rank(graph)
    traced = sorted(by_rank)
    k = len(traced)
    n = world if world is not None else max(k, int(graph.graph.get("world_size") or 0), 1)
    if not 1 <= n <= MAX_RANKS:
        raise DaydreamError(f"--world {n}: write between 1 and {MAX_RANKS:,} ranks")
    out = Path(out_dir)
    files = output_names(out, name, n)
    groups = _groups(graph, by_rank, traced)
    partial = [g for g, m in groups.items() if m is not None and len(m) < k]
    if n % k and n > k and partial:
        raise DaydreamError(
            f"{n} ranks are not a whole number of copies of the {k} traced, whose process group "
            f"{partial[0]!r} ({len(groups[partial[0]] or [])} ranks) each copy repeats: give a multiple of {k}"
        )
    cut = [g for g in partial if n < k and any(m >= n for m in groups[g] or [])]
    if cut:
        raise DaydreamError(
            f"{n} ranks leave out members of process group {cut[0]!r} (ranks {groups[cut[0]]}): write "
            f"at least {max(groups[cut[0]] or [0]) + 1}"
        )
    sources = {r: _source(s, graph, r, by_rank[r], order_deps) for r in traced[: min(k, n)]}
    _check_outputs(out, files, inputs)  # the folder made once the graph is known to fit a Chakra trace
    named: dict[str, list[int]] = {}
    nodes = deps = 0
    for r, path in enumerate(files):
        src = sources[traced[r % k]]
        copy = r // k
        for node, task in src.comm:
            _set_group(s, node, task, groups, copy, k, n)
        for g, members in groups.items():
            if g != WORLD and members is not None and len(members) < k:
                named[_group_name(g, copy)] = [m + k * copy for m in members]
            elif g != WORLD:
                named[g] = list(range(n))
        meta = s.pb.GlobalMetadata(version=CHAKRA_VERSION)
        meta.attr.extend(
            [
                s.pb.AttributeProto(name="producer", string_val=f"{PRODUCER} {__version__}"),
                s.pb.AttributeProto(name="rank", int64_val=r),
                s.pb.AttributeProto(name="world_size", int64_val=n),
                s.pb.AttributeProto(name="traced_rank", int64_val=src.rank),
                s.pb.AttributeProto(name="daydream", string_val=json_bytes(src.info).decode(), doc_string="json"),
            ]
        )
        chunks = _Chunks()
        s.encode(chunks, meta)
        for node in src.nodes:
            s.encode(chunks, node)
        write_atomically(path, chunks.bytes(), "--chakra")
        nodes += len(src.nodes)
        deps += src.dependencies
    groups_path = out / COMM_GROUP_FILE
    write_atomically(groups_path, json_bytes(dict(sorted(named.items())), indent=2) + b"\n", "--chakra")
    return ChakraWritten(
        files=files,
        comm_groups=str(groups_path),
        workload=str(out / name),
        world=n,
        traced_ranks=k,
        nodes=nodes,
        dependencies=deps,
        groups=dict(sorted(named.items())),
    )


class _Chunks:
    """A file's bytes as protolib writes them (its ``write`` calls), joined once."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.write = self.parts.append

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def check_out_dir(out_dir: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuse, before any work, a folder to write Chakra traces in that is a file, whose parent does not exist, or
    that holds an input of the run (the Chakra trace read, a script)."""
    out = Path(out_dir)
    if not os.fspath(out_dir).strip():
        raise DaydreamError("--chakra: empty folder name; name the folder to write the Chakra traces in")
    if out.exists() and not out.is_dir():
        raise DaydreamError(f"{out}: is a file, expected a folder to write the Chakra traces in (--chakra)")
    parent = out.parent if str(out.parent) else Path(".")
    if not out.exists() and not parent.is_dir():
        raise DaydreamError(f"{out}: folder {parent} does not exist (--chakra)")
    if out.is_dir():
        for inp in inputs:
            if (
                inp is not None
                and str(inp)
                and not str(inp).startswith("<")
                and os.path.exists(inp)
                and os.path.samefile(os.path.dirname(os.path.abspath(inp)), out)
            ):
                raise DaydreamError(
                    f"{out}: holds {inp}, an input of this run; write the Chakra traces to another folder (--chakra)"
                )


def _check_outputs(out: Path, files: list[str], inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuse before any write: a folder that cannot be made or is a file, a file onto an input, other Chakra files
    in the folder."""
    inputs = list(inputs)
    check_out_dir(out, inputs)
    if not out.exists():
        try:
            out.mkdir()
        except OSError as exc:
            raise DaydreamError(f"{out}: cannot make the folder: {exc.strerror or exc} (--chakra)") from None
    for f in [*files, str(out / COMM_GROUP_FILE)]:
        check_output_path(f, inputs, "--chakra")
    ours = {os.path.basename(f) for f in files}
    others = sorted(e.name for e in out.iterdir() if _stripped(e.name) is not None and e.name not in ours)
    if others:
        raise DaydreamError(
            f"{out}: holds other Chakra traces ({listed(others, 5)}), which would join the ranks written; "
            "write to an empty folder (--chakra)"
        )


def _tasks_by_rank(graph: nx.DiGraph) -> dict[int, list[Any]]:
    """Each rank's tasks in the graph's order; a job's ranks that share a twin's tasks (``same_as``) get its list."""
    attrs = attrs_of(graph)
    if not graph.graph.get("ranks"):
        return {int(graph.graph.get("rank") or 0): list(attrs)}
    by_rank: dict[int, list[Any]] = defaultdict(list)
    for n, a in attrs.items():
        by_rank[int(a.get("rank") or 0)].append(n)
    for info in graph.graph["ranks"]:
        if info.same_as is not None:
            by_rank[info.rank] = by_rank[info.same_as]
    return dict(by_rank)


def _groups(graph: nx.DiGraph, by_rank: dict[int, list[Any]], traced: list[int]) -> dict[str, list[int] | None]:
    """Each process group of the graph's comm tasks: its members (by the trace's list, else the ranks that issue on
    it; None for the world)."""
    attrs = attrs_of(graph)
    issuing: dict[str, set[int]] = defaultdict(set)
    listed_: dict[str, list[int]] = {}
    for r in traced:
        for n in by_rank[r]:
            a = attrs[n]
            if a["kind"] == "comm":
                g = a.get("group") or WORLD
                issuing[g].add(r)
                if a.get("group_ranks"):
                    listed_[g] = sorted(int(x) for x in a["group_ranks"])
    out: dict[str, list[int] | None] = {}
    for g, ranks in issuing.items():
        out[g] = None if g == WORLD else listed_.get(g, sorted(ranks))
    return out


def _group_name(group: str, copy: int) -> str:
    """A process group's name in the ranks' copy ``copy`` (a group smaller than the traced world is repeated)."""
    return group if copy == 0 else f"{group}~{copy}"


def _set_group(
    s: SimpleNamespace, node: Any, task: Any, groups: dict[str, list[int] | None], copy: int, k: int, n: int
) -> None:
    """A comm node's process group in copy ``copy`` of the ranks: the world (or a group of every traced rank) grows
    to ``n`` ranks; a smaller group is repeated, its members shifted by ``k`` per copy."""
    g = task.get("group") or WORLD
    members = groups.get(g)
    keep = [
        a for a in node.attr if a.name not in ("pg_name", "group", "group_size", "group_ranks", "comm_src", "comm_dst")
    ]
    del node.attr[:]
    node.attr.extend(keep)
    A = s.pb.AttributeProto
    if g == WORLD or members is None or len(members) >= k:
        size = n
        if g != WORLD:
            node.attr.append(A(name="pg_name", string_val=g))
        node.attr.extend([_attr(s, "group", g), _attr(s, "group_size", size)])
        if g != WORLD:
            node.attr.append(_attr(s, "group_ranks", list(range(n))))
        return
    name = _group_name(g, copy)
    shifted = [m + k * copy for m in members]
    node.attr.extend(
        [
            A(name="pg_name", string_val=name),
            _attr(s, "group", name),
            _attr(s, "group_size", len(shifted)),
            _attr(s, "group_ranks", shifted),
        ]
    )
    if node.type in (s.pb.COMM_SEND_NODE, s.pb.COMM_RECV_NODE) and len(shifted) == 2:
        me = task.get("rank", 0) + k * copy
        peer = shifted[1] if shifted[0] == me else shifted[0]
        src, dst = (me, peer) if node.type == s.pb.COMM_SEND_NODE else (peer, me)
        node.attr.extend([A(name="comm_src", int32_val=src), A(name="comm_dst", int32_val=dst)])


def _topological(tasks: list[Any], parents: dict[Any, list[Any]], where: str) -> list[Any]:
    """``tasks`` in an order where every task follows its parents, as close to the given order as that allows."""
    index = {n: i for i, n in enumerate(tasks)}
    children: dict[Any, list[Any]] = defaultdict(list)
    indegree = dict.fromkeys(tasks, 0)
    for n in tasks:
        for p in parents[n]:
            children[p].append(n)
            indegree[n] += 1
    heap = [index[n] for n in tasks if indegree[n] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        n = tasks[heapq.heappop(heap)]
        out.append(n)
        for c in children[n]:
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(heap, index[c])
    if len(out) != len(tasks):
        raise DaydreamError(f"{where}: the task graph has a dependency cycle; a Chakra trace must be acyclic")
    return out


def _graph_info(graph: nx.DiGraph, rank: int) -> dict[str, Any]:
    """What a rank's file carries of the graph as a whole (the metadata's ``daydream``): its step, times and pricing."""
    g = graph.graph
    info: dict[str, Any] = {}
    for key in (
        "trace",
        "device",
        "device_properties",
        "origin_us",
        "steps",
        "measured_us",
        "steady_periods_us",
        "delays",
        "causality",
        "execution_trace",
        "world_size",
    ):
        if g.get(key) is not None:
            info[key] = msgspec.to_builtins(g[key], enc_hook=_json_value)
    warnings = list(g.get("warnings") or [])
    ranks = g.get("ranks")
    if ranks:
        mine = next(r for r in ranks if r.rank == rank)
        info["measured_us"] = mine.measured_us
        info["offset_us"] = mine.offset_us
        info["rank_trace"] = mine.trace
        prefix = f"rank {rank}: "
        warnings = [w[len(prefix) :] for w in warnings if w.startswith(prefix)]
        collectives = g.get("collectives")
        if collectives is not None and collectives.pricing is not None:
            info["pricing"] = msgspec.to_builtins(collectives.pricing)
    info["warnings"] = warnings
    info["task_rank"] = rank
    return info


def _source(s: SimpleNamespace, graph: nx.DiGraph, rank: int, tasks: list[Any], order_deps: str) -> _Source:
    """One traced rank's nodes, made once for all its copies."""
    attrs, pred = attrs_of(graph), predecessors_of(graph)
    where = str(graph.graph.get("trace") or "graph")
    mine = set(tasks)
    for n in tasks:
        for p in pred[n]:
            if p not in mine:
                raise DaydreamError(
                    f"{where}: rank {rank}'s task {attrs[n]['name']!r} depends on rank "
                    f"{attrs[p].get('rank')}'s {attrs[p]['name']!r}: a Chakra trace holds no "
                    "dependency across ranks (ranks meet in collectives)"
                )
    order = _topological(tasks, {n: list(pred[n]) for n in tasks}, where)
    has_order_child = {p for n in tasks for p, e in pred[n].items() if e.get("kind") in ORDER_KINDS}
    releases = sorted({float(a["release"]) for n in tasks if (a := attrs[n]).get("release") is not None})
    src = _Source(rank, order, {}, {}, {}, _graph_info(graph, rank))
    next_id = 0
    for value in releases:
        src.releases[value] = next_id
        next_id += 1
    for n in order:
        src.ids[n] = next_id
        next_id += 1
        a = attrs[n]
        gap = a.get("gap") or 0.0
        if a["kind"] in CPU_KINDS and n in has_order_child and isinstance(gap, (int, float)) and gap > 0:
            src.gap_ids[n] = next_id
            next_id += 1
    pb, A = s.pb, s.pb.AttributeProto
    for value, i in src.releases.items():
        node = pb.Node(
            id=i,
            name=f"[release] the step starts {value:,.3f} us in",
            type=pb.COMP_NODE,
            duration_micros=_micros(value),
        )
        node.attr.extend([A(name="is_cpu_op", bool_val=True), A(name="release_of", double_val=value)])
        src.nodes.append(node)
    for n in order:
        a = attrs[n]
        node = _task_node(s, n, a, src, pred[n], order_deps)
        src.nodes.append(node)
        if a["kind"] == "comm":
            src.comm.append((node, a))
        if n in src.gap_ids:
            gap_node = pb.Node(
                id=src.gap_ids[n], name=f"{a['name']} [gap]", type=pb.COMP_NODE, duration_micros=_micros(a["gap"])
            )
            gap_node.data_deps.append(src.ids[n])
            gap_node.attr.extend(
                [
                    A(name="is_cpu_op", bool_val=True),
                    *_tid(s, a),
                    A(name="gap_of", uint64_val=src.ids[n]),
                    A(name="data_dep_kinds", string_list=pb.StringList(values=[GAP])),
                ]
            )
            src.nodes.append(gap_node)
            src.dependencies += 1
    return src


def _tid(s: SimpleNamespace, a: dict[str, Any]) -> list[Any]:
    """A host task's thread id as Chakra's ``tid`` (the PyTorch converter's), where its thread names a number."""
    m = re.fullmatch(r"cpu:[^/]*/(-?\d+)", str(a.get("thread", "")))
    return (
        [s.pb.AttributeProto(name="tid", int64_val=int(m.group(1)))]
        if m and -(1 << 63) <= int(m.group(1)) < 1 << 63
        else []
    )


def _micros(us: Any) -> int:
    """A time in whole microseconds, as Chakra's uint64 fields hold it (negative: 0)."""
    try:
        v = float(us)
    except (TypeError, ValueError):
        return 0
    return int(round(v)) if 0 < v < MAX_TIME_US else 0


def _task_node(
    s: SimpleNamespace, n: Any, a: dict[str, Any], src: _Source, parents: dict[Any, Any], order_deps: str
) -> Any:
    pb, A = s.pb, s.pb.AttributeProto
    kind = a["kind"]
    node = pb.Node(id=src.ids[n], name=str(a.get("name", "")), duration_micros=_micros(a.get("duration")))
    if isinstance(a.get("start"), (int, float)):
        node.start_time_micros = _micros(a["start"])
    collective = a.get("collective")
    if kind == "comm" and collective in ("send", "recv"):
        node.type = pb.COMM_SEND_NODE if collective == "send" else pb.COMM_RECV_NODE
    elif kind == "comm" and collective is not None:
        node.type = pb.COMM_COLL_NODE
    else:
        node.type = pb.COMP_NODE
    node.attr.append(A(name="is_cpu_op", bool_val=kind in CPU_KINDS))
    if kind in CPU_KINDS:
        node.attr.extend(_tid(s, a))
    if node.type == pb.COMM_COLL_NODE:
        # a SendRecv exchange (an all-to-all run as point-to-point kernels, or a pair's) is an all-to-all of its group
        node.attr.append(A(name="comm_type", int64_val=COMM_TYPES.get(str(collective), COMM_TYPES["alltoall"])))
    if kind == "comm":
        node.attr.append(A(name="comm_size", int64_val=_size(a.get("bytes"))))
    elif kind in ("memcpy", "memset") and a.get("bytes") is not None:
        node.attr.append(A(name="tensor_size", uint64_val=_size(a.get("bytes"))))
    node.attr.append(
        A(name="task_id", int64_val=n) if isinstance(n, int) and -(1 << 63) <= n < 1 << 63 else A(name="task_id")
    )
    for key, value in a.items():
        if key not in _NOT_WRITTEN and key not in CHAKRA_ATTRIBUTES:
            node.attr.append(_attr(s, key, value))
    lists: dict[str, tuple[list[int], list[str], list[float]]] = {"data": ([], [], []), "ctrl": ([], [], [])}
    if a.get("release") is not None:
        lists["data"][0].append(src.releases[float(a["release"])])
        lists["data"][1].append(RELEASE)
        lists["data"][2].append(math.nan)
    for p, e in parents.items():
        kind_e = e.get("kind")
        order = kind_e in ORDER_KINDS
        ids, kinds, lags = lists["ctrl" if order and order_deps == "ctrl" else "data"]
        ids.append(src.gap_ids[p] if order and p in src.gap_ids else src.ids[p])
        kinds.append(str(kind_e))
        lag = e.get("lag")
        lags.append(float(lag) if isinstance(lag, (int, float)) else math.nan)
    for which, (ids, kinds, lags) in lists.items():
        if ids:
            getattr(node, f"{which}_deps").extend(ids)
            node.attr.extend(
                [
                    A(name=f"{which}_dep_kinds", string_list=pb.StringList(values=kinds)),
                    A(name=f"{which}_dep_lags_us", double_list=pb.DoubleList(values=lags)),
                ]
            )
            src.dependencies += len(ids)
    return node


def _size(value: Any) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return v if 0 <= v < 1 << 63 else 0


# --- reading


class _Reader:
    """A Chakra file as protolib reads it, bounded: a message longer than MAX_MESSAGE_BYTES, a file past
    MAX_TRACE_BYTES (or a gzip file past MAX_GZIP_RATIO times its size), and a message the file ends inside of are
    refused, naming the file and the byte."""

    def __init__(self, fh: BinaryIO, path: str, limit: int) -> None:
        self.fh, self.path, self.limit = fh, path, limit
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        if n > MAX_MESSAGE_BYTES:
            raise TraceError(
                f"{self.path}: a message of {n:,} bytes at byte {self.pos:,}: more than {MAX_MESSAGE_BYTES:,} "
                "(not a Chakra execution trace?)",
                path=self.path,
                offset=self.pos,
            )
        start = self.pos
        try:
            data = self.fh.read(n)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise TraceError(
                f"{self.path}: cannot read at byte {start:,}: {exc}", path=self.path, offset=start
            ) from None
        self.pos += len(data)
        if self.pos > self.limit:
            raise TraceError(
                f"{self.path}: more than {self.limit:,} bytes (the limit for a Chakra trace)", path=self.path
            )
        if n > 1 and len(data) < n:
            raise TraceError(
                f"{self.path}: truncated: the message at byte {start:,} holds {len(data):,} of its {n:,} bytes",
                path=self.path,
                offset=start,
            )
        return data


def _open(path: str) -> tuple[BinaryIO, BinaryIO, int]:
    """The file opened (checked: a regular file), as read (inflated where gzip), and the bytes it may hold."""
    raw = open_input(path, "Chakra trace", TraceError)
    try:
        size = os.fstat(raw.fileno()).st_size
        head = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raw.close()
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}", path=path) from None
    if head == b"\x1f\x8b":
        return (
            raw,
            gzip.GzipFile(fileobj=raw, mode="rb"),
            min(MAX_TRACE_BYTES, max(GZIP_RATIO_FLOOR, MAX_GZIP_RATIO * size)),
        )
    return raw, raw, MAX_TRACE_BYTES


@dataclass
class _File:
    """One rank's Chakra file as read: its metadata attributes and its nodes."""

    path: str
    meta: dict[str, Any]
    nodes: list[Any]

    @property
    def ours(self) -> bool:
        return str(self.meta.get("producer", "")).startswith(PRODUCER + " ") and isinstance(
            self.meta.get("daydream"), dict
        )

    @property
    def producer(self) -> str:
        p = self.meta.get("producer") or self.meta.get("schema")
        return str(p) if p else "an unnamed producer"


def _read_file(s: SimpleNamespace, path: str) -> _File:
    raw, fh, limit = _open(path)
    reader = _Reader(fh, path, limit)
    try:
        meta_msg = s.pb.GlobalMetadata()
        try:
            if not s.decode(reader, meta_msg):
                raise TraceError(f"{path}: empty: a Chakra trace starts with its metadata", path=path)
        except s.DecodeError as exc:
            raise TraceError(
                f"{path}: not a Chakra execution trace: its first message is no metadata ({exc})", path=path
            ) from None
        with about_file(path):
            meta = {a.name: _value(a, f"{path}: metadata") for a in meta_msg.attr}
        nodes = []
        while True:
            node = s.pb.Node()
            start = reader.pos
            try:
                got = s.decode(reader, node)
            except s.DecodeError as exc:
                raise TraceError(
                    f"{path}: the message at byte {start:,} is not a Chakra node ({exc})", path=path, offset=start
                ) from None
            if not got:
                if reader.pos == start:
                    break
                if reader.pos - start == 1:  # a length of 0: protolib stops there, as at the end
                    raise TraceError(
                        f"{path}: an empty message at byte {start:,}, where a node should be (not a Chakra execution"
                        " trace?)",
                        path=path,
                        offset=start,
                    )
                raise TraceError(
                    f"{path}: unreadable message length at byte {start:,} (not a Chakra execution trace?)",
                    path=path,
                    offset=start,
                )
            nodes.append(node)
            if len(nodes) > MAX_NODES:
                raise TraceError(f"{path}: more than {MAX_NODES:,} nodes", path=path)
    finally:
        if fh is not raw:
            fh.close()
        raw.close()
    return _File(path, meta, nodes)


def _node_attrs(node: Any, where: str) -> dict[str, Any]:
    return {a.name: _value(a, where) for a in node.attr}


def _number(value: Any, where: str, what: str, lo: float = -MAX_TIME_US) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= MAX_TIME_US:
        raise TraceError(f"{where}: {what} {value!r} is not a time between {lo:g} and {MAX_TIME_US:g} us")
    return float(value)


def read_chakra(path: str | os.PathLike[str], share: bool = True, fields_only: bool = False) -> nx.DiGraph:
    """The task graph of the Chakra trace at ``path`` (a file, or a folder of one file per rank): one rank's graph,
    or a job's with its collectives matched (priced where daydream wrote the files; else ``collectives.pricing`` is
    None, to be priced). ``share``: ranks with the same tasks share one set (False: every rank its own).
    ``fields_only``: read daydream's own files as another producer's, by Chakra's fields and the attributes its
    consumers read alone: what ASTRA-sim sees of them."""
    s = _schema()
    where = os.fspath(path)
    files = [_read_file(s, f) for f in chakra_files(where)]
    found = []
    for f in files:
        named = f.meta.get("rank") if f.ours else None
        world = f.meta.get("world_size") if f.ours else None
        found.append((f.path, named if isinstance(named, int) else None, world if isinstance(world, int) else None))
    if Path(where).is_dir():
        ranks = check_ranks(where, found)
    else:  # one file: its rank alone, whatever world it belongs to
        ranks = {found[0][1] if found[0][1] is not None else rank_of_name(where) or 0: where}
    by_path = {f.path: f for f in files}
    groups = _comm_groups(where)
    notes: set[str] = set()
    built: list[tuple[int, nx.DiGraph, dict[str, Any]]] = []
    for r, p in ranks.items():
        f = by_path[p]
        with about_file(p):  # an attribute's or a node's error names the place in the file as text
            graph, info = _own_graph(f, r) if f.ours and not fields_only else _foreign_graph(s, f, r, groups, notes)
        built.append((r, graph, info))
    said = []
    if notes:
        producers = sorted({f.producer for f in files if not f.ours or fields_only})
        said.append(f"{where}: a Chakra trace of {', '.join(producers)}: " + "; ".join(sorted(notes)))
    if len(built) == 1:
        graph = built[0][1]
        graph.graph["trace"] = where
        graph.graph["warnings"] = [*said, *graph.graph.get("warnings", [])]
        return graph
    return _join(where, built, all(f.ours for f in files) and not fields_only, said, share)


def _comm_groups(where: str) -> dict[str, list[int]]:
    """The folder's comm-group file (pg_name -> ranks), where it has one."""
    p = Path(where) / COMM_GROUP_FILE
    if not Path(where).is_dir() or not p.is_file():
        return {}
    from daydream.files import read_input

    data = read_input(p, "comm-group file", 64 << 20, TraceError)
    try:
        groups = msgspec.json.decode(data, type=dict[str, list[int]])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise TraceError(
            f"{p}: not a comm-group file (a JSON object of process group -> list of ranks): {exc}", path=p
        ) from None
    for g, members in groups.items():
        if any(not 0 <= m < MAX_RANKS for m in members):
            raise TraceError(f"{p}: process group {g!r} names a rank outside 0-{MAX_RANKS - 1}", path=p)
    return groups


def _join(
    where: str, built: list[tuple[int, nx.DiGraph, dict[str, Any]]], ours: bool, said: list[str], share: bool
) -> nx.DiGraph:
    """The ranks' graphs in one job graph, its collectives matched (by group and order of issue)."""
    infos, graphs = [], []
    rep: dict[str, int] = {}
    for r, g, info in built:
        fp = rank_fingerprint(g) if share else ""
        ri = RankInfo(
            rank=r,
            trace=str(info.get("path")),
            measured_us=float(info.get("measured_us", math.nan)),
            origin_us=0.0,
            fingerprint=fp,
        )
        if share and fp in rep:
            ri.same_as = rep[fp]
        else:
            rep.setdefault(fp, r)
            graphs.append(g)
        infos.append(ri)
    job = join_ranks(graphs, infos, where)
    offsets = {r: float(info.get("offset_us", 0.0) or 0.0) for r, _, info in built}
    for ri in job.graph["ranks"]:
        ri.offset_us = offsets[ri.rank]
    first = built[0][2]
    if ours:
        job.graph["origin_us"] = float(first.get("origin_us", 0.0) or 0.0)
        pricing = [info.get("pricing") for _, _, info in built]
        collectives = job.graph["collectives"]
        if all(p is not None for p in pricing):
            collectives.pricing = msgspec.convert(pricing[0], CollectivePricing)
        else:  # a trace of one rank written as its job: its collectives last as traced, as they did in its graph
            n = sum(g.collectives for g in collectives.groups.values())
            collectives.pricing = CollectivePricing("as traced", n, 0, n, {})
    job.graph["warnings"] = [*said, *job.graph.get("warnings", [])]
    return job


def _graph_attrs(info: dict[str, Any], where: str) -> dict[str, Any]:
    """The graph attributes a file's ``daydream`` metadata gives back."""
    out: dict[str, Any] = {}
    try:
        for key, typ in (
            ("steps", list[StepInfo]),
            ("delays", Delays),
            ("causality", Causality),
            ("execution_trace", ExecutionTraceUse),
        ):
            if info.get(key) is not None:
                out[key] = msgspec.convert(info[key], typ)
        for key in ("device", "device_properties", "origin_us", "measured_us", "steady_periods_us", "world_size"):
            if info.get(key) is not None:
                out[key] = info[key]
        out["warnings"] = [str(w) for w in info.get("warnings", [])]
        if "pricing" in info and info["pricing"] is not None:
            msgspec.convert(info["pricing"], CollectivePricing)
    except (msgspec.ValidationError, TypeError) as exc:
        raise TraceError(f"{where}: the metadata's daydream attribute does not hold a graph's: {exc}") from None
    for key in ("origin_us", "measured_us"):
        if key in out:
            out[key] = _number(out[key], where, key)
    return out


def _own_graph(f: _File, rank: int) -> tuple[nx.DiGraph, dict[str, Any]]:
    """A rank's graph from a file daydream wrote: every task as it was, its dependencies with their kinds and lags."""
    info = dict(f.meta["daydream"])
    graph_attrs = _graph_attrs(info, f"{f.path}: metadata")
    info["path"] = f.path
    gap_of: dict[int, int] = {}
    skip: set[int] = set()
    tasks: dict[int, tuple[Any, dict[str, Any]]] = {}
    seen: set[int] = set()
    for node in f.nodes:
        if node.id in seen:
            raise TraceError(f"{f.path}: node {node.id} appears twice", path=f.path)
        seen.add(node.id)
        where = f"{f.path}: node {node.id}"
        a = _node_attrs(node, where)
        if "gap_of" in a:
            gap_of[node.id] = int(a["gap_of"])
            continue
        if "release_of" in a:
            skip.add(node.id)
            continue
        tasks[node.id] = (node, a)
    order = sorted(tasks, key=lambda i: (_task_order(tasks[i][1].get("task_id")), i))
    names = {i: k for k, i in enumerate(order)}
    attrs_list, parents_list = [], []
    for i in order:
        node, a = tasks[i]
        where = f"{f.path}: node {i}"
        task = _own_task(node, a, rank, where)
        parents: dict[int, dict[str, Any]] = {}
        for which in ("data", "ctrl"):
            ids = list(getattr(node, f"{which}_deps"))
            kinds = a.get(f"{which}_dep_kinds") or []
            lags = a.get(f"{which}_dep_lags_us") or []
            if len(kinds) != len(ids) or len(lags) != len(ids):
                raise TraceError(
                    f"{where}: {which}_dep_kinds and {which}_dep_lags_us do not match its {which}_deps", path=f.path
                )
            for p, kind, lag in zip(ids, kinds, lags):
                if kind == RELEASE or p in skip:
                    continue
                p = gap_of.get(p, p)
                if p not in names:
                    raise TraceError(f"{where}: depends on node {p}, which the file does not hold", path=f.path)
                if kind not in EDGE_KINDS:
                    raise TraceError(
                        f"{where}: a dependency of kind {kind!r} (daydream's are {', '.join(EDGE_KINDS)})", path=f.path
                    )
                if isinstance(lag, float) and math.isnan(lag):
                    edge = new_edge_attrs(kind)
                else:
                    edge = new_edge_attrs(kind, _number(lag, where, "a dependency's lag"))
                parents[names[p]] = edge  # type: ignore[assignment]
        attrs_list.append(task)
        parents_list.append(parents)
    graph = nx.DiGraph()
    fill(graph, range(len(order)), attrs_list, parents_list)  # type: ignore[arg-type]
    graph.graph.update(trace=f.path, rank=rank, next_task_id=len(order), **graph_attrs)
    return graph, info


def _task_order(task_id: Any) -> tuple[int, Any]:
    return (0, task_id) if isinstance(task_id, int) else (1, 0)


def _own_task(node: Any, a: dict[str, Any], rank: int, where: str) -> dict[str, Any]:
    """A task's attribute dict as daydream wrote it: the node's attributes of the task, in their order."""
    kind = a.get("kind")
    if kind not in TASK_KINDS:
        raise TraceError(f"{where}: kind {kind!r} is not a task kind ({', '.join(TASK_KINDS)})")
    task = new_task_attrs(kind)
    task["name"] = node.name
    for key, value in a.items():
        if key in CHAKRA_ATTRIBUTES or key == "kind":
            continue
        task[key] = value
    task["rank"] = rank
    if not isinstance(task.get("thread"), str):
        raise TraceError(f"{where}: its thread is {task.get('thread')!r}, not text")
    task["duration"] = _number(task.get("duration"), where, "duration", 0.0)
    task["gap"] = _number(task.get("gap", 0.0), where, "gap")
    if task.get("release") is not None:
        task["release"] = _number(task["release"], where, "release")
    if task.get("start") is not None:
        task["start"] = _number(task["start"], where, "start")
    if kind == "comm":
        task["group"] = str(task.get("group") or WORLD)
        if task.get("group_ranks") is not None and not (
            isinstance(task["group_ranks"], list)
            and all(type(x) is int and 0 <= x < MAX_RANKS for x in task["group_ranks"])
        ):
            raise TraceError(f"{where}: group_ranks {task['group_ranks']!r} is not a list of ranks")
    return task


# another producer's nodes


_THREADLESS = "its host nodes carry no thread (tid) and share one thread"
_STREAMLESS = "its GPU nodes carry no stream and share one stream, each process group's collectives one of their own"
_LAUNCHLESS = "it holds no kernel launches: a kernel starts as its dependencies end, without a launch's latency"
_GAPLESS = "durations are whole microseconds and no thread has time between its nodes"


def _foreign_graph(
    s: SimpleNamespace, f: _File, rank: int, groups: dict[str, list[int]], notes: set[str]
) -> tuple[nx.DiGraph, dict[str, Any]]:
    """A rank's graph from another producer's file: nodes as tasks, their data and control dependencies as edges, each
    thread's and stream's tasks in one order (the file's, where the dependencies allow)."""
    notes.add(_GAPLESS)
    seen: dict[int, int] = {}
    tasks: list[dict[str, Any]] = []
    raw_deps: list[list[int]] = []
    launches = False
    for node in f.nodes:
        where = f"{f.path}: node {node.id}"
        if node.id in seen:
            raise TraceError(f"{where}: appears twice", path=f.path)
        seen[node.id] = len(tasks)
        a = _node_attrs(node, where)
        tasks.append(_foreign_task(s, node, a, rank, f.path, groups, notes))
        raw_deps.append([*node.data_deps, *node.ctrl_deps])
    missing = 0
    parents: list[list[int]] = []
    for deps in raw_deps:
        ps = []
        for d in dict.fromkeys(deps):
            if d in seen:
                ps.append(seen[d])
            else:
                missing += 1
        parents.append(ps)
    if missing:
        notes.add(
            f"{missing:,} dependenc{'ies' if missing > 1 else 'y'} on nodes the file does not hold dropped ({f.path})"
        )
    order = _foreign_order(f, parents)
    position = {i: k for k, i in enumerate(order)}
    prev_on_thread: dict[str, int] = {}
    chain: dict[int, int] = {}  # task -> the task before it on its thread
    for i in order:
        t = tasks[i]["thread"]
        if t in prev_on_thread:
            chain[i] = prev_on_thread[t]
        prev_on_thread[t] = i
    attrs_list, parents_list = [], []
    for i in order:
        a = tasks[i]
        ps: dict[int, dict[str, Any]] = {}
        before = chain.get(i)
        if before is not None:
            ps[position[before]] = new_edge_attrs("thread" if a["kind"] in CPU_KINDS else "stream")  # type: ignore[assignment]
        for p in parents[i]:
            if p == before:
                continue
            kind = _foreign_edge_kind(tasks[p], a)
            launches = launches or kind == "launch"
            ps[position[p]] = new_edge_attrs(kind, 0.0)  # type: ignore[assignment]
        attrs_list.append(a)
        parents_list.append(ps)
    if not launches and any(a["kind"] in GPU_KINDS for a in tasks):
        notes.add(_LAUNCHLESS)
    graph = nx.DiGraph()
    fill(graph, range(len(order)), attrs_list, parents_list)  # type: ignore[arg-type]
    # the whole file is one step; measured where its nodes carry their traced starts (the PyTorch converter's do)
    starts = [a["start"] for a in tasks]
    span = max((a["start"] + a["duration"] for a in tasks), default=0.0) - min(starts, default=0.0)
    measured = span if any(x > 0 for x in starts) else math.nan
    graph.graph.update(
        trace=f.path,
        rank=rank,
        world_size=1,
        device=None,
        origin_us=0.0,
        warnings=[],
        steps=[StepInfo(WHOLE, measured, span if measured == measured else 0.0)],
        measured_us=measured,
        next_task_id=len(order),
    )
    return graph, {"path": f.path, "measured_us": measured}


def _foreign_order(f: _File, parents: list[list[int]]) -> list[int]:
    """The tasks in the file's order as far as their dependencies allow; a cycle named by its nodes."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for c, ps in enumerate(parents):
        for p in ps:
            children[p].append(c)
            indegree[c] += 1
    heap = [i for i in range(n) if indegree[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for c in children[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(heap, c)
    if len(out) != n:
        stuck = {i for i in range(n) if indegree[i] > 0}
        cycle = _a_cycle(stuck, parents)
        shown = " -> ".join(f"node {f.nodes[i].id} ({f.nodes[i].name[:60]!r})" for i in cycle[:5])
        more = f" -> ... ({len(cycle)} nodes)" if len(cycle) > 5 else f" -> node {f.nodes[cycle[0]].id}"
        raise TraceError(
            f"{f.path}: the dependencies form a cycle: {shown}{more}; {len(stuck):,} nodes never become ready",
            path=f.path,
        )
    return out


def _a_cycle(stuck: set[int], parents: list[list[int]]) -> list[int]:
    """One cycle among the nodes ``stuck`` (each waits, at some remove, on a cycle), parent to child."""
    node = min(stuck)
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(p for p in parents[node] if p in stuck)
    return list(reversed(path[seen[node] :]))


def _foreign_edge_kind(parent: dict[str, Any], child: dict[str, Any]) -> str:
    """A dependency's kind by what it joins: a host task to a GPU task is its launch; a GPU task to a host task a
    sync; anything with a collective on another stream a communication dependency; the rest a sync."""
    p_cpu, c_cpu = parent["kind"] in CPU_KINDS, child["kind"] in CPU_KINDS
    if p_cpu and not c_cpu:
        return "launch"
    if not p_cpu and not c_cpu and "comm" in (parent["kind"], child["kind"]):
        return "comm"
    return "sync"


def _foreign_task(
    s: SimpleNamespace,
    node: Any,
    a: dict[str, Any],
    rank: int,
    path: str,
    groups: dict[str, list[int]],
    notes: set[str],
) -> dict[str, Any]:
    """A task from another producer's node: its kind by the node's type and ``is_cpu_op``, its thread by ``tid`` or
    ``stream`` (one per kind where the node has none), its collective by ``comm_type``, ``comm_size`` and ``pg_name``.
    """
    pb = s.pb
    where = f"{path}: node {node.id}"
    t = node.type
    if t not in (
        pb.INVALID_NODE,
        pb.METADATA_NODE,
        pb.MEM_LOAD_NODE,
        pb.MEM_STORE_NODE,
        pb.COMP_NODE,
        pb.COMM_SEND_NODE,
        pb.COMM_RECV_NODE,
        pb.COMM_COLL_NODE,
    ):
        raise TraceError(f"{where}: type {t}, which Chakra's schema does not define", path=path)
    cpu = a.get("is_cpu_op")
    cpu = (
        bool(cpu) if isinstance(cpu, (bool, int)) else True
    )  # ASTRA-sim's ETFeeder takes a node without it for a host op
    comm = t in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMM_COLL_NODE)
    memory = t in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE)
    kind = "comm" if comm else "memcpy" if memory else "cpu" if cpu else "gpu"
    task = new_task_attrs(kind)
    task["name"] = node.name or pb.NodeType.Name(t)
    duration = float(node.duration_micros)
    if duration > MAX_TIME_US:
        raise TraceError(f"{where}: duration_micros {node.duration_micros:,} is beyond {MAX_TIME_US:g} us", path=path)
    if kind in CPU_KINDS:
        tid = a.get("tid")
        if not isinstance(tid, int):
            notes.add(_THREADLESS)
            tid = 0
        task["thread"] = f"cpu:{rank}/{tid}"
    else:
        stream = a.get("stream")
        if not isinstance(stream, int) or isinstance(stream, bool):
            notes.add(_STREAMLESS)
            stream = None
        if comm and stream is None:
            pg = a.get("pg_name")
            stream = f"comm:{pg}" if isinstance(pg, str) and pg else "comm"
        elif memory and stream is None:
            stream = "memory"
        elif stream is None:
            stream = "compute"
        task["thread"] = f"gpu:0/{stream}"
    task.update(
        rank=rank,
        duration=duration,
        gap=0.0,
        release=None,
        op=None,
        shapes=None,
        top_op_id=None,
        layer=None,
        phase="other",
        region=None,
        step=WHOLE,
        start=float(node.start_time_micros),
    )
    if kind in CPU_KINDS:
        return task
    task.update(
        {
            "class": "comm" if comm else classify_kernel(task["name"], kind),
            "device": 0,
            "stream": a.get("stream") if isinstance(a.get("stream"), int) else None,
        }
    )
    size = a.get("comm_size") if comm else a.get("tensor_size")
    if isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 1 << 63:
        task["bytes"] = size
    if memory and "bytes" not in task:
        task["bytes"] = 0
    if not comm:
        return task
    pg = a.get("pg_name")
    group = pg if isinstance(pg, str) and pg else WORLD
    if t == pb.COMM_COLL_NODE:
        ctype = a.get("comm_type")
        task["collective"] = COLLECTIVE_OF_TYPE.get(ctype) if isinstance(ctype, int) else None
        if task["collective"] is None:
            raise TraceError(f"{where}: comm_type {ctype!r} is not one of Chakra's collectives", path=path)
        task["group"] = group
        if group in groups:
            task["group_ranks"] = sorted(groups[group])
            task["group_size"] = len(groups[group])
        return task
    # a send and its receive: matched as a pair, by their ranks
    src, dst = a.get("comm_src"), a.get("comm_dst")
    task["collective"] = "sendrecv"
    if isinstance(src, int) and isinstance(dst, int) and 0 <= src < MAX_RANKS and 0 <= dst < MAX_RANKS:
        task["group"] = f"p2p {src}->{dst}"
        task["group_ranks"] = sorted({src, dst})
        task["group_size"] = len(task["group_ranks"])
    else:
        notes.add("a send or receive without comm_src and comm_dst runs alone, matched with no other rank")
        task["group"] = f"p2p {path} #{node.id}"
        task["group_ranks"] = [rank]
        task["group_size"] = 1
    return task


__all__ = [
    "COMM_GROUP_FILE",
    "check_out_dir",
    "ChakraWritten",
    "chakra_files",
    "chakra_inputs",
    "chakra_is_job",
    "is_chakra",
    "output_names",
    "read_chakra",
    "write_chakra",
]
