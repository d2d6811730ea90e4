"""transforms/fsdp.whatif: fully sharded data parallel. Hand-built graphs with every time worked out by hand, and
real traces for direction and magnitude."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from whatif_graph import iteration

from daydream.api.whatif import WhatIf, run_whatif
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
CPU, AUTOGRAD, S7 = "cpu:1/1", "cpu:1/2", "gpu:0/7"
ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def model(layers: bool = True, gradients: bool = False) -> nx.DiGraph:
    """Two layers a and b of two 50 us kernels each, forward then backward (b first), then a 40 us optimizer kernel.

    One CPU thread launches the nine kernels onto stream 7 (calls 10 us, no gaps, launch lag 2, stream gap 0):
    L1..L9 [0,10] .. [80,90]; Fa1 [12,62] Fa2 [62,112] Fb1 [112,162] Fb2 [162,212] | Bb1 [212,262] Bb2 [262,312]
    Ba1 [312,362] Ba2 [362,412] | O [412,452]: 452 us. With ``gradients``, two AccumulateGrad calls that launch
    nothing, on the autograd thread, record b's gradient (30,000 fp32: 120 kB) once Bb2 is launched (at 60 us) and
    a's (10,000: 40 kB) once Ba2 is (at 80 us)."""
    g = nx.DiGraph()
    g.graph.update(measured_us=452.0, delays=Delays(2.0, 0.0))
    specs = [
        ("Fa1", "forward", "a"),
        ("Fa2", "forward", "a"),
        ("Fb1", "forward", "b"),
        ("Fb2", "forward", "b"),
        ("Bb1", "backward", "b"),
        ("Bb2", "backward", "b"),
        ("Ba1", "backward", "a"),
        ("Ba2", "backward", "a"),
        ("O", "optimizer", None),
    ]
    prev_call = prev_kernel = None
    for i, (name, phase, layer) in enumerate(specs):
        attrs = {"step": "s", "phase": phase, "layer": layer if layers else None}
        if phase == "optimizer":
            attrs["region"] = "Optimizer.step#SGD.step"
        call = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=10.0 * i, **attrs)
        k = add_task(
            g,
            name,
            "gpu",
            S7,
            40 if name == "O" else 50,
            start=12.0 + 50 * i,
            stream=7,
            **{"class": "optimizer" if name == "O" else "gemm", **attrs},
        )
        add_dependency(g, call, k, "launch", lag=2)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
            add_dependency(g, prev_kernel, k, "stream")
        prev_call, prev_kernel = call, k
    if gradients:
        b = add_task(
            g, ACC, "cpu", AUTOGRAD, 10, start=60.0, step="s", phase="backward", op=ACC, top_op_id=1, shapes=[[30000]]
        )
        a = add_task(
            g, ACC, "cpu", AUTOGRAD, 10, start=80.0, step="s", phase="backward", op=ACC, top_op_id=2, shapes=[[10000]]
        )
        add_dependency(g, b, a, "thread")
    return g


def fsdp(graph: nx.DiGraph, **params: object) -> WhatIf:
    result = run_whatif(graph, [TRANSFORMS / "fsdp.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def test_fsdp_by_hand_one_layer_per_unit() -> None:
    # 2 ranks over 1 GB/s (1e3 bytes/us, no latency); 160 kB of parameters, 80 kB per unit: an all-gather or a
    # reduce-scatter takes (2-1)/2 x 80e3 / 1e3 = 40 us. The optimizer kernel updates half the parameters: 20 us.
    # Inserted, each with a 5 us launch call (the graph has no comm launches to take a median from):
    #   AG0 before Fa1 (its call C0 before L1), AG1 after Fa1 (C1 after L1), AG2 after Fb1 (C2 after L3),
    #   AG3 after Bb1 (C3 after L5); Fb1, Bb1, Ba1 wait for AG1, AG2, AG3; RSb after Bb2 (C4 after L6), RSa after
    #   Ba2 (C5 after L8); O waits for RSa. Stream 1000 in that order.
    # CPU: C0 [0,5] L1 [5,15] C1 [15,20] L2 [20,30] L3 [30,40] C2 [40,45] L4 [45,55] L5 [55,65] C3 [65,70]
    #      L6 [70,80] C4 [80,85] L7 [85,95] L8 [95,105] C5 [105,110] L9 [110,120]
    # AG0 [7,47]; Fa1 [47,97]; AG1 [97,137]; Fa2 [97,147]; Fb1 [147,197]; AG2 [197,237]; Fb2 [197,247];
    # Bb1 [247,297]; AG3 [297,337]; Bb2 [297,347]; RSb [347,387]; Ba1 [347,397]; Ba2 [397,447]; RSa [447,487];
    # O [487,507]: 507 us.
    r = fsdp(model(), ranks=2, link=1, model_bytes=160e3)
    assert (r.baseline_us, r.predicted_us) == (452.0, pytest.approx(507.0))
    comm = sorted((a["start"], a["name"], a["bytes"]) for _, a in r.graph.nodes(data=True) if a["kind"] == "comm")
    assert [c[1] for c in comm] == ["ncclAllGather (FSDP)"] * 4 + ["ncclReduceScatter (FSDP)"] * 2
    assert {c[2] for c in comm} == {80e3}
    # a trace without layers, cut into 2 units of equal kernel counts, is the same model
    assert fsdp(model(layers=False), ranks=2, link=1, model_bytes=160e3, units=2).predicted_us == pytest.approx(507.0)
    assert fsdp(model(), ranks=1, model_bytes=160e3).predicted_us == 452.0  # one rank: nothing to shard


def test_fsdp_by_hand_two_layers_per_unit() -> None:
    # unit = 2: one unit of 160 kB, 80 us per collective. AG0 before Fa1 (C0 before L1), the backward's AG1 after
    # Fa1 (C1 after L1), Bb1 waits for it; RS after Ba2 (C2 after L8).
    # CPU: C0 [0,5] L1 [5,15] C1 [15,20] L2 [20,30] ... L8 [80,90] C2 [90,95] L9 [95,105]
    # AG0 [7,87]; Fa1 [87,137]; AG1 [137,217]; Fa2 .. Fb2 [137,287]; Bb1 [287,337] .. Ba2 [437,487];
    # RS [487,567]; O [567,587]: 587 us
    assert fsdp(model(), ranks=2, link=1, model_bytes=160e3, unit=2).predicted_us == pytest.approx(587.0)


def test_fsdp_by_hand_sizes_units_from_their_gradients() -> None:
    # The recorded gradients: b's 120 kB (ready once Bb2 is launched), a's 40 kB (once Ba2 is): a's collectives take
    # 20 us, b's 60 us (model_bytes is not needed). Same inserts and CPU times as with one layer per unit:
    # AG0 (a) [7,27]; Fa1 [27,77]; AG1 (b) [77,137]; Fa2 [77,127]; Fb1 [137,187]; AG2 (b) [187,247];
    # Fb2 [187,237]; Bb1 [247,297]; AG3 (a) [297,317]; Bb2 [297,347]; RSb [347,407]; Ba1 [347,397];
    # Ba2 [397,447]; RSa [447,467]; O [467,487]: 487 us
    r = fsdp(model(gradients=True), ranks=2, link=1)
    assert r.predicted_us == pytest.approx(487.0)
    gathered = [
        a["bytes"]
        for _, a in sorted(r.graph.nodes(data=True), key=lambda x: x[1]["start"])
        if a["name"] == "ncclAllGather (FSDP)"
    ]
    assert gathered == [40e3, 120e3, 120e3, 40e3]


def test_fsdp_by_hand_replaces_a_traced_all_reduce() -> None:
    # whatif_graph.iteration(): layers fc1 (K1 forward, K3 backward) and act (K2), a traced 4 MB all-reduce, no
    # recorded gradients: its 4 MB spread over the 2 units, 2 MB each; 2 ranks over 100 GB/s: 10 us per collective.
    # The all-reduce goes (its launch call stays); inserted launch calls take 10 us (the median of the graph's comm
    # launches): C0 before L1, C1 after L1, C2 after L2 (AG1 after K1, AG2 after K2: fc1's backward), C3 after L3.
    # CPU: C0 [0,10] L1 [10,20] C1 [20,30] L2 [30,40] C2 [40,50] L3 [50,60] C3 [60,70] L4 [70,80] L5 [80,90]
    # AG0 [12,22]; K1 [22,122]; AG1 [122,132]; K2 [132,152]; AG2 [152,162]; K3 [162,362]; RS [362,372];
    # adam (no Optimizer.step range: the optimizer kernel after the backward) waits for RS, half of 30 us:
    # [372,387]; the sync [387,390]
    r = fsdp(iteration(), ranks=2, link=100)
    assert (r.baseline_us, r.predicted_us) == (415.0, pytest.approx(390.0))
    names = sorted(a["name"] for _, a in r.graph.nodes(data=True) if a["kind"] == "comm")
    assert names == ["ncclAllGather (FSDP)"] * 3 + ["ncclReduceScatter (FSDP)"]


def comm_us(result: WhatIf) -> float:
    return sum(a["duration"] for _, a in result.graph.nodes(data=True) if "(FSDP)" in a["name"])


def update_us(graph: nx.DiGraph) -> float:
    return sum(
        a["duration"]
        for _, a in graph.nodes(data=True)
        if a["kind"] == "gpu" and (a["region"] or "").startswith("Optimizer.step")
    )


def test_fsdp_on_a_real_trace_with_gradient_sizes(shared_traces: Path) -> None:
    path = shared_traces / "param" / "linear_kineto.json.gz"
    graph = build_graph(load_trace(path, et=shared_traces / "param" / "linear_et.json.gz"), 1, context=False)
    base = run_whatif(graph, ["fsdp"], params={"ranks": 1})
    assert base.predicted_us == base.baseline_us
    runs = [
        run_whatif(graph, ["fsdp"], params={"link": f'"{link}"'}) for link in ["nvlink3", "pcie4", "eth-25g", "eth-10g"]
    ]
    times = [r.predicted_us for r in runs]
    assert times == sorted(times)
    # 21 layers x (4 MiB + 4 KiB) of fp32 parameters, in 8 units: 16 all-gathers and 8 reduce-scatters
    added = [a for _, a in runs[0].graph.nodes(data=True) if "(FSDP)" in a["name"]]
    assert len(added) == 24 and sum(a["bytes"] for a in added) == pytest.approx(3 * 21 * (4 * 2**20 + 4096))
    saved = update_us(graph) * (1 - 1 / 8)  # the update of one shard of 8
    for r in runs:
        # no better than the baseline less the sharded update, no worse than all of the added work serialized
        # (the collectives, and a launch call of at most 10 us each)
        assert r.baseline_us - saved - 1e-6 <= r.predicted_us <= r.baseline_us + comm_us(r) + 24 * 10
        # the collectives share one stream: the iteration lasts at least as long as all of them
        assert r.predicted_us >= comm_us(r)
    assert runs[0].speedup > 0.9  # over NVLink the collectives hide behind this CPU-bound iteration
    assert runs[-1].speedup < 0.2  # over 10 GbE ~260 MB of collectives take ~200 ms


def test_fsdp_replaces_the_traced_ddp_all_reduces(shared_traces: Path) -> None:
    r = run_whatif(
        build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"), context=False), ["fsdp"]
    )
    comm = [a for _, a in r.graph.nodes(data=True) if a["kind"] == "comm"]
    assert not [a for a in comm if a["collective"] == "allreduce"]
    added = [a for a in comm if "(FSDP)" in a["name"]]
    # no gradient sizes here: the 5 DDP buckets' 102.2 MB spread over 8 units
    assert len(added) == 24 and sum(a["bytes"] for a in added) == pytest.approx(3 * 102_228_128)
    # a CPU-bound iteration (218 ms): the 1.5 ms of collectives and 24 launch calls change it by little
    assert abs(r.predicted_us - r.baseline_us) <= comm_us(r) + 24 * 10 and r.predicted_us != r.baseline_us


def test_fsdp_without_parameter_sizes_estimates_them_or_takes_them(shared_traces: Path) -> None:
    path = shared_traces / "param" / "resnet_kineto.json.gz"
    graph = build_graph(load_trace(path))
    # no shapes on its ops: the sizes are estimated (its fused optimizer's kernels), said, and widen the interval
    estimated = run_whatif(graph, ["fsdp"])
    assert any(p.name == "gradient sizes" and p.extrapolated for p in estimated.interval.parts)
    assert any("estimated from the optimizer's fused kernels" in line for line in estimated.printed)
    # given the size (ResNet-18: 11.7M fp32 parameters, 46.8 MB), the prediction grows with it; at most the update
    # of one shard of 8 is saved
    small, large = (run_whatif(graph, ["fsdp"], params={"model_bytes": b}) for b in (1e6, 46.8e6))
    assert small.baseline_us - update_us(graph) * (1 - 1 / 8) - 1e-6 <= small.predicted_us < large.predicted_us
