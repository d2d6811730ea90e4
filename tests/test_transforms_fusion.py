"""transforms/kernel_fusion.whatif and transforms/metaflow.whatif: hand-built graphs with times worked out by hand,
real traces for direction and magnitude."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from test_transforms import chain, predict
from whatif_graph import CPU, S7, S20, iteration

from daydream.api.whatif import WhatIf, run_whatif
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.schema import Delays
from daydream.trace import load_trace


def gpu_names(graph: nx.DiGraph) -> list[str]:
    return sorted(a["name"] for _, a in graph.nodes(data=True) if a["kind"] in ("gpu", "comm"))


def cpu_thread(*calls: tuple[str, float, float]) -> tuple[nx.DiGraph, list[int]]:
    """One CPU thread of calls (name, duration, gap after it), back to back from 0; launch latency 2, stream gap 0."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0))
    ids, t, prev = [], 0.0, None
    for name, dur, gap in calls:
        v = add_task(g, name, "cpu", CPU, dur, gap=gap, start=t, phase="forward", step="s")
        if prev is not None:
            add_dependency(g, prev, v, "thread")
        ids.append(v)
        prev, t = v, t + dur + gap
    return g, ids


def kernels_on_s7(g: nx.DiGraph, specs: list[tuple[str, str, float, int]]) -> list[int]:
    """Kernels (name, class, duration, launching call) in stream order on stream 7."""
    out: list[int] = []
    for name, cls, dur, call in specs:
        k = add_task(
            g,
            name,
            "gpu",
            S7,
            dur,
            start=g.nodes[call]["start"] + 12,
            phase="forward",
            step="s",
            stream=7,
            **{"class": cls},
        )
        add_dependency(g, call, k, "launch", lag=2)
        if out:
            add_dependency(g, out[-1], k, "stream")
        out.append(k)
    return out


def removed_cpu_us(before: nx.DiGraph, after: nx.DiGraph) -> float:
    """CPU time (calls and the framework time after them) a script took out of the graph."""
    gone = set(before) - set(after)
    return sum(before.nodes[n]["duration"] + before.nodes[n]["gap"] for n in gone if before.nodes[n]["kind"] == "cpu")


def gpu_us(r: WhatIf, which: str) -> float:
    return sum(getattr(r, which).gpu_time_by_class.values())


# --- kernel_fusion ----------------------------------------------------------------------------------------------


def fusion_chain() -> nx.DiGraph:
    return chain(
        ("gemm", "gemm", 100, {}),
        ("add", "elementwise", 30, {}),
        ("relu", "elementwise", 20, {}),
        ("mul", "elementwise", 10, {}),
        ("sum", "reduction", 15, {}),
        ("gemm2", "gemm", 50, {}),
    )


def test_kernel_fusion_by_hand() -> None:
    g = fusion_chain()
    # baseline: launches [0,10] .. [50,60], kernels gemm [12,112] add [112,142] relu [142,162] mul [162,172]
    # sum [172,187] gemm2 [187,237] -> 237. add relu mul sum (a reduction closes the chain) become one kernel of the
    # longest one's 30 us, in sum's place with sum's launch; the other three launches go, so the CPU runs
    # L(gemm) [0,10] L(sum) [10,20] L(gemm2) [20,30]: gemm [12,112], fused [112,142], gemm2 [142,192] -> 192
    assert predict(g, "kernel_fusion") == (237.0, 192.0)
    r = run_whatif(g, ["kernel_fusion"])
    assert gpu_names(r.graph) == ["fused_kernel", "gemm", "gemm2"]
    assert sum(a["kind"] == "cpu" for _, a in r.graph.nodes(data=True)) == 3
    # extra_traffic 1: 30 + (75 - 30 - 3 x 2 us) = 69 -> fused [112,181], gemm2 [181,231]
    assert predict(g, "kernel_fusion", extra_traffic=1) == (237.0, 231.0)
    # nothing saved on the GPU (75 us), which bounds this iteration: the baseline again
    assert predict(g, "kernel_fusion", extra_traffic=1, kernel_overhead=0) == (237.0, 237.0)
    # without reductions as chain ends: add relu mul -> 30 us [112,142], sum [142,157], gemm2 [157,207]
    assert predict(g, "kernel_fusion", ends=[]) == (237.0, 207.0)
    assert predict(g, "kernel_fusion", min_length=5) == (237.0, 237.0)


def test_kernel_fusion_stops_a_chain_at_a_result_someone_reads_and_saves_launches() -> None:
    g, (lg, l1, l2, sync, l3, l4) = cpu_thread(
        ("cudaLaunchKernel", 10, 20),
        ("cudaLaunchKernel", 10, 20),
        ("cudaLaunchKernel", 10, 20),
        ("cudaStreamSynchronize", 3, 20),
        ("cudaLaunchKernel", 10, 20),
        ("cudaLaunchKernel", 10, 0),
    )
    _, e1, e2, e3, e4 = kernels_on_s7(
        g,
        [
            ("gemm", "gemm", 50, lg),
            ("e1", "elementwise", 5, l1),
            ("e2", "elementwise", 5, l2),
            ("e3", "elementwise", 5, l3),
            ("e4", "elementwise", 5, l4),
        ],
    )
    add_dependency(g, e2, sync, "sync")  # the host reads e2's result: e1 e2 | e3 e4
    # baseline: CPU G [0,10] L1 [30,40] L2 [60,70] S [90,93] L3 [113,123] L4 [143,153] (20 us of framework time
    # after each call); gemm [12,62] e1 [62,67] e2 [72,77] e3 [125,130] e4 [155,160] -> 160.
    # fused: e2 (5 us) keeps L2, e4 keeps L4; L1 and L3 go with their 20 us: G [0,10] L2 [30,40], e2 [62,67] after
    # the gemm, S waits for it [67,70], L4 [90,100], e4 [102,107] -> 107
    assert predict(g, "kernel_fusion") == (160.0, 107.0)
    r = run_whatif(g, ["kernel_fusion"])
    assert gpu_names(r.graph) == ["fused_kernel", "fused_kernel", "gemm"]
    assert any(
        r.graph.nodes[u]["name"] == "fused_kernel" for u in r.graph.pred[sync]
    )  # the sync reads the fused kernel


def test_kernel_fusion_does_not_fuse_across_a_wait_for_another_stream() -> None:
    g = chain(("a", "elementwise", 10, {}), ("b", "elementwise", 10, {}), ("c", "elementwise", 10, {}))
    x = add_task(g, "producer", "gpu", S20, 100, start=0.0, phase="forward", **{"class": "gemm"})
    b = next(n for n, a in g.nodes(data=True) if a["name"] == "b")
    add_dependency(g, x, b, "sync", lag=0)
    # a [12,22]; b waits for the producer [0,100]: [100,110]; c [110,120]. Only b c fuse (10 us, in c's place, with
    # c's launch): L(a) [0,10] L(c) [10,20], a [12,22], the fused kernel still waits for the producer: [100,110]
    assert predict(g, "kernel_fusion") == (120.0, 110.0)
    assert gpu_names(run_whatif(g, ["kernel_fusion"]).graph) == ["a", "fused_kernel", "producer"]


def test_kernel_fusion_on_a_gpu_bound_cnn(shared_traces: Path) -> None:
    graph = build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"))
    r = run_whatif(graph, ["kernel_fusion"])
    fused = [a for _, a in r.graph.nodes(data=True) if a["name"] == "fused_kernel"]
    assert len(fused) >= 8  # the residual add + relu of every basic block at least
    saved_gpu = gpu_us(r, "baseline") - gpu_us(r, "predicted")
    assert saved_gpu > 0 and r.speedup > 1.0
    # shortening tasks by X us in total cannot shorten the iteration by more than X
    assert r.baseline_us - r.predicted_us <= saved_gpu + removed_cpu_us(graph, r.graph) + 1e-6
    # the GPU-bound iteration gains about what the GPU saves
    assert r.baseline_us - r.predicted_us >= 0.9 * saved_gpu
    times = [run_whatif(graph, ["kernel_fusion"], params={"extra_traffic": x}).predicted_us for x in (0, 0.5, 1)]
    assert times[0] == r.predicted_us and times[0] < times[1] < times[2] <= r.baseline_us
    neutral = run_whatif(graph, ["kernel_fusion"], params={"min_length": 10_000})
    assert neutral.predicted_us == neutral.baseline_us


# --- metaflow ---------------------------------------------------------------------------------------------------


def test_metaflow_by_hand() -> None:
    # iteration(): K1 gemm fwd [12,112], K2 relu [112,132], K3 gemm bwd [132,332], allreduce [332,382],
    # adam [382,412], sync [412,415]. The relu follows the forward GEMM: fused into it, 100 + 0.33 x 20 = 106.6 us,
    # run in the relu's place with its launch (L1 goes): L2 [0,10] -> [12,118.6], K3 [118.6,318.6], allreduce
    # [318.6,368.6], adam [368.6,398.6], sync [398.6,401.6]. K3 is read by the all-reduce and adam: nothing fuses.
    assert predict(iteration(), "metaflow") == (415.0, pytest.approx(401.6))
    r = run_whatif(iteration(), ["metaflow"])
    assert gpu_names(r.graph) == ["multi_tensor_apply_adam", "ncclAllReduce", "sm80_gemm_bwd", "sm80_gemm_fwd"]
    fwd = next(a for _, a in r.graph.nodes(data=True) if a["name"] == "sm80_gemm_fwd")
    assert fwd["class"] == "gemm" and fwd["duration"] == pytest.approx(106.6)
    assert predict(iteration(), "metaflow", cost=1) == (415.0, 415.0)  # the relu's whole time: GPU-bound, no gain
    # a profiled 50 us for the new layer: [12,62], K3 [62,262], allreduce [262,312], adam [312,342], sync [342,345]
    assert predict(iteration(), "metaflow", new_duration=50) == (415.0, 345.0)
    assert predict(iteration(), "metaflow", max_fused=0) == (415.0, 415.0)
    assert predict(iteration(), "metaflow", layers='"model.fc1"') == (415.0, pytest.approx(401.6))
    assert predict(iteration(), "metaflow", layers='"model.act"') == (415.0, 415.0)  # K1 is not in that layer


def test_metaflow_by_hand_cpu_bound_keeps_the_framework_time_after_the_layer() -> None:
    g, (la, lb, lr, lg) = cpu_thread(
        ("cudaLaunchKernel", 10, 30),
        ("cudaLaunchKernel", 10, 30),
        ("cudaLaunchKernel", 10, 30),
        ("cudaLaunchKernel", 10, 0),
    )
    kernels_on_s7(
        g,
        [
            ("gemm", "gemm", 20, la),
            ("bias", "elementwise", 5, lb),
            ("relu", "elementwise", 5, lr),
            ("gemm2", "gemm", 50, lg),
        ],
    )
    # baseline: calls [0,10] [40,50] [80,90] [120,130]; gemm [12,32] bias [52,57] relu [92,97] gemm2 [132,182] -> 182.
    # bias and relu fuse into the gemm: 20 + 0.33 x 10 = 23.3 us with the relu's launch; the gemm's and the bias's
    # calls go with the 30 us after each, the 30 us after the relu's call stay: L(relu) [0,10], L(gemm2) [40,50];
    # fused [12,35.3], gemm2 [52,102] -> 102
    assert predict(g, "metaflow") == (182.0, 102.0)
    # one kernel per layer: bias fused (20 + 1.65 us), relu stays: L(bias) [0,10] L(relu) [40,50] L(gemm2) [80,90];
    # fused [12,33.65], relu [52,57], gemm2 [92,142]
    assert predict(g, "metaflow", max_fused=1) == (182.0, 142.0)
    assert gpu_names(run_whatif(g, ["metaflow"]).graph) == ["gemm", "gemm2"]


def test_metaflow_on_a_real_mlp(shared_traces: Path) -> None:
    graph = build_graph(load_trace(shared_traces / "param" / "linear_kineto.json.gz"), context=False)
    r = run_whatif(graph, ["metaflow"])
    assert r.printed[-1] == "21 kernels fused into 21 layers"  # every Linear + ReLU of the forward pass
    relu_us = sum(
        a["duration"] for _, a in graph.nodes(data=True) if a["kind"] == "gpu" and a["op"] == "aten::clamp_min"
    )
    assert r.baseline.gpu_time_by_class["elementwise"] - r.predicted.gpu_time_by_class["elementwise"] == pytest.approx(
        relu_us
    )
    assert r.predicted.gpu_time_by_class["gemm"] - r.baseline.gpu_time_by_class["gemm"] == pytest.approx(0.33 * relu_us)
    assert r.speedup > 1.0
    saved_gpu = gpu_us(r, "baseline") - gpu_us(r, "predicted")
    assert r.baseline_us - r.predicted_us <= saved_gpu + removed_cpu_us(graph, r.graph) + 1e-6
    times = [run_whatif(graph, ["metaflow"], params={"cost": c}).predicted_us for c in (0, 0.33, 1)]
    assert times == sorted(times) and times[1] == r.predicted_us and times[-1] < r.baseline_us  # the launches still go
    none = run_whatif(graph, ["metaflow"], params={"max_fused": 0})
    assert none.predicted_us == none.baseline_us
