"""P3, priority-based parameter propagation (transforms/p3.whatif): a hand-built two-step graph with times worked out
by hand, the recorded example over its three steps, and a shared GPU trace for direction and magnitude."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from daydream.api.demo import bundled_example
from daydream.api.whatif import WhatIf, run_whatif
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.trace import load_trace

P3 = Path(__file__).resolve().parent.parent / "transforms" / "p3.whatif"
CPU, S7, NET = "cpu:1/1", "gpu:0/7", "gpu:0/1000"
ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def two_steps(layers: bool = True) -> nx.DiGraph:
    """Two steps of a two-layer model, GPU-bound. One CPU thread launches (calls 1 us, launch lag 0, no gaps);
    kernels of 100 us on stream 7 in order: forward A, forward B, backward B, backward A, then the optimizer (50 us,
    in the Optimizer.step range). AccumulateGrad calls after each backward launch: layer B's gradient 3000 elements
    (12 kB), layer A's 1000 (4 kB). Step s1: FA [1,101] FB [101,201] BB [201,301] BA [301,401] OPT [401,451]; s2
    follows on the stream, ending at 901 us (the first call starts at 0)."""
    g = nx.DiGraph()
    g.graph.update(delays=Delays(0.0, 0.0))
    prev_call = prev_kernel = None
    t = 0.0
    gpu_t = 1.0
    for step in ("s1", "s2"):
        for name, phase, layer, elements in [
            ("fwd_A", "forward", "A", None),
            ("fwd_B", "forward", "B", None),
            ("bwd_B", "backward", "B", 3000),
            ("bwd_A", "backward", "A", 1000),
            ("sgd", "optimizer", None, None),
        ]:
            region = {"region": "Optimizer.step#SGD.step"} if phase == "optimizer" else {}
            layer_attr = layer if layers else None
            call = add_task(
                g, "cudaLaunchKernel", "cpu", CPU, 1, start=t, step=step, phase=phase, layer=layer_attr, **region
            )
            duration = 50 if phase == "optimizer" else 100
            k = add_task(
                g,
                f"{name}_kernel",
                "gpu",
                S7,
                duration,
                start=gpu_t,
                step=step,
                phase=phase,
                layer=layer_attr,
                stream=7,
                **region,
                **{"class": "gemm"},
            )
            add_dependency(g, call, k, "launch")
            if prev_call is not None:
                add_dependency(g, prev_call, call, "thread")
            if prev_kernel is not None:
                add_dependency(g, prev_kernel, k, "stream")
            prev_call, prev_kernel = call, k
            t += 1
            gpu_t += duration
            if elements is not None:
                acc = add_task(
                    g,
                    ACC,
                    "cpu",
                    CPU,
                    1,
                    start=t,
                    step=step,
                    phase=phase,
                    layer=layer_attr,
                    op=ACC,
                    top_op_id=int(t),
                    shapes=[[elements]],
                )
                add_dependency(g, prev_call, acc, "thread")
                prev_call = acc
                t += 1
    g.graph["measured_us"] = gpu_t
    return g


def run(graph: nx.DiGraph, **params: object) -> WhatIf:
    # 2 ranks: half of each slice crosses the network; a link of 0.01 GB/s = 10 B/us: B's 12 kB gradient takes
    # 600 us each way, A's 4 kB 200 us
    result = run_whatif(graph, [P3], params={"ranks": 2, "link": 0.01, **params})
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def span(result: WhatIf, name: str, step: str) -> tuple[float, float]:
    t = result.timeline
    ((i,),) = [
        [
            i
            for i, n in enumerate(t.nodes)
            if result.graph.nodes[n]["name"] == name and result.graph.nodes[n]["step"] == step
        ]
    ]
    return float(t.start[i]), float(t.end[i])


def transfers(result: WhatIf, step: str) -> list[tuple[float, float, str, str]]:
    t = result.timeline
    out = []
    for i, n in enumerate(t.nodes):
        a = result.graph.nodes[n]
        if a.get("collective") in ("push", "pull") and a["step"] == step:
            out.append((float(t.start[i]), float(t.end[i]), a["collective"], a["layer"]))
    return sorted(out)


def test_parameter_server_without_p3_by_hand() -> None:
    # Whole gradients, first ready first sent; the servers update (the optimizer kernels and calls go): the stream
    # runs FA FB BB BA of s1 in [1, 401]. B's gradient is ready at 301, A's at 401. Push B [301, 901]; push A (ready
    # 401) before pull B (ready 901): [901, 1101]; pull B [1101, 1701]; pull A [1701, 1901]. Step 2's forward A waits
    # for pull A: [1901, 2001], FB [2001, 2101], BB [2101, 2201], BA [2201, 2301]; then push B [2201, 2801], push A
    # [2801, 3001], pull B [3001, 3601], pull A [3601, 3801]: the end.
    r = run(two_steps(), slice=0, priority=False)
    assert r.baseline_timeline.makespan() == 901  # both steps; the step time is their periods' median
    assert transfers(r, "s1") == [
        (301, 901, "push", "B"),
        (901, 1101, "push", "A"),
        (1101, 1701, "pull", "B"),
        (1701, 1901, "pull", "A"),
    ]
    assert span(r, "fwd_A_kernel", "s2") == (1901, 2001)
    assert r.timeline.makespan() == 3801
    # per step, from the end of the step before: s1 ends with its last pull, s2 1900 us later (the steady state);
    # before, s1 ended with its optimizer kernel [401, 451] and s2 450 us later
    assert r.predicted.step_us == {"s1": 1901, "s2": 1900} and r.baseline.step_us == {"s1": 451, "s2": 450}
    assert not [a for a in r.graph.nodes.values() if a["name"] == "sgd_kernel"]
    assert r.policy == "earliest"


def test_p3_priority_by_hand() -> None:
    # Priority by the layer's place in the forward pass (A 0, B 1), whole gradients: push B [301, 901] (nothing else
    # was ready at 301; a transfer is not pre-empted); then push A [901, 1101], pull A [1101, 1301] before pull B
    # [1301, 1901]. Step 2's FA starts at 1301, FB waits for pull B: [1901, 2001], BB [2001, 2101], BA [2101, 2201];
    # push B [2101, 2701], push A [2701, 2901], pull A [2901, 3101], pull B [3101, 3701]: the end.
    r = run(two_steps(), slice=0)
    assert r.policy == "priority p3_priority"
    assert transfers(r, "s1") == [
        (301, 901, "push", "B"),
        (901, 1101, "push", "A"),
        (1101, 1301, "pull", "A"),
        (1301, 1901, "pull", "B"),
    ]
    assert span(r, "fwd_A_kernel", "s2") == (1301, 1401)
    assert r.timeline.makespan() == 3701
    assert r.predicted.step_us == {"s1": 1901, "s2": 1800}  # 100 us a step less than without P3


def test_p3_slices_by_hand() -> None:
    # Slices of 1000 parameters (4 kB, 200 us each way): B in three. pB1 [301, 501]; A's push (ready 401, priority
    # 0) jumps the two other B slices: [501, 701], pull A [701, 901]; then B's in the order they became ready: pB2
    # [901, 1101], pB3 [1101, 1301], pull B1 (ready 501) [1301, 1501], B2 [1501, 1701], B3 [1701, 1901]. Step 2's FA
    # starts at 901, 1000 us sooner than without P3; FB still waits for B's last pull: [1901, 2001], and step 2 runs
    # as before, to 3701.
    r = run(two_steps(), slice=1000)
    assert [(s, e, d) for s, e, d, _ in transfers(r, "s1")] == [
        (301, 501, "push"),
        (501, 701, "push"),
        (701, 901, "pull"),
        (901, 1101, "push"),
        (1101, 1301, "push"),
        (1301, 1501, "pull"),
        (1501, 1701, "pull"),
        (1701, 1901, "pull"),
    ]
    assert span(r, "fwd_A_kernel", "s2") == (901, 1001)
    assert span(r, "fwd_B_kernel", "s2") == (1901, 2001)
    assert r.timeline.makespan() == 3701
    # the same slices first-ready-first: B's three pushes [301, 901], A's push [901, 1101], B's pulls (ready 501, 701,
    # 901) [1101, 1701], A's pull [1701, 1901]: step 2's FA waits as long as without slices
    fifo = run(two_steps(), slice=1000, priority=False)
    assert span(fifo, "fwd_A_kernel", "s2") == (1901, 2001)
    assert fifo.timeline.makespan() == 3801


def test_worker_update_waits_for_the_last_pull_by_hand() -> None:
    # server_update = false: the optimizer kernel stays and waits for the step's last pull (FIFO, whole gradients:
    # 1901); it runs [1901, 1951], step 2's FA [1951, 2051] ... BA [2251, 2351], its optimizer after pull A of step 2:
    # push B [2251, 2851], push A [2851, 3051], pull B [3051, 3651], pull A [3651, 3851], sgd [3851, 3901].
    r = run(two_steps(), slice=0, priority=False, server_update=False)
    assert span(r, "sgd_kernel", "s1") == (1901, 1951)
    assert span(r, "sgd_kernel", "s2") == (3851, 3901)
    assert r.timeline.makespan() == 3901


def test_without_modules_the_reverse_ready_order_stands_in() -> None:
    # No `layer` anywhere: A's gradient (ready last) is taken as the first layer's, and step 2's forward kernels are
    # cut into two runs, [FA] waiting for A's pulls, [FB] for B's: the same predictions as with the modules.
    for params in ({"slice": 0, "priority": False}, {"slice": 0}, {"slice": 1000}):
        assert run(two_steps(layers=False), **params).predicted_us == run(two_steps(), **params).predicted_us
    assert "reverse of their ready order" in " ".join(run(two_steps(layers=False)).printed)


def test_one_rank_changes_nothing() -> None:
    r = run(two_steps(), ranks=1)
    assert r.predicted_us == r.baseline_us and r.timeline.makespan() == 901
    assert len(r.graph) == len(two_steps())


# ---- the recorded example (CPU, three steps, modules) and a shared GPU trace ----------------------------------


def test_recorded_example_over_three_steps() -> None:
    graph = build_graph(load_trace(bundled_example()), "all")
    base = run_whatif(graph, [P3], params={"ranks": 1}).predicted_us
    assert base == pytest.approx(run_whatif(graph, [P3], params={"ranks": 1}).baseline_us)

    def predict(**params: object) -> WhatIf:
        r = run_whatif(graph, [P3], params=params)
        check_threads(r.graph)
        return r

    p3 = predict(link=0.5)
    ps = predict(link=0.5, slice=0, priority=False)
    # 10 gradients a step (5 Linear layers), 4.2 MB in 34 slices, by module; the network queue is a CPU thread
    assert all("10 gradients, 4.223 MB in 34 slices" in line and "modules" in line for line in p3.printed)
    assert {p3.graph.nodes[n]["thread"] for n in p3.graph if p3.graph.nodes[n].get("collective") == "push"} == {
        "cpu:p3/network"
    }
    # at 0.5 GB/s the network (4.2 MB x 2 x 3/4 / 0.5 GB/s = 12.7 ms a step) is close to the compute: P3 lets the next
    # forward start sooner than the plain parameter server does
    assert p3.predicted_us < ps.predicted_us
    assert 1.02 < ps.predicted_us / p3.predicted_us < 1.2
    # the steady state (the steps after the first, which carries the start-up): P3 gains more there
    for step in ("ProfilerStep#3", "ProfilerStep#4"):
        assert 1.05 < ps.predicted.step_us[step] / p3.predicted.step_us[step] < 1.3
    # a slower network: longer; a fast one: the steps approach the compute without the optimizer (the servers update)
    assert predict(link=0.2).predicted_us > p3.predicted_us > predict(link="eth-100g").predicted_us


@pytest.fixture
def linear(shared_traces: Path) -> nx.DiGraph:
    path = shared_traces / "param" / "linear_kineto.json.gz"
    if not path.exists():
        pytest.skip("needs ../shared/traces/param/linear_kineto.json.gz")
    return build_graph(
        load_trace(path, et=shared_traces / "param" / "linear_et.json.gz"), 1, context=False
    )  # one step alone


def test_shared_gpu_trace_one_step(linear: nx.DiGraph) -> None:
    # linear_kineto iteration#1 (RTX 2080 Ti, 42 gradients, 88 MB): one step, so the priority cannot help (the link
    # is never idle while something is queued, and nothing waits for a layer), and slicing changes nothing either
    r = {link: run_whatif(linear, [P3], params={"link": link}) for link in ("eth-10g", "eth-25g", "eth-100g")}
    ps = run_whatif(linear, [P3], params={"link": "eth-10g", "slice": 0, "priority": False})
    assert r["eth-10g"].predicted_us == pytest.approx(ps.predicted_us)
    assert "42 gradients, 88.166 MB in 588 slices" in r["eth-10g"].printed[0]
    # the step ends with its last pull: 88 MB x 2 x 3/4 over 1.06 GB/s is 125 ms of network after the backward
    assert 120_000 < r["eth-10g"].predicted_us < 140_000
    assert (
        r["eth-10g"].predicted_us > r["eth-25g"].predicted_us > r["eth-100g"].predicted_us > r["eth-100g"].baseline_us
    )
    pushes = [a for a in r["eth-10g"].graph.nodes.values() if a.get("collective") == "push"]
    assert {a["thread"] for a in pushes} == {"gpu:0/1000"} and all(a["queued"] and a["gap"] == 0 for a in pushes)
    assert run_whatif(linear, [P3], params={"ranks": 1}).predicted_us == pytest.approx(r["eth-10g"].baseline_us)


def test_cli_json(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "daydream",
            "run",
            str(bundled_example()),
            "p3",
            "--step",
            "all",
            "-p",
            "link=0.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["policy"] == "priority p3_priority" and d["predicted_us"] > 0 and len(d["steps"]) == 3
    assert list(d["step_us"]["predicted"]) == d["steps"]
    # the step time: the median of the steps' periods after the first, their context
    assert statistics.median(list(d["step_us"]["predicted"].values())[1:]) == pytest.approx(d["predicted_us"])
    text = subprocess.run(
        [sys.executable, "-m", "daydream", "run", str(bundled_example()), "p3", "--step", "all", "-p", "link=0.5"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "Per step (from the end of the step before to its end)" in text and "ProfilerStep#3" in text


def test_a_data_parallel_trace_loses_its_all_reduces(shared_traces: Path) -> None:
    # param/dlrm8 rank 0 (V100, DDP over 8 ranks, ProfilerStep#10; sizes from its execution trace): the parameter
    # server replaces the traced all-reduces
    path = shared_traces / "param" / "dlrm8" / "rank0.json.gz"
    graph = build_graph(load_trace(path, et=shared_traces / "param" / "dlrm8_et" / "rank0.et.json.gz"))
    reduces = [a for a in graph.nodes.values() if a.get("collective") == "allreduce"]
    r = run_whatif(graph, [P3])
    check_threads(r.graph)
    assert reduces and not [a for a in r.graph.nodes.values() if a.get("collective") == "allreduce"]
    assert "16 gradients, 2.485 MB in 29 slices" in r.printed[0]
    slow = run_whatif(graph, [P3], params={"link": "eth-10g", "ranks": 16})
    assert slow.predicted_us > r.predicted_us  # 15/16 of each slice on the wire instead of 3/4
