"""Batch transforms (transforms/batch_size.whatif, grad_accumulation.whatif, activation_checkpointing.whatif):
hand-built graphs with times worked out by hand, and real traces for direction and magnitude."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest
from test_transforms import chain, predict
from whatif_graph import CPU, iteration

from daydream.api.whatif import WhatIf, run_whatif
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.simulation import simulate
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
REDUCER = "torch.distributed.ddp.reducer::copy_bucket_to_grad"


def run(graph: nx.DiGraph, script: str, **params: object) -> WhatIf:
    result = run_whatif(graph, [TRANSFORMS / f"{script}.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def launch_of(g: nx.DiGraph, kernel: int) -> int:
    (call,) = [u for u in g.predecessors(kernel) if g.edges[u, kernel]["kind"] == "launch"]
    return call


def kernel_named(g: nx.DiGraph, name: str) -> int:
    (k,) = [n for n, a in g.nodes(data=True) if a["name"] == name and a["kind"] != "cpu"]
    return k


def set_phase(g: nx.DiGraph, kernel: str, phase: str, **attrs: object) -> None:
    """Give a chain kernel and its launch call another phase (chain makes every task forward)."""
    k = kernel_named(g, kernel)
    for n in (k, launch_of(g, k)):
        g.nodes[n].update(phase=phase, **attrs)


def gpu_order(result: WhatIf) -> list[str]:
    """The predicted timeline's GPU tasks (not comm) by start time."""
    t = result.timeline
    rows = [(t.start[i], t.attrs(i)["name"]) for i in range(len(t.nodes)) if t.attrs(i)["kind"] in ("gpu", "memset")]
    return [name for _, name in sorted(rows)]


def with_loader(g: nx.DiGraph) -> nx.DiGraph:
    """A data-loading range of 100 us (10 us of framework time after it) before the chain's first call."""
    first = min(n for n, a in g.nodes(data=True) if a["kind"] == "cpu")
    loader = add_task(
        g, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "dataloader", CPU, 100, gap=10, start=-110.0
    )
    add_dependency(g, loader, first, "thread")
    return g


# ---- batch_size -------------------------------------------------------------------------------------------------


def test_batch_size_by_hand() -> None:
    # iteration(): the forward/backward kernels K1 gemm 100, K2 relu 20, K3 gemm 200 take 2 + (d - 2) x factor; the
    # all-reduce K4 (50) and the optimizer kernel K5 (30) keep their time, as do the CPU calls (all end by 50).
    # factor 2: K1 198 [12,210], K2 38 [210,248], K3 398 [248,646], K4 [646,696], K5 [696,726], sync [726,729]
    result = run(iteration(), "batch_size")
    assert (result.baseline_us, result.predicted_us) == (415.0, pytest.approx(729.0))
    # each step processes twice the samples: throughput (samples/s after / before) 2 x 415 / 729 = 1.1385
    assert (
        result.samples == 2
        and result.throughput == pytest.approx(2 * 415 / 729)
        and result.speedup == pytest.approx(415 / 729)
    )
    d = result.to_dict()
    assert (d["samples"], d["throughput"]) == (2, pytest.approx(2 * 415 / 729))
    assert [r["throughput"] for r in result.rows()] == [pytest.approx(2 * 415 / 729)]
    assert [e.describe() for e in result.effects if e.kind == "samples"] == ["samples per step x2"]
    # factor 0.5: K1 51 [12,63], K2 11 [63,74], K3 101 [74,175], K4 [175,225], K5 [225,255], sync [255,258]
    assert predict(iteration(), "batch_size", factor=0.5) == (415.0, pytest.approx(258.0))
    assert predict(iteration(), "batch_size", factor=1) == (415.0, 415.0)
    # no fixed cost: every kernel exactly doubles: K1 [12,212], K2 [212,252], K3 [252,652], K4, K5, sync -> 735
    assert predict(iteration(), "batch_size", kernel_fixed=0) == (415.0, pytest.approx(735.0))


def test_batch_size_keeps_small_and_parameter_sized_kernels() -> None:
    g = chain(("gemm", "gemm", 100, {}), ("tiny", "elementwise", 1.5, {}), ("acc", "elementwise", 10, {"region": ACC}))
    # baseline gemm [12,112], tiny [112,113.5], acc [113.5,123.5]. factor 3: gemm 2 + 98 x 3 = 296 [12,308]; tiny is
    # below the 2 us fixed cost and the AccumulateGrad add is parameter-sized: both keep their time -> 319.5
    assert predict(g, "batch_size", factor=3) == (123.5, pytest.approx(319.5))


def test_batch_size_scales_data_loading() -> None:
    g = with_loader(chain(("gemm", "gemm", 50, {})))
    # baseline: load [0,100], gap 10, launch [110,120], gemm [122,172]. factor 2: load [0,200], gap 20,
    # launch [220,230], gemm 2 + 48 x 2 = 98 [232,330]; with loader_scales = false the load keeps its time:
    # launch [110,120], gemm [122,220]
    assert predict(g, "batch_size") == (172.0, pytest.approx(330.0))
    assert predict(g, "batch_size", loader_scales=False) == (172.0, pytest.approx(220.0))


def test_batch_size_on_a_cpu_only_trace() -> None:
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0))
    ops = [
        ("aten::linear", 100, "forward", None),
        ("aten::relu", 1.5, "forward", None),
        ("backward", 40, "backward", None),
        (ACC, 10, "backward", ACC),
        ("aten::add_", 30, "optimizer", None),
    ]
    prev = None
    for i, (name, dur, phase, region) in enumerate(ops):
        v = add_task(g, name, "cpu", CPU, dur, gap=5, start=200.0 * i, phase=phase, region=region)
        if prev is not None:
            add_dependency(g, prev, v, "thread")
        prev = v
    # one CPU thread, 5 us of framework time between ops: baseline 181.5 of ops + 4 x 5 = 201.5. factor 2: linear
    # 2 + 98 x 2 = 198, relu (below 2 us) 1.5, backward 2 + 38 x 2 = 78, AccumulateGrad 10 and the optimizer 30
    # unchanged: 317.5 + 20 = 337.5
    assert predict(g, "batch_size") == (201.5, pytest.approx(337.5))


def test_batch_size_keeps_the_parameter_sized_part_of_cpu_ops(tmp_path: Path) -> None:
    """A CPU recording: an embedding's backward op zero-fills the table's dense gradient (a parameter's dims, as the
    optimizer's ops take them) before adding the batch's rows: that part (`param_us`) does not grow with the batch."""

    def op(name: str, ts: float, dur: float, dims: list[object], cat: str = "cpu_op") -> dict[str, object]:
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {"Input Dims": dims},
        }

    events = [
        op("ProfilerStep#1", 0, 1000, [], "user_annotation"),
        op("aten::embedding_bag", 0, 100, [[1000, 8], [64], [16]]),
        op("autograd::engine::evaluate_function: EmbeddingBagBackward0", 200, 300, []),
        op("aten::fill_", 210, 120, [[1000, 8], []]),  # the dense gradient, zeroed
        op("aten::_embedding_bag_dense_backward", 340, 140, [[16, 8], [64], [16]]),
        op("Optimizer.step#SGD.step", 600, 200, [], "user_annotation"),
        op("aten::add_", 610, 90, [[1000, 8], [1000, 8], []]),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    graph = build_graph(load_trace(path))
    backward = next(a for _, a in graph.nodes(data=True) if a["name"].startswith("autograd::engine"))
    assert backward["param_us"] == 120.0 and backward["duration"] == 300.0
    assert all(a["param_us"] == 0.0 for _, a in graph.nodes(data=True) if a is not backward)
    result = run(graph, "batch_size")
    # the forward op 2 + 98 x 2 (+98); the backward op 120 + 2 + 178 x 2 (+178); the optimizer unchanged
    assert result.predicted.period_us - result.baseline.period_us == pytest.approx(98.0 + 178.0)


def test_a_matrix_product_is_never_parameter_sized(tmp_path: Path) -> None:
    """A flattened activation may have a parameter's dims (batch x tokens = the vocabulary: [1024, 128] is also the
    embedding's): a matrix product still computes on the batch. Only the weight's transpose is parameter-sized."""

    def op(name: str, ts: float, dur: float, dims: list[object], cat: str = "cpu_op") -> dict[str, object]:
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {"Input Dims": dims},
        }

    events = [
        op("ProfilerStep#1", 0, 1000, [], "user_annotation"),
        op("aten::linear", 0, 100, [[1000, 8], [8, 8], [8]]),
        op("aten::t", 2, 2, [[8, 8]]),
        op("aten::addmm", 10, 80, [[8], [1000, 8], [8, 8]]),  # the activation [1000, 8] has the embedding's dims
        op("Optimizer.step#SGD.step", 600, 200, [], "user_annotation"),
        op("aten::add_", 610, 30, [[1000, 8], [1000, 8], []]),
        op("aten::add_", 650, 30, [[8, 8], [8, 8], []]),
        op("aten::add_", 690, 30, [[8], [8], []]),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    linear = next(a for _, a in build_graph(load_trace(path)).nodes(data=True) if a["name"] == "aten::linear")
    assert linear["param_us"] == 2.0


def test_batch_size_on_real_traces(shared_traces: Path) -> None:
    # resnet_kineto: GPU-bound once its input is on the device: a larger batch costs time but gains throughput. The
    # step alone (context=False): what the script adds is the step's, as the growth it is compared with
    graph = build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"), context=False)
    runs = {f: run_whatif(graph, ["batch_size"], params={"factor": f}) for f in (0.5, 1, 2, 4)}
    base = runs[1].baseline_us
    assert runs[1].predicted_us == base
    times = [runs[f].predicted_us for f in (0.5, 1, 2, 4)]
    gains = [f * base / runs[f].predicted_us for f in (0.5, 1, 2, 4)]
    assert times == sorted(times) and gains == sorted(gains)
    assert 1.0 < gains[2] < 2.0 and 1.0 < gains[3] < 4.0
    # the iteration grows by at most the time (durations and gaps) the script added, and, GPU-bound, by most of it
    for f in (2, 4):
        before, after = runs[f].baseline, runs[f].predicted
        added = sum(a["duration"] + a["gap"] for _, a in runs[f].graph.nodes(data=True)) - sum(
            a["duration"] + a["gap"] for _, a in graph.nodes(data=True)
        )
        grown = runs[f].predicted_us - base
        assert 0.8 * added < grown <= added + 1e-6, (f, before.period_us, after.period_us)
    # hta/nccl_parser_config_nccl_data: CPU-bound (DDP ResNet-50): the CPU does not scale, the GPU work stays hidden
    r = run_whatif(
        build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), context=False),
        ["batch_size"],
    )
    assert r.baseline_us <= r.predicted_us < 1.01 * r.baseline_us
    assert r.predicted.gpu_time_by_class["conv"] > 1.9 * r.baseline.gpu_time_by_class["conv"]
    assert r.predicted.gpu_time_by_class["comm"] == r.baseline.gpu_time_by_class["comm"]


# ---- grad_accumulation ------------------------------------------------------------------------------------------


def test_grad_accumulation_by_hand() -> None:
    # iteration(), k = 2: the forward/backward calls L1-L3 take 20 (L4 launches the all-reduce, L5 is the
    # optimizer's: 10 each), K1-K3 twice as long; the all-reduce, the optimizer kernel and the sync keep their time.
    # L1 [0,20] L2 [20,40] L3 [40,60] L4 [60,70] L5 [70,80]; K1 [22,222], K2 [222,262], K3 [262,662],
    # K4 [662,712], K5 [712,742], sync [742,745]. (Two real micro-steps: 12 + 2 x 320 + 50 + 30 + 3 = 735: the first
    # launch and the lags are stretched or paid once.)
    result = run(iteration(), "grad_accumulation", k=2)
    assert (result.baseline_us, result.predicted_us) == (415.0, pytest.approx(745.0))
    assert (result.samples, result.throughput) == (
        2,
        pytest.approx(2 * 415 / 745),
    )  # an optimizer step: 2 micro-batches
    # k = 3: L1-L3 30 each, L4 [90,100], L5 [100,110]; K1 [32,332], K2 [332,392], K3 [392,992], K4 [992,1042],
    # K5 [1042,1072], sync [1072,1075]
    assert predict(iteration(), "grad_accumulation", k=3) == (415.0, pytest.approx(1075.0))
    assert predict(iteration(), "grad_accumulation", k=1) == (415.0, 415.0)


def test_grad_accumulation_repeats_other_communication() -> None:
    g = iteration()
    (a2a,) = [n for n, a in g.nodes(data=True) if a["kind"] == "comm"]
    g.nodes[a2a]["collective"] = "alltoall"  # an exchange of every micro-step, not the gradient all-reduce
    # k = 2: the all-to-all (100) and its launch call L4 (20) stretch too: L1 [0,20] L2 [20,40] L3 [40,60] L4 [60,80]
    # L5 [80,90]; K1 [22,222], K2 [222,262], K3 [262,662], K4 [662,762], K5 [762,792], sync [792,795]
    assert predict(g, "grad_accumulation", k=2) == (415.0, pytest.approx(795.0))
    assert predict(g, "grad_accumulation", k=2, synced='["alltoall"]') == (415.0, pytest.approx(745.0))


def test_grad_accumulation_stretches_gaps_and_keeps_once_per_step_work() -> None:
    g = chain(("gemm", "gemm", 5, {}), ("copy_bucket", "copy", 20, {"top_op": REDUCER}))
    call = launch_of(g, kernel_named(g, "copy_bucket"))
    g.nodes[call]["top_op"] = REDUCER
    g.nodes[launch_of(g, kernel_named(g, "gemm"))]["gap"] = 5
    # baseline: L1 [0,10], gap 5, L2 [15,25]; gemm [12,17], copy [27,47] -> 47.
    # k = 2: L1 [0,20], gap 10, L2 [30,40] (DDP's reducer work runs once); gemm [22,32], copy [42,62] -> 62
    assert predict(g, "grad_accumulation", k=2) == (47.0, pytest.approx(62.0))
    # counted per micro-step (a regex no top_op matches): L2 [30,50], the copy 40: [52,92]
    assert predict(g, "grad_accumulation", k=2, once='"^$"') == (47.0, pytest.approx(92.0))


def test_grad_accumulation_on_a_real_ddp_trace(shared_traces: Path) -> None:
    # the step alone (context=False): its once-per-step tail is the end of the timeline
    graph = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), context=False)
    base = run_whatif(graph, ["grad_accumulation"], params={"k": 1})
    assert base.predicted_us == base.baseline_us
    B = base.baseline_us
    # the work that runs once per optimizer step: the baseline timeline from the optimizer step's range on (the weight
    # update before it, DDP's copies of the reduced gradients into .grad, waits for the last all-reduce to finish)
    t = simulate(graph)
    opt = [i for i in range(len(t.nodes)) if t.attrs(i)["phase"] == "optimizer" and t.attrs(i)["region"]]
    tail = float(t.end.max() - t.start[opt].min())
    assert 0 < tail < 0.1 * B
    gains = []
    for k in (2, 4, 8):
        r = run_whatif(graph, ["grad_accumulation"], params={"k": k})
        # each added micro-step costs at most the iteration less its once-per-step tail; edge delays (the handoffs
        # between the main and the autograd thread) are not stretched, so somewhat less
        assert 0.7 * (k - 1) * (B - tail) < r.predicted_us - B <= (k - 1) * (B - tail) * 1.001
        gains.append(k * B / r.predicted_us)
        # the gradient all-reduces run once, the forward pass's buffer broadcasts in every micro-step
        for name, times in (("AllReduce", 1), ("Broadcast", k)):
            before = sum(a["duration"] for _, a in graph.nodes(data=True) if a["kind"] == "comm" and name in a["name"])
            after = sum(a["duration"] for _, a in r.graph.nodes(data=True) if a["kind"] == "comm" and name in a["name"])
            assert after == pytest.approx(times * before) and before > 0
        assert r.predicted.gpu_time_by_class["optimizer"] == pytest.approx(r.baseline.gpu_time_by_class["optimizer"])
    # throughput gains grow with k; beyond amortizing the once-per-step tail (B / (B - tail)) only by the waits between
    # the main and the autograd thread, which are edge delays and run once (22 ms here): well under 1.2
    assert 1.0 < gains[0] < gains[1] < gains[2] < 1.2


# ---- activation_checkpointing -----------------------------------------------------------------------------------


def test_activation_checkpointing_by_hand() -> None:
    # iteration(): layer model.fc1 has the forward gemm K1 (100) and the backward gemm K3; model.act's relu K2 has no
    # backward kernel, so only K1 re-runs, before K3. Its launch call (the median forward launch 10 + median gap 0)
    # goes before K3's: L1 [0,10] L2 [10,20] L1' [20,30] L3 [30,40] L4 [40,50] L5 [50,60].
    # K1 [12,112], K2 [112,132], K1' [132,232], K3 [232,432], K4 [432,482], K5 [482,512], sync [512,515]
    result = run(iteration(), "activation_checkpointing", segment_cpu=0, op_cpu=0)
    assert (result.baseline_us, result.predicted_us) == (415.0, pytest.approx(515.0))
    assert gpu_order(result) == [
        "sm80_gemm_fwd",
        "relu_kernel",
        "sm80_gemm_fwd",
        "sm80_gemm_bwd",
        "multi_tensor_apply_adam",
    ]
    (copy,) = [a for _, a in result.graph.nodes(data=True) if a.get("recomputed") and a["kind"] == "gpu"]
    assert (copy["phase"], copy["layer"], copy["class"], copy["duration"]) == ("backward", "model.fc1", "gemm", 100)
    assert predict(iteration(), "activation_checkpointing", segment_cpu=0, op_cpu=0, layers="act") == (
        415.0,
        415.0,
    )  # no backward: no re-run
    # a 300 us re-run op on the CPU: L1' [20,320] delays L3 [320,330]: K1' [322,422], K3 [422,622], K4 [622,672],
    # K5 [672,702], sync [702,705]
    assert predict(iteration(), "activation_checkpointing", segment_cpu=0, op_cpu=0, cpu_per_kernel=300) == (
        415.0,
        pytest.approx(705.0),
    )
    # the checkpoint's own machinery runs on the backward's thread before the re-run's launch: 50 us [20,70] hides
    # behind the GPU (L1' [70,80], K1' still at 132); 150 us [20,170] does not: L1' [170,180], K1' [182,282],
    # K3 [282,482], K4 [482,532], K5 [532,562], sync [562,565]
    assert predict(iteration(), "activation_checkpointing", segment_cpu=50, op_cpu=0) == (415.0, pytest.approx(515.0))
    assert predict(iteration(), "activation_checkpointing", segment_cpu=150, op_cpu=0) == (415.0, pytest.approx(565.0))
    # per re-run op (one here): 100 + 50 = 150 us, as segment_cpu=150 alone
    assert predict(iteration(), "activation_checkpointing", segment_cpu=100, op_cpu=50) == (415.0, pytest.approx(565.0))


def test_activation_checkpointing_puts_each_segment_before_its_own_backward() -> None:
    g = chain(
        ("fc1_fwd", "gemm", 100, {"layer": "m.fc1"}),
        ("fc2_fwd", "gemm", 50, {"layer": "m.fc2"}),
        ("fc2_bwd", "gemm", 80, {"layer": "m.fc2"}),
        ("fc1_bwd", "gemm", 120, {"layer": "m.fc1"}),
    )
    for k in ("fc2_bwd", "fc1_bwd"):
        set_phase(g, k, "backward")
    # baseline: 12 + 100 + 50 + 80 + 120 = 362. Re-runs: fc2 (50) before fc2_bwd, fc1 (100) before fc1_bwd, their
    # calls (10 us) before L3 and L4: L1 [0,10] L2 [10,20] L2' [20,30] L3 [30,40] L1' [40,50] L4 [50,60];
    # fc1 [12,112], fc2 [112,162], fc2' [162,212], fc2_bwd [212,292], fc1' [292,392], fc1_bwd [392,512]
    result = run(g, "activation_checkpointing", segment_cpu=0, op_cpu=0)
    assert (result.baseline_us, result.predicted_us) == (362.0, pytest.approx(512.0))
    assert gpu_order(result) == ["fc1_fwd", "fc2_fwd", "fc2_fwd", "fc2_bwd", "fc1_fwd", "fc1_bwd"]
    assert predict(g, "activation_checkpointing", segment_cpu=0, op_cpu=0, layers="fc2$") == (
        362.0,
        pytest.approx(412.0),
    )  # fc2 only


def test_activation_checkpointing_without_layer_names_reruns_the_whole_forward() -> None:
    g = chain(("fwd1", "gemm", 100, {}), ("fwd2", "elementwise", 20, {}), ("bwd", "gemm", 200, {}))
    set_phase(g, "bwd", "backward")
    # baseline: fwd1 [12,112], fwd2 [112,132], bwd [132,332]. Both forward kernels re-run before bwd, their calls
    # (10 us) before L3: L3 [40,50]; fwd1' [132,232], fwd2' [232,252], bwd [252,452]
    result = run(g, "activation_checkpointing", segment_cpu=0, op_cpu=0)
    assert (result.baseline_us, result.predicted_us) == (332.0, pytest.approx(452.0))
    assert result.printed == [
        (
            "no layer names on the forward kernels: each step's segments are the blocks its forward pass repeats "
            "(repeats()), or the whole forward pass"
        ),
        (
            "the first step's forward pass repeats no blocks holding 0.5 of its time (repeat_share): the whole pass is"
            " the segment"
        ),
    ]
    assert gpu_order(result) == ["fwd1", "fwd2", "fwd1", "fwd2", "bwd"]
    assert predict(g, "activation_checkpointing", segment_cpu=0, op_cpu=0, layers="fc") == (
        332.0,
        332.0,
    )  # a regex needs layer names


def test_activation_checkpointing_without_layer_names_reruns_the_repeated_blocks() -> None:
    # an embedding, two blocks of (gemm A, relu B), a head and the loss: the blocks re-run, the rest does not
    g = chain(
        ("embedding", "other", 10, {}),
        ("gemm_a", "gemm", 100, {}),
        ("relu_b", "elementwise", 20, {}),
        ("gemm_a", "gemm", 100, {}),
        ("relu_b", "elementwise", 20, {}),
        ("head", "gemm", 30, {}),
        ("loss", "elementwise", 5, {}),
        ("bwd", "gemm", 200, {}),
    )
    set_phase(g, "bwd", "backward")
    # baseline: 12 + 10 + 240 + 35 + 200 = 497; the blocks' 240 us re-run before bwd (their four calls, 10 us each,
    # on the CPU long before): 737
    result = run(g, "activation_checkpointing", segment_cpu=0, op_cpu=0)
    assert (result.baseline_us, result.predicted_us) == (497.0, pytest.approx(737.0))
    # said once, with the blocks' share of the forward time: 240 / 285
    assert (
        result.printed[1]
        == "the first step's forward pass repeats 2 blocks holding 0.84 of its time: they are the segments"
    )
    assert sorted(
        a["name"] for _, a in result.graph.nodes(data=True) if a.get("recomputed") and a["kind"] == "gpu"
    ) == ["gemm_a", "gemm_a", "relu_b", "relu_b"]
    # one checkpoint call per block (two), or `segments` of them over both; machinery on the backward's CPU thread
    # before the re-runs' launches: 2 x 1000 us delays everything after it by 2000 - (the CPU's lead of the GPU)
    two = run(g, "activation_checkpointing", segment_cpu=1000, op_cpu=0)
    four = run(g, "activation_checkpointing", segment_cpu=1000, op_cpu=0, segments=4)
    machinery = [
        [a["duration"] for _, a in r.graph.nodes(data=True) if a["name"] == "checkpoint machinery"] for r in (two, four)
    ]
    assert machinery == [[1000.0, 1000.0], [2000.0, 2000.0]]
    # blocks that hold less than repeat_share of the forward time are not taken for the model's layers
    assert predict(g, "activation_checkpointing", segment_cpu=0, op_cpu=0, repeat_share=0.95) == (
        497.0,
        pytest.approx(497.0 + 285.0),
    )


def test_activation_checkpointing_on_a_gpu_bound_trace(shared_traces: Path) -> None:
    # resnet_kineto has no layer names: its blocks (the stretch of the forward pass that repeats) re-run at the start
    # of the backward pass; the stem before them and the classifier and loss after them do not (the step alone: what is
    # re-run is the step's, as the growth it is compared with)
    graph = build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"), context=False)
    forward = [
        v
        for u, v, d in graph.edges(data=True)
        if d["kind"] == "launch"
        and graph.nodes[u]["phase"] == "forward"
        and graph.nodes[v]["kind"] in ("gpu", "memset")
    ]
    r = run_whatif(graph, ["activation_checkpointing"])
    copies = [a for _, a in r.graph.nodes(data=True) if a.get("recomputed") and a["kind"] != "cpu"]
    assert 0.6 * len(forward) < len(copies) < len(forward) and len(forward) > 100
    left = Counter(graph.nodes[v]["name"] for v in forward)
    left.subtract(a["name"] for a in copies)
    assert min(left.values()) >= 0  # copies of forward kernels, each at most once
    # what is not re-run: the stem's convolution and pooling, the classifier's GEMM and the loss
    head = [graph.nodes[v]["name"] for v in forward if graph.nodes[v]["top_op"] in ("aten::linear", "aten::max_pool2d")]
    assert head and all(left[name] > 0 for name in head)
    whole = run_whatif(graph, ["activation_checkpointing"], {"repeat_share": 1.0})  # blocks not taken: the whole pass
    assert sorted(
        a["name"] for _, a in whole.graph.nodes(data=True) if a.get("recomputed") and a["kind"] != "cpu"
    ) == sorted(graph.nodes[v]["name"] for v in forward)
    redo = sum(a["duration"] for a in copies)
    calls = [a for _, a in r.graph.nodes(data=True) if a.get("recomputed") and a["kind"] == "cpu"]
    # GPU-bound: the iteration grows by about the re-run GPU time, never more than it plus the added CPU time
    assert 0.9 * redo < r.predicted_us - r.baseline_us <= redo + sum(a["duration"] for a in calls) + 1e-6
    # a recomputed forward is at most one more forward pass: below forward + backward + optimizer over their sum
    assert 1.0 < r.predicted_us / r.baseline_us < 1.5


def test_activation_checkpointing_by_layer_on_a_real_trace(shared_traces: Path) -> None:
    # dlrm8 rank 0 names two module paths (DDP's module and the model inside it): one segment each
    graph = build_graph(load_trace(shared_traces / "param" / "dlrm8" / "rank0.json.gz"))
    inner = run_whatif(graph, ["activation_checkpointing"], params={"layers": "/"})
    both = run_whatif(graph, ["activation_checkpointing"])
    assert both.baseline_us <= inner.predicted_us <= both.predicted_us and both.predicted_us > both.baseline_us

    def copies(r: WhatIf) -> list[str]:
        return sorted(a["layer"] for _, a in r.graph.nodes(data=True) if a.get("recomputed") and a["kind"] != "cpu")

    # the inner path's kernels only (6 of them, hidden behind the CPU-bound backward), then both paths' (63)
    assert set(copies(inner)) == {"DistributedDataParallel.forward/DistributedDataParallel.forward"}
    assert len(copies(inner)) < len(copies(both)) and set(copies(both)) > set(copies(inner))
    t = both.timeline
    for path in ("DistributedDataParallel.forward", "DistributedDataParallel.forward/DistributedDataParallel.forward"):
        rows = [
            i
            for i in range(len(t.nodes))
            if t.attrs(i)["layer"] == path
            and t.attrs(i)["phase"] == "backward"
            and t.attrs(i)["kind"] in ("gpu", "memset")
        ]
        redo = [i for i in rows if t.attrs(i).get("recomputed")]
        own = [i for i in rows if not t.attrs(i).get("recomputed")]
        assert redo and own and max(t.end[redo]) <= min(t.start[own]) + 1e-6, path
