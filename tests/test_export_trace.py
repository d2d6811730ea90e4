"""``--export-trace``: simulated timelines as Chrome-trace JSON, checked against the trace event format's rules
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU): a JSON object with a
``traceEvents`` list; complete (X) events with a name, a category, integer pid/tid, a time and a duration; metadata
(M) events naming processes and threads; flow (s/f) events pairing by id. On a hand-built graph with every slice
worked out, the bundled CPU example, and the real GPU traces of ../shared/traces (skipped where absent)."""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from daydream.api.replay import replay
from daydream.api.whatif import whatif
from daydream.commands.cli import main
from daydream.graph import add_dependency, add_task
from daydream.simulation import Timeline, critical_path_indices, simulate
from daydream.simulation.export import export_chrome_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"
HTA = "hta/nccl_parser_config_nccl_data.json.gz"
CPU, GPU = "cpu:1/1", "gpu:0/7"
METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
# slack for comparing a slice's end (ts + dur, added up by the reader) with another time: a picosecond
EPS = 1e-6


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def check_chrome_trace(doc: Any) -> dict[str, Any]:
    """Assert the format's rules on a whole document; return its slices by (pid, tid), names and flows."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc["displayTimeUnit"] in ("ms", "ns") and isinstance(doc["otherData"], dict)
    slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    processes: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in doc["traceEvents"]:
        assert isinstance(e, dict) and isinstance(e.get("ph"), str), e
        assert _int(e["pid"]) and _int(e["tid"]), e
        if e["ph"] == "X":
            assert isinstance(e["name"], str) and isinstance(e["cat"], str), e
            assert _number(e["ts"]) and _number(e["dur"]) and e["dur"] >= 0, e
            assert isinstance(e.get("args", {}), dict)
            slices[e["pid"], e["tid"]].append(e)
        elif e["ph"] == "M":
            assert e["name"] in METADATA, e
            if e["name"].endswith("_sort_index"):
                assert _int(e["args"]["sort_index"]), e
            elif e["name"] == "process_name":
                assert isinstance(e["args"]["name"], str) and e["pid"] not in processes, e
                processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                assert isinstance(e["args"]["name"], str) and (e["pid"], e["tid"]) not in threads, e
                threads[e["pid"], e["tid"]] = e["args"]["name"]
        elif e["ph"] in ("s", "f"):
            assert _int(e["id"]) and isinstance(e["cat"], str) and isinstance(e["name"], str) and _number(e["ts"]), e
            assert e["ph"] not in flows[e["id"]], f"flow id {e['id']} used twice"
            flows[e["id"]][e["ph"]] = e
        else:
            raise AssertionError(f"unexpected event {e}")
    for key in slices:
        assert key in threads, f"slices on {key} but no thread_name"
        assert key[0] in processes, f"slices in pid {key[0]} but no process_name"
    for key, events in slices.items():
        _check_nesting(events, threads[key])
    starts = {key: _sorted(events) for key, events in slices.items()}
    for flow_id, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {flow_id} is not a start and a finish"
        s, f = pair["s"], pair["f"]
        assert f.get("bp") == "e" and f["ts"] >= s["ts"], (s, f)
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]), (s, f)
        for event in (s, f):  # each binds to the slice enclosing it on its thread
            assert _enclosed(starts.get((event["pid"], event["tid"])), event["ts"]), f"flow event in no slice: {event}"
    return {"slices": slices, "processes": processes, "threads": threads, "flows": flows}


def _check_nesting(events: list[dict[str, Any]], thread: str) -> None:
    """Slices on one thread nest: each ends before the one around it does, or starts after it ended."""
    stack: list[float] = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while stack and stack[-1] <= e["ts"] + EPS:
            stack.pop()
        assert not stack or end <= stack[-1] + EPS, f"{thread}: {e} overlaps the slice ending at {stack[-1]}"
        stack.append(end)


def _sorted(events: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    events = sorted(events, key=lambda e: e["ts"])
    return [e["ts"] for e in events], [e["ts"] + e["dur"] for e in events]


def _enclosed(spans: tuple[list[float], list[float]] | None, t: float) -> bool:
    if spans is None:
        return False
    ts, ends = spans
    k = bisect.bisect_right(ts, t) - 1
    return any(ts[j] <= t <= ends[j] + EPS for j in range(k, -1, -1))


def tids(trace: dict[str, Any], pid: int) -> dict[str, int]:
    return {name: tid for (p, tid), name in trace["threads"].items() if p == pid}


def task_slices(trace: dict[str, Any], pid: int) -> list[dict[str, Any]]:
    """The slices of tasks (not of op, module or critical path ranges)."""
    return [
        e
        for (p, _), events in trace["slices"].items()
        if p == pid
        for e in events
        if e["cat"] not in ("op", "module", "critical_path")
    ]


def flows_of(trace: dict[str, Any], pid: int) -> int:
    return sum(1 for pair in trace["flows"].values() if pair["s"]["pid"] == pid)


def launch_edges(timeline: Timeline) -> int:
    """Launch edges of the timeline's graph whose both ends the timeline holds."""
    held = set(timeline.nodes)
    return sum(1 for u, v, kind in timeline.graph.edges(data="kind") if kind == "launch" and u in held and v in held)


def check_critical_path(trace: dict[str, Any], pid: int, timeline: Timeline) -> None:
    """The path's tasks are marked, and its track holds one slice per path task, in time order, not overlapping."""
    path = critical_path_indices(timeline)
    marked = [e["args"]["task"] for e in task_slices(trace, pid) if e["args"].get("critical_path")]
    assert sorted(marked) == sorted(timeline.nodes[i] for i in path)
    track = sorted(trace["slices"][pid, tids(trace, pid)["critical path"]], key=lambda e: e["ts"])
    assert [e["args"]["task"] for e in track] == [timeline.nodes[i] for i in path]
    for a, b in zip(track, track[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + EPS
    assert track[-1]["ts"] + track[-1]["dur"] - track[0]["ts"] == pytest.approx(timeline.makespan(path), abs=1e-3)


# ---- a hand-built graph: every slice known -------------------------------------------------------------------------


def hand_built() -> nx.DiGraph:
    """Five calls on one CPU thread (ops a a - a b, modules m m m - m), the first and fourth launching a kernel."""
    g = nx.DiGraph(origin_us=1.7e12, trace="/data/hand.json")
    ops, layers = ["a", "a", None, "a", "b"], ["m", "m", "m", None, "m"]
    calls = [add_task(g, f"call{k}", "cpu", CPU, 10.0, gap=1.0, rank=0, op=ops[k], layer=layers[k]) for k in range(5)]
    for a, b in zip(calls, calls[1:]):
        add_dependency(g, a, b, "thread")
    k1 = add_task(g, "k1", "gpu", GPU, 30.0, rank=0, op="a")
    k2 = add_task(g, "k2", "gpu", GPU, 5.0, rank=0, op="a")
    add_dependency(g, calls[0], k1, "launch", lag=2.0)
    add_dependency(g, calls[3], k2, "launch", lag=2.0)
    add_dependency(g, k1, k2, "stream")
    return g


def test_hand_built_timeline(tmp_path: Path) -> None:
    timeline = simulate(hand_built())
    export_chrome_trace(timeline, tmp_path / "t.json.gz")
    doc = load(tmp_path / "t.json.gz")  # gzip-compressed, as the name asks
    trace = check_chrome_trace(doc)
    assert trace["processes"] == {1: "simulated (hand.json)"}
    names = ["critical path", CPU, f"{CPU} ops", f"{CPU} modules", GPU]
    assert tids(trace, 1) == {name: tid for tid, name in enumerate(names, 1)}
    sort = {e["tid"]: e["args"]["sort_index"] for e in doc["traceEvents"] if e["name"] == "thread_sort_index"}
    assert sorted(sort, key=sort.get) == [1, 2, 3, 4, 5]  # the CPU thread and its ranges above the stream
    o = 1.7e12
    # calls at 0, 11, 22, 33, 44 (10 us and a 1 us gap each); k1 at 12-42, k2 after its launch (43 + 2): 45-50
    ops = [(e["name"], e["ts"] - o, e["dur"], e["args"]["tasks"]) for e in trace["slices"][1, 3]]
    assert ops == [("a", 0, 21, 2), ("a", 33, 10, 1), ("b", 44, 10, 1)]  # the call without an op ends the run
    modules = [(e["name"], e["ts"] - o, e["dur"], e["args"]["tasks"]) for e in trace["slices"][1, 4]]
    assert modules == [("m", 0, 32, 3), ("m", 44, 10, 1)]
    kernels = sorted((e["name"], e["ts"] - o, e["dur"], e["cat"]) for e in trace["slices"][1, 5])
    assert kernels == [("k1", 12, 30, "kernel"), ("k2", 45, 5, "kernel")]
    flows = sorted(
        ((p["s"]["tid"], p["s"]["ts"] - o), (p["f"]["tid"], p["f"]["ts"] - o)) for p in trace["flows"].values()
    )
    assert flows == [((2, 5), (5, 12)), ((2, 38), (5, 45))]  # from inside each call to its kernel's start
    assert sorted(trace["flows"]) == [1, 2] and flows_of(trace, 1) == launch_edges(timeline)
    check_critical_path(trace, 1, timeline)


def test_overlapping_tasks_on_a_thread_get_a_lane_of_their_own(tmp_path: Path) -> None:
    """A baseline whose task attributes scripts changed since may put overlapping tasks on one thread: the slices
    still nest, the overlapping ones on an overlap lane."""
    g = hand_built()
    timeline = simulate(g)
    timeline.start = timeline.start.copy()
    timeline.start[1] -= 5.0  # call1 now starts inside call0
    export_chrome_trace(timeline, tmp_path / "t.json")
    trace = check_chrome_trace(load(tmp_path / "t.json"))
    lane = tids(trace, 1)[f"{CPU} (overlap 1)"]
    assert [e["name"] for e in trace["slices"][1, lane]] == ["call1"]


def test_a_kernel_starting_before_its_launch_call_keeps_the_path_in_order(tmp_path: Path) -> None:
    """A launch lag longer than the call: the kernel starts 2 us before its call, and ends last. The path's row
    stays in time order (the call's share clipped to nothing) and the arrow does not run backwards."""
    g = nx.DiGraph()
    call = add_task(g, "call", "cpu", CPU, 10.0, rank=0)
    kernel = add_task(g, "k", "gpu", GPU, 30.0, rank=0)
    add_dependency(g, call, kernel, "launch", lag=-12.0)
    timeline = simulate(g)
    assert critical_path_indices(timeline) == [0, 1] and timeline.start[1] == -2.0
    export_chrome_trace(timeline, tmp_path / "t.json")
    trace = check_chrome_trace(load(tmp_path / "t.json"))
    track = trace["slices"][1, tids(trace, 1)["critical path"]]
    assert [(e["name"], e["ts"], e["dur"]) for e in track] == [("call", 0, 0), ("k", 0, 28)]
    (pair,) = trace["flows"].values()
    assert pair["s"]["ts"] == pair["f"]["ts"] == 0


def test_tasks_removed_from_the_graph_since_are_exported(tmp_path: Path) -> None:
    """A what-if's baseline timeline keeps the tasks the scripts removed from its graph afterwards: their slices
    are written, their flows (edges the graph no longer has) are not."""
    g = hand_built()
    timeline = simulate(g)
    g.remove_nodes_from([3, 6])  # call3 and k2, its kernel
    export_chrome_trace([("baseline", timeline), ("predicted", simulate(g))], tmp_path / "t.json")
    trace = check_chrome_trace(load(tmp_path / "t.json"))
    assert trace["processes"] == {1: "baseline (hand.json)", 2: "predicted (hand.json)"}
    assert len(task_slices(trace, 1)) == 7 and len(task_slices(trace, 2)) == 5
    assert flows_of(trace, 1) == flows_of(trace, 2) == 1 == launch_edges(timeline)


def test_every_event_is_well_formed_on_an_empty_timeline(tmp_path: Path) -> None:
    empty = Timeline(nx.DiGraph(), [], np.empty(0), np.empty(0), np.empty(0, dtype=int), [])
    export_chrome_trace(empty, tmp_path / "t.json")
    trace = check_chrome_trace(load(tmp_path / "t.json"))
    assert trace["processes"] == {1: "simulated"} and not trace["slices"] and not trace["flows"]


# ---- the command line ----------------------------------------------------------------------------------------------


def test_simulate_exports_the_bundled_cpu_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.json"
    assert main(["simulate", str(EXAMPLE), "--export-trace", str(out)]) == 0
    assert "simulated timeline written to" in capsys.readouterr().out
    trace = check_chrome_trace(load(out))
    assert list(trace["processes"]) == [1] and trace["processes"][1].startswith("simulated (mlp_cpu")
    timeline = replay(EXAMPLE).timeline
    assert len(task_slices(trace, 1)) == len(timeline.nodes)
    assert flows_of(trace, 1) == launch_edges(timeline) == 0  # a CPU trace launches nothing
    names = tids(trace, 1)
    assert any(n.endswith(" ops") for n in names) and any(n.endswith(" modules") for n in names)
    assert not any(n.startswith("gpu:") for n in names)
    check_critical_path(trace, 1, timeline)


def test_run_exports_the_baseline_and_the_prediction(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = shared_traces / HTA, tmp_path / "amp.json"
    assert main(["run", str(path), "amp", "--export-trace", str(out)]) == 0
    capsys.readouterr()
    trace = check_chrome_trace(load(out))
    assert {pid: name.split(" ")[0] for pid, name in trace["processes"].items()} == {1: "baseline", 2: "predicted"}
    result = whatif(path, ["amp"])
    for pid, timeline in ((1, result.baseline_timeline), (2, result.timeline)):
        assert len(task_slices(trace, pid)) == len(timeline.nodes)
        assert flows_of(trace, pid) == launch_edges(timeline) > 0
        check_critical_path(trace, pid, timeline)
        names = tids(trace, pid)
        assert set(names) >= set(timeline.threads)  # the threads keep the trace's names
        cpu = [names[n] for n in timeline.threads if n.startswith("cpu:")]
        gpu = [names[n] for n in timeline.threads if n.startswith("gpu:")]
        assert gpu and max(cpu) < min(gpu)  # CPU threads above GPU streams
    assert set(tids(trace, 1)) == set(tids(trace, 2))  # the same tracks, under tids of their own
    assert not set(tids(trace, 1).values()) & set(tids(trace, 2).values())

    def kernel_us(pid: int) -> float:
        return sum(e["dur"] for e in task_slices(trace, pid) if e["cat"] == "kernel")

    assert kernel_us(2) < kernel_us(1)  # mixed precision: faster kernels in the prediction only


def test_simulate_exports_one_process(shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = shared_traces / HTA, tmp_path / "sim.json.gz"
    assert main(["simulate", str(path), "--export-trace", str(out)]) == 0
    capsys.readouterr()
    trace = check_chrome_trace(load(out))
    assert list(trace["processes"]) == [1] and trace["processes"][1].startswith("simulated (")
    timeline = replay(path).timeline
    assert len(task_slices(trace, 1)) == len(timeline.nodes)
    assert flows_of(trace, 1) == launch_edges(timeline) > 0
    check_critical_path(trace, 1, timeline)


def test_run_that_removes_tasks_exports_the_baseline_whole(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run`` changes the graph its baseline was simulated on: the removed tasks stay in the baseline process."""
    script = tmp_path / "drop.whatif"
    script.write_text('remove (select kernel where class == "gemm") with launches\n')
    out = tmp_path / "drop.json"
    assert main(["run", str(shared_traces / HTA), str(script), "--export-trace", str(out)]) == 0
    capsys.readouterr()
    trace = check_chrome_trace(load(out))
    baseline, predicted = len(task_slices(trace, 1)), len(task_slices(trace, 2))
    assert baseline == len(replay(shared_traces / HTA).timeline.nodes) > predicted


def test_a_jobs_ranks_keep_their_threads_apart(
    shared_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = shared_traces / "param" / "dlrm8"
    if not job.is_dir():
        pytest.skip(f"{job} is absent")
    out = tmp_path / "job.json"
    assert main(["simulate", str(job), "--export-trace", str(out)]) == 0
    capsys.readouterr()
    trace = check_chrome_trace(load(out))
    names = Counter(trace["threads"].values())
    assert max(names.values()) == 1
    ranks = {n.split(" ")[1] for n in names if n.startswith("rank ")}
    assert ranks == {str(r) for r in range(8)}
