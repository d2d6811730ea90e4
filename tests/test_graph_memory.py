"""A built graph's task and edge attribute dicts are key-sharing dicts (graph.schema.new_task_attrs,
new_edge_attrs): the memory a 10M-event trace's graph needs rests on it (docs/speed.md), and a new
attribute the builder gives every task, or a dict made another way, would undo it without changing any result."""

from __future__ import annotations

import ctypes
import pickle
import sys
from pathlib import Path

import pytest

from daydream import build_graph, load_trace
from daydream.graph.adjacency import copy_graph
from daydream.graph.schema import new_edge_attrs, new_task_attrs

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"

pytestmark = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info < (3, 11),
    reason="key-sharing dicts as CPython 3.11 and later make them (any order of keys)",
)


def _shares_keys(d: dict) -> bool:
    """Whether CPython holds ``d`` as a split (key-sharing) table: its ``ma_values`` pointer, after the object
    header, ``ma_used``, the version tag and ``ma_keys``, is set."""
    return ctypes.c_void_p.from_address(id(d) + 5 * ctypes.sizeof(ctypes.c_void_p)).value is not None


class _Probe:
    pass


def test_the_probe_tells_the_two_kinds_apart() -> None:
    probe = _Probe()
    probe.x = 1
    assert _shares_keys(probe.__dict__) and not _shares_keys({"x": 1}) and not _shares_keys(dict(probe.__dict__))


def _traces() -> list[Path]:
    found = [EXAMPLE]
    for name in ("hta/nccl_parser_config_nccl_data.json.gz", "param/dlrm8/rank0.json.gz"):
        if (SHARED / name).exists():
            found.append(SHARED / name)
    return found


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name)
def test_built_tasks_and_edges_share_their_keys(path: Path) -> None:
    graph = build_graph(load_trace(path), "all", release_events=True)
    tasks = list(graph.nodes.values())
    plain = [a for a in tasks if not _shares_keys(a)]
    assert not plain, f"{len(plain)} of {len(tasks)} tasks hold ordinary dicts: {plain[:2]}"
    edges = [e for _, _, e in graph.edges(data=True)]
    assert edges and all(_shares_keys(e) for e in edges)
    # and smaller for it: a key-sharing dict with room for many more keys than it holds takes more than a plain one
    assert all(sys.getsizeof(d) < sys.getsizeof(dict(d)) for d in (*tasks, *edges))


def test_key_sharing_dicts_are_plain_dicts() -> None:
    gpu = new_task_attrs("gpu")
    for key, value in (("name", "k"), ("duration", 1.5), ("class", "gemm"), ("stream", 7)):
        gpu[key] = value
    cpu = new_task_attrs("cpu")
    cpu["top_op"], cpu["name"] = "aten::linear", "aten::mm"  # any order: each dict keeps its own
    assert type(gpu) is dict and list(gpu.items())[:2] == [("kind", "gpu"), ("name", "k")]
    assert list(cpu) == ["kind", "top_op", "name"] and _shares_keys(gpu) and _shares_keys(cpu)
    assert new_task_attrs("cpu") == {"kind": "cpu"} and new_task_attrs("comm") == {"kind": "comm"}  # nothing shared
    gpu["prio"] = 2  # a script's own attribute
    assert gpu["prio"] == 2 and pickle.loads(pickle.dumps(gpu)) == gpu == dict(gpu)
    del gpu["prio"]
    assert "prio" not in gpu
    edge = new_edge_attrs("launch", -1.0)
    assert edge == {"kind": "launch", "lag": -1.0} and new_edge_attrs("thread") == {"kind": "thread"}


def test_a_copy_is_as_compact_and_changes_alone() -> None:
    graph = build_graph(load_trace(EXAMPLE), "all")
    copy = copy_graph(graph)
    # what-if sessions and compare copy the graph per scenario: dict() would make ordinary dicts, 3.5x slower
    assert all(_shares_keys(a) for a in copy.nodes.values())
    assert all(_shares_keys(e) for _, _, e in copy.edges(data=True))
    task = next(iter(copy.nodes))
    copy.nodes[task]["duration"] = 123.0
    u, v = next(iter(copy.edges))
    copy.edges[u, v]["lag"] = 9.0
    assert graph.nodes[task]["duration"] != 123.0 and graph.edges[u, v].get("lag") != 9.0
