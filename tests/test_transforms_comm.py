"""Communication transforms (transforms/dgc.whatif, transforms/blueconnect.whatif): hand-built graphs with times
worked out by hand, and real traces for direction and magnitude."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from whatif_graph import CPU, S7, S20, iteration

from daydream.api.demo import bundled_example
from daydream.api.whatif import WhatIf, run_whatif
from daydream.dsl.parse import parse_script
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
DGC = TRANSFORMS / "dgc.whatif"
BLUECONNECT = TRANSFORMS / "blueconnect.whatif"


def run(graph: nx.DiGraph, scripts: list[str | Path], **params: object) -> WhatIf:
    result = run_whatif(graph, scripts, params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def tasks(result: WhatIf, name: str) -> list[tuple[int, dict[str, object]]]:
    return sorted((v, a) for v, a in result.graph.nodes(data=True) if a["name"] == name)


# ---- dgc ------------------------------------------------------------------------------------------------------


def a100_iteration() -> nx.DiGraph:
    g = iteration()
    g.graph["device"] = "NVIDIA A100-SXM4-40GB"  # HBM 1555 GB/s in the device catalog
    return g


# A d2d copy of the 4 MB bucket on the A100: read and write, 2 x 4e6 B / 1555e3 B/us
COPY = 2 * 4e6 / 1555e3
COMPRESS, DECOMPRESS = 3 * COPY, 1 * COPY  # the default costs: 15.434 us and 5.145 us


def test_dgc_by_hand() -> None:
    # iteration(): K1 [12,112], K2 [112,132], K3 [132,332], all-reduce K4 (4 MB, traced 50 us, waits for K3) on
    # stream 20, adam K5 waits for it, the host sync S for K5: 415 us.
    # DGC: the compression kernel C goes right after K3 on stream 7, the all-reduce waits for it; K4 shrinks 500x
    # (no link: the traced time scaled, 50 -> 0.1 us); the decompression D follows K4 on stream 20 and adam waits
    # for it. Launch calls (10 us each): Lc after K3's launch L3, Ld after K4's launch L4; the CPU stays ahead.
    # C [332, 332 + 15.434], K4 [.., + 0.1], D [.., + 5.145], K5 [.., + 30], S [.., + 3] = 365 + C + D + 0.1
    r = run(a100_iteration(), [DGC])
    assert (r.baseline_us, r.predicted_us) == (415.0, pytest.approx(365 + COMPRESS + DECOMPRESS + 0.1))
    ((c, ca),) = tasks(r, "dgc_compress")
    ((d, da),) = tasks(r, "dgc_decompress")
    ((k4, k4a),) = tasks(r, "ncclAllReduce")
    ((k5, _),) = tasks(r, "multi_tensor_apply_adam")
    assert (ca["thread"], da["thread"]) == (S7, S20) and ca["bytes"] == da["bytes"] == 4_000_000
    assert k4a["bytes"] == 8000 and r.graph.has_edge(c, k4) and r.graph.has_edge(k4, d) and r.graph.has_edge(d, k5)
    assert r.timeline.end[k4] == pytest.approx(332 + COMPRESS + 0.1)
    # with a link the compressed 8 KB message is re-priced: 2 x 7/8 x 8000 B / 1e5 B/us (100 GB/s, no latency) = 0.14
    r = run(a100_iteration(), [DGC], link=100, ranks=8)
    assert r.predicted_us == pytest.approx(365 + COMPRESS + DECOMPRESS + 0.14)
    # DGC's own exchange, an all-gather of every rank's 8 KB: 7/8 x 64000 / 1e5 = 0.56 us; scaled instead, the traced
    # 50 us times ranks / (2 ratio) = 8 / 1000: 0.4 us
    assert run(a100_iteration(), [DGC], link=100, ranks=8, exchange="allgather").predicted_us == pytest.approx(
        365 + COMPRESS + DECOMPRESS + 0.56
    )
    assert run(a100_iteration(), [DGC], ranks=8, exchange="allgather").predicted_us == pytest.approx(
        365 + COMPRESS + DECOMPRESS + 0.4
    )
    # heavier compression kernels, a ratio of 10: 365 + 6 copies + 2 copies + 5 us
    assert run(a100_iteration(), [DGC], ratio=10, compress_cost=6, decompress_cost=2).predicted_us == pytest.approx(
        365 + 8 * COPY + 5
    )
    # neutral: no compression, no kernels -> the baseline exactly
    assert run(a100_iteration(), [DGC], ratio=1, compress_cost=0, decompress_cost=0).predicted_us == 415.0
    # re-pricing needs the job's size: the graph has no distributed info
    with pytest.raises(DaydreamError, match="give -p ranks=N"):
        run(a100_iteration(), [DGC], link=100)


def test_dgc_compresses_before_an_all_reduce_that_waits_for_no_kernel() -> None:
    # Without the K3 -> K4 edge the all-reduce waits for no kernel: the compression goes onto the busiest compute
    # stream (7: 350 us of kernels) at the all-reduce's traced start (332), i.e. after K3, and K4 waits for it;
    # the same times as above. Its launch call goes before K4's.
    g = a100_iteration()
    k3, k4 = (next(v for v, a in g.nodes(data=True) if a["name"] == n) for n in ("sm80_gemm_bwd", "ncclAllReduce"))
    g.remove_edge(k3, k4)
    r = run(g, [DGC])
    assert r.predicted_us == pytest.approx(365 + COMPRESS + DECOMPRESS + 0.1)
    ((c, ca),) = tasks(r, "dgc_compress")
    assert ca["thread"] == S7 and r.graph.has_edge(k3, c) and r.graph.has_edge(c, k4)


# ---- blueconnect ----------------------------------------------------------------------------------------------


def two_buckets() -> nx.DiGraph:
    """One CPU thread (calls 10 us, launch lag 2): K1 gemm 100 us on stream 7, its all-reduce AR1 (8 MB) on stream
    20, K2 gemm 100 us, AR2 (8 MB), the optimizer KO 30 us (waits for AR2), a host sync S 3 us (waits for KO).

    cpu  L1[0,10] L2[10,20] L3[20,30] L4[30,40] L5[40,50]                      S[292,295]
    s7       K1[12,112] K2[112,212]                      KO[262,292]
    s20                  AR1[112,162] AR2[212,262]
    """
    g = nx.DiGraph()
    g.graph.update(measured_us=295.0, delays=Delays(2.0, 0.0), steps=[])
    specs = [
        ("K1", "gemm", S7, 100, 12),
        ("AR1", "comm", S20, 50, 112),
        ("K2", "gemm", S7, 100, 112),
        ("AR2", "comm", S20, 50, 212),
        ("KO", "optimizer", S7, 30, 262),
    ]
    ids, prev_call, prev_on = {}, None, {}
    for i, (name, cls, thread, dur, start) in enumerate(specs):
        call = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=10.0 * i, step="s", phase="backward")
        kind = "comm" if cls == "comm" else "gpu"
        attrs = {"class": cls, "stream": int(thread.rsplit("/", 1)[1])}
        if kind == "comm":
            attrs.update(bytes=8_000_000, collective="allreduce")
        k = add_task(g, name, kind, thread, dur, start=float(start), step="s", phase="backward", **attrs)
        add_dependency(g, call, k, "launch", lag=2)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
        if thread in prev_on:
            add_dependency(g, prev_on[thread], k, "stream")
        prev_call, prev_on[thread], ids[name] = call, k, k
    add_dependency(g, ids["K1"], ids["AR1"], "comm")
    add_dependency(g, ids["K2"], ids["AR2"], "comm")
    add_dependency(g, ids["AR2"], ids["KO"], "sync")
    sync = add_task(g, "cudaDeviceSynchronize", "cpu", CPU, 3, start=50.0, step="s", phase="optimizer")
    add_dependency(g, prev_call, sync, "thread")
    add_dependency(g, ids["KO"], sync, "sync")
    return g


# 16 ranks, 8 to a node (2 nodes); intra-node 100 GB/s (1e5 B/us), inter-node 10 GB/s (1e4 B/us), numbers: no latency
HIER = {"ranks": 16, "gpus_per_node": 8, "intra": 100, "inter": 10}


def test_blueconnect_by_hand() -> None:
    g = two_buckets()
    # flat ring over the inter-node link (`network`): 2 x 15/16 x 8e6 / 1e4 = 1500 us per all-reduce:
    # AR1 [112, 1612], AR2 [1612, 3112], KO [3112, 3142], S [3142, 3145]
    flat = run(g, ["network"], link=10, ranks=16)
    assert (flat.baseline_us, flat.predicted_us) == (295.0, pytest.approx(3145.0))
    # BlueConnect: reduce-scatter 7/8 x 8e6 / 1e5 = 70 us (stream 1001), inter-node all-reduce of 1/8 by the 8 GPUs
    # of a node sharing one link: 2 x 1/2 x 8e6 / 1e4 = 800 us (stream 20), all-gather 70 us (stream 1002).
    # CPU: each stage's launch call (10 us) next to its all-reduce's: L1 Lrs1 L2 Lag1 L3 Lrs2 L4 Lag2 L5, ahead.
    # RS1 [112,182] (K1), AR1 [182,982], AG1 [982,1052]; RS2 [212,282] (K2: overlaps AR1), AR2 [982,1782],
    # AG2 [1782,1852]; KO waits for AG2 [1852,1882]; S [1882,1885]
    r = run(g, [BLUECONNECT], **HIER)
    assert r.predicted_us == pytest.approx(1885.0)
    assert [a["thread"] for _, a in tasks(r, "ncclReduceScatter (BlueConnect intra)")] == ["gpu:0/1001"] * 2
    assert [a["bytes"] for _, a in tasks(r, "ncclAllGather (BlueConnect intra)")] == [8_000_000] * 2
    assert sorted(a["bytes"] for _, a in r.graph.nodes(data=True) if a["name"] in ("AR1", "AR2")) == [1e6, 1e6]
    # one link per GPU: the inter-node all-reduce moves 1/8 of the bytes: 100 us. RS1 [112,182], AR1 [182,282],
    # AG1 [282,352]; RS2 [212,282], AR2 [282,382], AG2 [382,452]; KO [452,482], S [482,485]
    assert run(g, [BLUECONNECT], nics_per_node=8, **HIER).predicted_us == pytest.approx(485.0)
    # one intra-node channel for both stages: RS2 queues behind AG1 [982,1052]: RS2 [1052,1122], AR2 [1122,1922],
    # AG2 [1922,1992], KO [1992,2022], S [2022,2025]
    assert run(g, [BLUECONNECT], ag_stream=1001, **HIER).predicted_us == pytest.approx(2025.0)
    # one GPU per node: the flat ring over the inter-node link, exactly as `network` prices it
    assert run(g, [BLUECONNECT], **{**HIER, "gpus_per_node": 1}).predicted_us == pytest.approx(flat.predicted_us)
    with pytest.raises(DaydreamError, match="must divide ranks"):
        run(g, [BLUECONNECT], **{**HIER, "gpus_per_node": 6})


@pytest.mark.parametrize("script", [DGC, BLUECONNECT])
def test_runs_on_the_bundled_example_from_the_cli(script: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "run", bundled_example(), str(script), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["predicted_us"] == d["baseline_us"] > 0  # a CPU-only trace: no all-reduce to change


# ---- real traces ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def linear_step1() -> nx.DiGraph:
    from conftest import SHARED_TRACES

    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available: {SHARED_TRACES} is absent")
    path = SHARED_TRACES / "param"
    return build_graph(load_trace(path / "linear_kineto.json.gz", et=path / "linear_et.json.gz"), 1, context=False)


@pytest.fixture(scope="module")
def nccl_parser() -> nx.DiGraph:
    from conftest import SHARED_TRACES

    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available: {SHARED_TRACES} is absent")
    return build_graph(load_trace(SHARED_TRACES / "hta" / "nccl_parser_config_nccl_data.json.gz"), context=False)


def test_dgc_after_ddp_on_a_real_trace(shared_traces: Path, linear_step1: nx.DiGraph) -> None:
    # DDP on 8 ranks over 10 GbE (4 buckets, 88 MB): the all-reduces dominate; DGC brings the step back toward the
    # one-GPU iteration, which it cannot beat (compute unchanged, kernels added)
    net = {"link": "eth-10g", "ranks": 8}
    ddp = run(linear_step1, ["ddp"], **net).predicted_us
    assert ddp > 5 * run(linear_step1, ["ddp"], **net).baseline_us
    times = [run(linear_step1, ["ddp", DGC], ratio=ratio, **net) for ratio in (10, 100, 500)]
    assert all(t.baseline_us <= t.predicted_us < ddp for t in times)
    assert [t.predicted_us for t in times] == sorted((t.predicted_us for t in times), reverse=True)
    assert times[0].predicted_us < ddp / 5  # 10x fewer bytes on a bandwidth-bound link
    # all-gathering 8 ranks' sparse gradients moves 4x the bytes of all-reducing them
    gather = run(linear_step1, ["ddp", DGC], ratio=10, exchange="allgather", **net).predicted_us
    assert times[0].predicted_us < gather < ddp
    # neutral: no compression and no kernels is DDP alone
    same = run(linear_step1, ["ddp", DGC], ratio=1, compress_cost=0, decompress_cost=0, **net).predicted_us
    assert same == pytest.approx(ddp)


def test_dgc_on_a_traced_ddp_job(shared_traces: Path, nccl_parser: nx.DiGraph) -> None:
    # The traced A100 DDP job: 5 all-reduces (102 MB), hidden behind a CPU-bound iteration: DGC shrinks them 500x
    # and adds 4 copies of every bucket as kernels, and the iteration barely moves
    r = run(nccl_parser, [DGC])
    base, pred = r.baseline.gpu_time_by_class, r.predicted.gpu_time_by_class
    reduces = [a for _, a in nccl_parser.nodes(data=True) if a["kind"] == "comm" and a["collective"] == "allreduce"]
    traced = sum(a["duration"] for a in reduces)
    dense = sum(a["bytes"] for a in reduces)
    assert len(reduces) == 5 and pred["comm"] == pytest.approx(base["comm"] - traced + traced / 500)
    assert pred["elementwise"] - base["elementwise"] == pytest.approx(4 * 2 * dense / 1555e3)
    assert r.predicted_us == pytest.approx(r.baseline_us, rel=0.01)
    # the same job on 16 ranks over 10 GbE: the re-priced flat all-reduces (`network`) outlast the iteration; DGC
    # hides them again
    net = {"link": "eth-10g", "ranks": 16}
    flat = run(nccl_parser, ["network"], **net).predicted_us
    compressed = run(nccl_parser, ["network", DGC], **net).predicted_us
    assert flat > 1.2 * r.baseline_us and compressed < flat and compressed == pytest.approx(r.baseline_us, rel=0.01)


def test_blueconnect_against_the_flat_ring_on_a_real_trace(shared_traces: Path, linear_step1: nx.DiGraph) -> None:
    # DDP on 16 ranks over 10 GbE; the flat ring (`network` over eth-10g) against BlueConnect over NVLink3 inside
    # 8-GPU nodes and eth-10g between them
    net = {"link": "eth-10g", "ranks": 16}
    flat = run(linear_step1, ["ddp", "network"], **net)
    # ddp prices a flat ring on one node of 16 (on two nodes of 8 it takes NCCL's hierarchical all-reduce)
    assert flat.predicted_us == pytest.approx(run(linear_step1, ["ddp"], gpus_per_node=16, **net).predicted_us)
    assert run(linear_step1, ["ddp"], **net).predicted_us < flat.predicted_us
    hier = {"inter": "eth-10g", "intra": "nvlink3"}
    times = [run(linear_step1, ["ddp", BLUECONNECT], gpus_per_node=g, **hier, **net).predicted_us for g in (1, 2, 4, 8)]
    assert times[0] == pytest.approx(flat.predicted_us)  # one GPU per node: the flat ring
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    # 8 per node: a node sends 2(m-1)/m = 1 x the bytes where the flat ring sends 2(n-1)/n = 1.875 x: at most that
    # gain, and still slower than the one-GPU iteration
    assert flat.baseline_us < times[-1] < flat.predicted_us and times[-1] > flat.predicted_us / 1.875
    # a NIC per GPU: faster still
    assert (
        run(linear_step1, ["ddp", BLUECONNECT], gpus_per_node=8, nics_per_node=8, **hier, **net).predicted_us
        < times[-1]
    )


def test_blueconnect_on_a_traced_ddp_job(shared_traces: Path, nccl_parser: nx.DiGraph) -> None:
    # 16 ranks over 10 GbE: the flat ring's all-reduces end after the traced iteration; BlueConnect's within it
    net = {"ranks": 16}
    flat = run(nccl_parser, ["network"], link="eth-10g", **net)
    hier = run(nccl_parser, [BLUECONNECT], inter="eth-10g", **net)
    assert flat.predicted_us > 1.2 * flat.baseline_us
    assert (
        hier.predicted_us < flat.predicted_us
        and hier.predicted.gpu_time_by_class["comm"] < flat.predicted.gpu_time_by_class["comm"] / 1.5
    )
    # the trace's own 2 ranks (the default) in one node: only the NVLink stages
    default = run(nccl_parser, [BLUECONNECT])
    assert default.printed == ["blueconnect: 5 all-reduces over 1 nodes of 2 GPUs"]
    assert default.predicted.gpu_time_by_class["comm"] < default.baseline.gpu_time_by_class["comm"]


# ---- scale_out ------------------------------------------------------------------------------------------------

SCALE_OUT = TRANSFORMS / "scale_out.whatif"
NODES = {"gpus_per_node": 8, "intra": 100, "inter": 10}  # numbers: bus GB/s, no latency


def test_scale_out_by_hand() -> None:
    # 16 ranks on 2 nodes, 8 NICs each (80 GB/s a node): an 8 MB all-reduce as a ring, 1.875 x 8e6 / 8e4 = 187.5 us;
    # hierarchically, max(1.75 x 8e6 / 1e5 = 140 within a node, 1 x 8e6 / 8e4 = 100 between nodes) = 140: the faster.
    # AR1 [112,252], AR2 [252,392], KO [392,422], S [422,425]
    r = run(two_buckets(), [SCALE_OUT], ranks=16, **NODES)
    assert r.predicted_us == pytest.approx(425.0)
    assert [a["duration"] for _, a in tasks(r, "AR1") + tasks(r, "AR2")] == pytest.approx([140.0, 140.0])
    assert r.printed[-1] == "2 nodes of 8 GPUs joined by 100 ; between nodes 8 x 10"
    # one NIC a node (10 GB/s): the tree's 8e6 / 1e4 = 800 us beats the ring's 1500; AR2 ends at 1712, S at 1745
    assert run(two_buckets(), [SCALE_OUT], ranks=16, nics_per_node=1, **NODES).predicted_us == pytest.approx(1745.0)
    # 4 ranks in one node: the ring over NVLink, 1.5 x 8e6 / 1e5 = 120 us each; S at 385
    assert run(two_buckets(), [SCALE_OUT], ranks=4, **NODES).predicted_us == pytest.approx(385.0)
    # one rank: nothing to exchange; AR1 and AR2 take no time, KO [212,242], S [242,245]
    assert run(two_buckets(), [SCALE_OUT], ranks=1, **NODES).predicted_us == pytest.approx(245.0)


def test_scale_out_keeps_a_smaller_process_group() -> None:
    # a job of 16 where AR1 is a 4-rank group's (tensor parallel, within a node): it keeps 4 ranks (120 us), AR2 the
    # world's goes to 64 ranks on 8 nodes: tree max(140, 2 x 7/8 x 8e6 / 8e4 = 175) = 175, ring 1.96875 x 100 = 196.9
    # AR1 [112,232], AR2 [232,407], KO [407,437], S [437,440]
    g = two_buckets()
    g.graph["world_size"] = 16
    ar1 = next(n for n, a in g.nodes(data=True) if a["name"] == "AR1")
    g.nodes[ar1]["group_size"] = 4
    r = run(g, [SCALE_OUT], ranks=64, **NODES)
    assert [a["duration"] for _, a in tasks(r, "AR1") + tasks(r, "AR2")] == pytest.approx([120.0, 175.0])
    assert r.predicted_us == pytest.approx(440.0)


def test_scale_out_of_a_one_gpu_trace_is_ddp(shared_traces: Path, linear_step1: nx.DiGraph) -> None:
    # no collective in the trace: the buckets ddp inserts, priced on the same topology
    scaled = run(linear_step1, [SCALE_OUT], ranks=32, intra="nvlink3", inter="ib-hdr")
    ddp = run(linear_step1, ["ddp"], ranks=32, link="nvlink3", inter="ib-hdr")
    assert scaled.predicted_us == pytest.approx(ddp.predicted_us) and scaled.predicted_us > scaled.baseline_us
    assert scaled.printed[0] == "from 1 to 32 ranks: DDP's gradient all-reduces inserted"
    # the trace is an RTX 2080 Ti's, whose NVLink bridge joins two cards: "auto" is PCIe 3 in a node of 8, the
    # bridge in a node of 2
    auto = {"ranks": 32, "inter": "ib-hdr"}
    assert run(linear_step1, [SCALE_OUT], **auto).predicted_us == pytest.approx(
        run(linear_step1, [SCALE_OUT], intra="pcie3", **auto).predicted_us
    )
    pairs = run(linear_step1, [SCALE_OUT], gpus_per_node=2, **auto)
    assert pairs.printed[-1] == "16 nodes of 2 GPUs joined by rtx-2080-ti link ; between nodes 2 x ib-hdr"


def test_scale_out_of_a_traced_ddp_rank(shared_traces: Path, nccl_parser: nx.DiGraph) -> None:
    # rank 0 of 2 (A100, NVLink3): its 5 all-reduces and 2 broadcasts re-priced; more nodes, longer collectives,
    # a slower network longer still
    comm = [run(nccl_parser, [SCALE_OUT], ranks=n).predicted.gpu_time_by_class["comm"] for n in (2, 8, 16, 256)]
    assert comm == sorted(comm) and len(set(comm)) == 4
    slow = run(nccl_parser, [SCALE_OUT], ranks=256, inter="eth-25g").predicted.gpu_time_by_class["comm"]
    assert slow > 5 * comm[-1]
    assert run(nccl_parser, [SCALE_OUT], ranks=16).printed == [
        "from 2 to 16 ranks",
        "2 nodes of 8 GPUs joined by nvlink3 ; between nodes 8 x ib-ndr",
    ]


def test_ddp_on_a_trace_recorded_with_ddp_re_prices_its_collectives(
    shared_traces: Path, nccl_parser: nx.DiGraph
) -> None:
    # the trace holds DDP's all-reduces already: ddp re-prices them as scale_out does (inserting buckets on top of
    # them would count the gradients twice)
    for n in (8, 32):
        ddp = run(nccl_parser, ["ddp"], ranks=n, link="nvlink3")
        assert ddp.predicted_us == run(nccl_parser, [SCALE_OUT], ranks=n, intra="nvlink3").predicted_us
        assert ddp.predicted.tasks == ddp.baseline.tasks  # nothing inserted
        assert ddp.printed[0] == f"the trace holds collectives already: from 2 to {n} ranks, re-priced"
    assert (
        run(nccl_parser, ["ddp"], ranks=32).predicted.gpu_time_by_class["comm"]
        > run(nccl_parser, ["ddp"], ranks=8).predicted.gpu_time_by_class["comm"]
    )


def inline(text: str) -> object:
    return parse_script(text, "t.whatif")


def test_collective_functions_on_a_topology_and_their_errors() -> None:
    # the functions take the topology: 16 ranks in nodes of 8, one 10 GB/s NIC a node: the tree's 1e9 / 1e4 us
    priced = run(two_buckets(), [inline("print allreduce(1e9, ranks = 16, link = 100, inter = 10, nics_per_node = 1)")])
    assert priced.printed == ["100000"]
    with pytest.raises(
        DaydreamError, match=r"allreduce\(\): link = \"auto\" is the link of the trace's GPU, and the trace names none"
    ):
        run(two_buckets(), [inline('print allreduce(1e9, ranks = 16, link = "auto")')])
    with pytest.raises(DaydreamError, match="gpus_per_node is a whole number >= 1"):
        run(two_buckets(), [inline("print allreduce(1e9, ranks = 16, link = 100, inter = 10, gpus_per_node = 0)")])
    with pytest.raises(DaydreamError, match="unknown link 'ib-ndx'"):
        run(two_buckets(), [inline('print allgather(1e9, ranks = 16, link = 100, inter = "ib-ndx")')])
    # the trace's GPU names the link within its nodes
    assert run(a100_iteration(), [inline("print device_link(), device_link(8)")]).printed == ["nvlink3 nvlink3"]
