"""FAE (Adnan et al., PVLDB 2022): the epoch arithmetic of daydream/perf/embeddings/fae.py, worked by hand, and
transforms/fae.whatif's hot-batch
graph on a hand-built hybrid iteration, with the predicted time worked out by hand."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from whatif_graph import iteration

from daydream import simulate
from daydream.api.whatif import run_whatif, whatif
from daydream.dsl import parse_script
from daydream.errors import DaydreamError, NotApplicable
from daydream.graph import add_dependency, add_task
from daydream.graph.edit import check_threads
from daydream.graph.job import join_ranks
from daydream.graph.schema import Delays, RankInfo
from daydream.perf.collectives import collective_us, intra_node_link
from daydream.perf.embeddings import fae
from daydream.perf.embeddings.embedding_bag import bag_shape, embedding_bag_us
from daydream.perf.kernels.devices import get_device
from daydream.perf.kernels.roofline import PCIE_GBPS

FAE = Path(__file__).resolve().parent.parent / "transforms" / "fae.whatif"
V100 = get_device("v100-sxm2-16gb")  # FAE's GPUs (4x V100 16 GB)

# ---- (a) the epoch arithmetic --------------------------------------------------------------------------------------


def test_batch_counts_round_the_hot_batches_to_the_nearest_whole_one() -> None:
    assert fae.batch_counts(1000, 0.8) == (800, 200)
    assert fae.batch_counts(100, 0.29) == (29, 71)  # 0.29 * 100 = 28.999999999999996: flooring would give 28
    assert fae.batch_counts(10, 0.25) == (3, 7)  # 2.5 rounds half up
    assert fae.batch_counts(10, 0.24) == (2, 8)
    assert fae.batch_counts(7, 0.0) == (0, 7)
    assert fae.batch_counts(7, 1.0) == (7, 0)
    assert fae.batch_counts(1, 0.5) == (1, 0)


@pytest.mark.parametrize(
    "hot, cold, run, swaps",
    [
        (800, 200, None, 1),  # R(100): all cold, then all hot
        (800, 200, 1, 399),  # R(1): c h c h ... c h (200 pairs: 399 switches), then the 600 hot batches left in one run
        (200, 800, 1, 400),  # the other way: every hot batch between two cold ones, 2 x 200
        (5, 5, 1, 9),  # c h c h c h c h c h: 2 x 5 - 1
        (6, 10, 4, 4),  # runs c4 h4 c4 h2 c2: 3 cold runs, 2 hot: 2 x 2
        (10, 6, 4, 3),  # c4 h4 c2 h4 h2: 2 cold runs, 3 hot: 2 x 2 - 1
        (10, 6, 100, 1),  # a run longer than either kind is R(100)
        (0, 10, 1, 0),  # one kind only: nothing to swap
        (10, 0, None, 0),
    ],
)
def test_swap_count_by_hand_within_its_bounds(hot: int, cold: int, run: int | None, swaps: int) -> None:
    assert fae.swap_count(hot, cold, run) == swaps
    assert fae.min_swaps(hot, cold) <= swaps <= fae.max_swaps(hot, cold) == 2 * min(hot, cold)


def test_swap_is_the_hot_rows_over_pcie_each_way() -> None:
    # 512 MiB over PCIe 3 (15.75 GB/s each way): 536,870,912 / 15,750 bytes/us = 34,087.04 us per direction
    one_way = 512 * 2**20 / (15.75 * 1e3)
    assert PCIE_GBPS[V100.pcie_gen] == 15.75
    assert fae.swap_us(512 * 2**20, V100) == pytest.approx(2 * one_way)
    assert fae.swap_us(512 * 2**20, V100, round_trip=False) == pytest.approx(one_way)
    assert fae.swap_us(0, V100) == 0


def test_epoch_by_hand() -> None:
    # 1000 batches, 800 hot: 200 x 10 ms + 800 x 5 ms + 1 swap x 68 ms = 2000 + 4000 + 68 = 6068 ms
    assert fae.epoch_us(10_000, 5_000, 1000, 0.8, 1, 68_000) == pytest.approx(6_068_000)
    # all cold: 10 s; speedup 10000 / 6068
    assert fae.all_cold_epoch_us(10_000, 1000) == 10_000_000
    assert fae.speedup(10_000, 5_000, 1000, 0.8, 1, 68_000) == pytest.approx(10_000 / 6_068)
    # R(1): 399 swaps of 68 ms cost more than the hot batches save: 2000 + 4000 + 27132 = 33132 ms, a slowdown
    assert fae.epoch_us(10_000, 5_000, 1000, 0.8, 399, 68_000) == pytest.approx(33_132_000)
    assert fae.speedup(10_000, 5_000, 1000, 0.8, 399, 68_000) == pytest.approx(10_000 / 33_132)


def test_epoch_edge_cases_hot_fraction_zero_and_one() -> None:
    # no hot batch: the hybrid epoch itself, no swap, speedup 1
    assert fae.epoch_us(10_000, 5_000, 1000, 0.0, 0, 68_000) == 10_000_000
    assert fae.speedup(10_000, 5_000, 1000, 0.0, 0, 68_000) == 1.0
    # every batch hot: no cold batch, no swap: 1000 x 5 ms, speedup 2
    assert fae.epoch_us(10_000, 5_000, 1000, 1.0, 0, 68_000) == 5_000_000
    assert fae.speedup(10_000, 5_000, 1000, 1.0, 0, 68_000) == 2.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: fae.epoch_us(10, 5, 100, 1.2, 0, 1), "hot_fraction"),
        (lambda: fae.epoch_us(10, 5, 100, -0.1, 0, 1), "hot_fraction"),
        (lambda: fae.epoch_us(-10, 5, 100, 0.5, 1, 1), "T_cold"),
        (lambda: fae.epoch_us(10, -5, 100, 0.5, 1, 1), "T_hot"),
        (lambda: fae.epoch_us(10, 5, 100, 0.5, 1, -1), "swap time"),
        (lambda: fae.epoch_us(10, 5, 0, 0.5, 0, 1), "batches must be at least 1"),
        (lambda: fae.epoch_us(10, 5, 10.5, 0.5, 1, 1), "batches must be a whole number"),
        (
            lambda: fae.epoch_us(10, 5, 100, 0.8, 41, 1),
            "41 swaps are impossible with 80 hot and 20 cold batches: between 1 and 40",
        ),
        (lambda: fae.epoch_us(10, 5, 100, 0.8, 0, 1), "between 1 and 40"),  # both kinds run: at least one switch
        (lambda: fae.epoch_us(10, 5, 100, 1.0, 1, 1), "between 0 and 0"),  # one kind: no switch
        (lambda: fae.epoch_us(10, 5, 100, float("nan"), 0, 1), "hot_fraction"),
        (lambda: fae.swap_count(10, 10, 0), "switch_every must be at least 1"),
        (lambda: fae.swap_us(-1, V100), "hot_bytes"),
        (lambda: fae.speedup(0, 0, 10, 0.5, 1, 0), "no speedup"),
    ],
)
def test_impossible_inputs_are_daydream_errors(call: object, message: str) -> None:
    with pytest.raises(DaydreamError, match=message):
        call()  # type: ignore[operator]


def test_the_papers_speedup_over_hybrid_training() -> None:
    """FAE reports 1.52x over XDL's CPU-GPU (hybrid) training, geomean of 4 datasets on 4 GPUs, and 81.6% of the
    Terabyte inputs hot. With f = 0.8 hot batches and swaps amortized away, 1 / ((1 - f) + f r) = 1.52 needs
    r = T_hot / T_cold = 0.57: 1 / (0.2 + 0.456) = 1.524. The epoch model gives the same with few swaps (R(100)):
    T_cold 10 ms, T_hot 5.7 ms, 10,000 batches, one 68 ms swap (512 MiB each way over PCIe 3), docs/fae.md."""
    assert fae.steady_speedup(0.8, 0.57) == pytest.approx(1.524, abs=1e-3)
    swap = fae.swap_us(512 * 2**20, V100)
    hot, cold = fae.batch_counts(10_000, 0.8)
    got = fae.speedup(10_000, 5_700, 10_000, 0.8, fae.swap_count(hot, cold), swap)
    # 100,000 ms / (2000 x 10 + 8000 x 5.7 + 68.17) ms = 100,000 / 65,668.2 = 1.5228
    assert got == pytest.approx(100_000 / (20_000 + 45_600 + swap / 1000), rel=1e-9)
    assert got == pytest.approx(1.52, abs=0.01)
    # runs of 100 batches: 20 cold runs, 80 hot: 39 swaps, 100,000 / (65,600 + 39 x 68.17) = 1.465 (docs/fae.md)
    assert fae.swap_count(hot, cold, 100) == 39
    assert fae.speedup(10_000, 5_700, 10_000, 0.8, 39, swap) == pytest.approx(1.465, abs=5e-4)
    # R(1) on the same epoch: 3999 swaps of 68 ms swamp the gain, 0.296 (FAE's scheduler keeps swaps rare for this)
    assert fae.swap_count(hot, cold, 1) == 3999
    assert fae.speedup(10_000, 5_700, 10_000, 0.8, 3999, swap) == pytest.approx(0.296, abs=5e-4)
    assert swap == pytest.approx(68_174.08, abs=0.01)


# ---- (b) the hot-batch graph on a hand-built hybrid iteration -----------------------------------------------------

CPU, S7, S20 = "cpu:1/1", "gpu:0/7", "gpu:0/20"
TABLES = [(100_000, 16), (200_000, 16)]  # rows, dim of the two tables: the L2 holds a fraction of either
BATCH, POOLING = 512, 8
HOT_BYTES = 64 * 2**10  # split evenly: 64 KiB / (2 tables x 16 x 4 bytes) = 512 hot rows each
PRINTED: list[str] = []


def hybrid(with_comm: bool = False, steps: int = 1) -> nx.DiGraph:
    """One CPU thread, kernels on stream 7 (launch calls 10 us, lag 2), the tables on the CPU:

        cpu  E0 lookup [0,100] E1 lookup [100,200] C1 copy call [200,210] W1 its wait [232,233] L1 [233,243]
             L2 [243,253] C2 copy call [253,263] W2 wait [415,416] B0 bag backward [416,496] A0 accumulate [496,526]
             B1 [526,606] A1 [606,636] U0 update table 0 [636,696] U1 table 1 [696,756] Ux step counter [756,761]
             L3 [761,771] S sync [783,786]
        s7   M1 pooled H2D [212,232]  K1 top MLP fwd [245,295]  K2 MLP bwd [295,395]  M2 grad D2H [395,415]
             K3 sgd [773,783]

    The copies are pageable (their calls wait: W1, W2). Baseline: every task where traced, 786 us. With ``steps``
    the iteration repeats, step k (``s0``, ``s1``...) 786 us after the one before on the same thread and stream.
    """
    g = nx.DiGraph()
    g.graph.update(measured_us=786.0 * steps, delays=Delays(2.0, 0.0), steps=[], device="Tesla V100-SXM2-16GB")
    prev: int | None = None
    name, at = "s", 0.0  # the step being built and its start

    def cpu(task: str, dur: float, start: float, phase: str, **attrs: object) -> int:
        nonlocal prev
        attrs.setdefault("op", task)
        v = add_task(g, task, "cpu", CPU, dur, start=at + start, step=name, phase=phase, **attrs)
        if prev is not None:
            add_dependency(g, prev, v, "thread")
        prev = v
        return v

    stream: list[int] = []

    def gpu(task: str, kind: str, dur: float, start: float, call: int, phase: str, **attrs: object) -> int:
        k = add_task(g, task, kind, S7, dur, start=at + start, step=name, phase=phase, stream=7, **attrs)
        add_dependency(g, call, k, "launch", lag=2)
        if stream:
            add_dependency(g, stream[-1], k, "stream")
        stream.append(k)
        return k

    pooled = BATCH * len(TABLES) * 16 * 4
    step = {"region": "Optimizer.step#SGD.step"}
    comms: list[int] = []
    for k in range(steps):
        name, at = (f"s{k}" if steps > 1 else "s"), 786.0 * k
        for i, (rows, dim) in enumerate(TABLES):
            cpu(
                "aten::embedding_bag",
                100,
                100.0 * i,
                "forward",
                layer=f"DLRM.embeddings.{i}",
                shapes=[[rows, dim], [BATCH * POOLING], [BATCH], [], [], [], [], [], []],
            )
        c1 = cpu("cudaMemcpyAsync", 10, 200, "forward", op="aten::copy_", layer="DLRM")
        m1 = gpu(
            "Memcpy HtoD (Pageable -> Device)", "memcpy", 20, 212, c1, "forward", bytes=pooled, **{"class": "memcpy"}
        )
        w1 = cpu("cudaMemcpyAsync [wait]", 1, 232, "forward", op="aten::copy_", layer="DLRM")
        add_dependency(g, m1, w1, "sync", lag=0)
        l1 = cpu("cudaLaunchKernel", 10, 233, "forward", op="aten::addmm", layer="DLRM.top.0")
        gpu("sgemm_fwd", "gpu", 50, 245, l1, "forward", layer="DLRM.top.0", **{"class": "gemm"})
        l2 = cpu("cudaLaunchKernel", 10, 243, "backward", op="aten::mm", layer="DLRM.top.0")
        k2 = gpu("sgemm_bwd", "gpu", 100, 295, l2, "backward", layer="DLRM.top.0", **{"class": "gemm"})
        c2 = cpu("cudaMemcpyAsync", 10, 253, "backward", op="aten::copy_", layer="DLRM")
        m2 = gpu(
            "Memcpy DtoH (Device -> Pageable)", "memcpy", 20, 395, c2, "backward", bytes=pooled, **{"class": "memcpy"}
        )
        w2 = cpu("cudaMemcpyAsync [wait]", 1, 415, "backward", op="aten::copy_", layer="DLRM")
        add_dependency(g, m2, w2, "sync", lag=0)
        for i, (rows, dim) in enumerate(TABLES):
            cpu(
                "autograd::engine::evaluate_function: EmbeddingBagBackward0",
                80,
                416 + 110.0 * i,
                "backward",
                layer=f"DLRM.embeddings.{i}",
                shapes=[[BATCH, dim]],
            )
            cpu(
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                30,
                496 + 110.0 * i,
                "backward",
                layer=f"DLRM.embeddings.{i}",
                shapes=[[rows, dim]],
            )
        for i, (rows, dim) in enumerate(TABLES):
            cpu("aten::add_", 60, 636 + 60.0 * i, "optimizer", shapes=[[rows, dim], [rows, dim], []], **step)
        # a CPU op of the step that is no table's update (Adam's scalar step counter): it stays
        cpu("aten::add_", 5, 756, "optimizer", shapes=[[], [], []], **step)
        l3 = cpu("cudaLaunchKernel", 10, 761, "optimizer", op="aten::add_", **step)
        k3 = gpu("sgd_kernel", "gpu", 10, 773, l3, "optimizer", **{"class": "optimizer", **step})
        sync = cpu("cudaDeviceSynchronize", 3, 783, "optimizer", op=None)
        add_dependency(g, k3, sync, "sync", lag=0)
        if with_comm:
            # a DDP recording: the MLP's gradient all-reduce on stream 20, after the backward GEMM
            ar = add_task(
                g,
                "ncclAllReduce",
                "comm",
                S20,
                40,
                start=at + 395,
                step=name,
                phase="backward",
                stream=20,
                bytes=4096,
                collective="allreduce",
                **{"class": "comm"},
            )
            add_dependency(g, k2, ar, "comm", lag=0)
            add_dependency(g, ar, k3, "comm", lag=0)
            if comms:
                add_dependency(g, comms[-1], ar, "stream")
            comms.append(ar)
    return g


def run(graph: nx.DiGraph, **params: object) -> tuple[float, float, nx.DiGraph]:
    PRINTED.clear()
    result = run_whatif(graph, [FAE], params={"hot_bytes": HOT_BYTES, **params}, on_print=PRINTED.append)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result.baseline_us, result.predicted_us, result.graph


def on(graph: nx.DiGraph, thread: str) -> list[tuple[str, float, float]]:
    """The thread's tasks as simulated: (name, start, end), in order."""
    tl = simulate(graph)
    rows = [
        (graph.nodes[n]["name"], s, e)
        for n, s, e in zip(tl.nodes, tl.start, tl.end)
        if graph.nodes[n]["thread"] == thread
    ]
    return sorted(rows, key=lambda r: r[1])


def kernel_us(backward: bool) -> float:
    """The model's time of the hot-batch kernel: both tables, each on its 512 hot rows, batch 512, pooling 8, dim 16."""
    return sum(embedding_bag_us(BATCH, 512, 1, POOLING, dim, V100, backward=backward) for _, dim in TABLES)


def test_the_tables_come_from_the_lookups_recorded_dims() -> None:
    assert bag_shape([[1000, 16], [4096], [512], [], []]) == (1000, 16, 8.0, 512)
    assert bag_shape([[1000, 16], [512, 8]]) == (1000, 16, 8.0, 512)  # 2-D indices: fixed bags
    assert bag_shape([[1000, 16]]) is None and bag_shape(None) is None and bag_shape([[1000, 16], [0], [512]]) is None


def test_the_hot_batch_graph_by_hand() -> None:
    fwd, bwd = kernel_us(False), kernel_us(True)
    assert 0 < fwd < 10 and 0 < bwd < 10  # a few hundred kB at V100 bandwidth: about a microsecond each
    # the hot rows fit the L2, the whole tables would not: the kernels are priced on the GPU's copy, the hot rows
    assert fwd < sum(embedding_bag_us(BATCH, rows, 1, POOLING, dim, V100) for rows, dim in TABLES)
    baseline, predicted, g = run(hybrid())
    assert baseline == 786.0
    # gone: both lookups, the copies with their calls and waits, the bag backward and accumulation of both tables,
    # both tables' updates; the step counter Ux, the MLP's launches and kernels stay. In their place a forward kernel
    # (its launch Lf where the H2D copy's call was) and a backward one (Lb where the D2H copy's call was); the
    # copies' waits go with them, so nothing on the CPU waits for the GPU before S:
    #   cpu  Lf [0,10] L1 [10,20] L2 [20,30] Lb [30,40] Ux [40,45] L3 [45,55] S
    # s7   Kf [12, 12 + fwd] K1 [22,72] (its launch, fwd < 10) K2 [72,172] Kb [172, 172 + bwd] K3 [172 + bwd, 182 + bwd]
    #   S [182 + bwd, 185 + bwd]
    assert predicted == pytest.approx(185 + bwd)
    launch, fwd_k, bwd_k = (
        "cudaLaunchKernel",
        "embedding_bag_forward (FAE hot rows)",
        "embedding_bag_backward (FAE hot rows)",
    )
    assert on(g, CPU) == [
        (launch, 0, 10),
        (launch, 10, 20),
        (launch, 20, 30),
        (launch, 30, 40),
        ("aten::add_", 40, 45),
        (launch, 45, 55),
        ("cudaDeviceSynchronize", pytest.approx(182 + bwd), pytest.approx(185 + bwd)),
    ]
    assert on(g, S7) == [
        (fwd_k, 12, pytest.approx(12 + fwd)),
        ("sgemm_fwd", 22, 72),
        ("sgemm_bwd", 72, 172),
        (bwd_k, 172, pytest.approx(172 + bwd)),
        ("sgd_kernel", pytest.approx(172 + bwd), pytest.approx(182 + bwd)),
    ]
    inserted = {a["name"]: a for _, a in g.nodes(data=True) if "FAE" in a["name"]}
    assert inserted["embedding_bag_forward (FAE hot rows)"]["duration"] == pytest.approx(fwd)
    assert inserted["embedding_bag_backward (FAE hot rows)"]["duration"] == pytest.approx(bwd)
    assert {a["thread"] for a in inserted.values()} == {S7} and {a["class"] for a in inserted.values()} == {"embedding"}
    assert not [a for _, a in g.nodes(data=True) if a["kind"] == "memcpy"]


def test_the_script_prints_the_epoch_by_the_perf_model() -> None:
    bwd = kernel_us(True)
    run(hybrid(), batches=1000, hot_fraction=0.8, switch_every=1)
    t_cold, t_hot = 786.0, 185 + bwd
    swap = fae.swap_us(HOT_BYTES, V100)
    # R(1) over 800 hot and 200 cold batches: 399 swaps
    epoch = 200 * t_cold + 800 * t_hot + 399 * swap
    text = "\n".join(PRINTED)
    assert "tables 2 ; CPU embedding tasks removed 8 in 1 step(s)" in text
    assert f"T_cold {round(t_cold / 1000, 4):g} ms" in text and f"T_hot {round(t_hot / 1000, 4):g} ms" in text
    assert "epoch of 1000 batches: 800 hot, 200 cold, 399 swaps" in text
    assert (
        f"epoch {round(epoch / 1e6, 4):g} s; all cold {round(1000 * t_cold / 1e6, 4):g} s; speedup "
        f"{round(1000 * t_cold / epoch, 4):g}" in text
    )


def test_several_ranks_all_reduce_the_hot_rows_before_the_update() -> None:
    bwd = kernel_us(True)
    link = intra_node_link(V100, 8)
    dense = collective_us("allreduce", HOT_BYTES, 4, link)
    _, predicted, g = run(hybrid(), ranks=4)
    # the all-reduce's launch goes after Lb's place: Lar [40,50], Ux [50,55], L3 [55,65]; the all-reduce runs after
    # Kb [172, 172 + bwd] on stream 1000, and K3 waits for it: [172 + bwd + ar, 182 + bwd + ar], S 3 us more
    assert predicted == pytest.approx(185 + bwd + dense)
    (ar,) = [a for _, a in g.nodes(data=True) if a["kind"] == "comm"]
    assert ar["thread"] == "gpu:0/1000" and ar["bytes"] == HOT_BYTES and ar["duration"] == pytest.approx(dense)
    # sparse: the rows 4 ranks' batches touch, 4 x 512 x 8 x (16 + 16) x 4 = 1 MiB, more than the hot rows: capped
    _, _, g = run(hybrid(), ranks=4, sparse=True)
    assert [a["bytes"] for _, a in g.nodes(data=True) if a["kind"] == "comm"] == [HOT_BYTES]
    _, _, g = run(hybrid(), ranks=4, sparse=True, hot_bytes=4 * 2**20)
    assert [a["bytes"] for _, a in g.nodes(data=True) if a["kind"] == "comm"] == [4 * 512 * 8 * 32 * 4]
    # a DDP recording: the hot rows' all-reduce joins the trace's on its stream
    _, _, g = run(hybrid(with_comm=True), ranks=4)
    assert sorted(a["thread"] for _, a in g.nodes(data=True) if a["kind"] == "comm") == [S20, S20]


def test_the_script_checks_its_epoch_params_and_prices_one_way_swaps() -> None:
    with pytest.raises(DaydreamError, match="hot_fraction is the share of mini-batches that are hot"):
        run(hybrid(), hot_fraction=1.5)
    with pytest.raises(DaydreamError, match="switch_every must be at least 1"):
        run(hybrid(), switch_every=0)
    run(hybrid(), round_trip=False)
    one_way = HOT_BYTES / (15.75 * 1e3)  # 64 KiB over PCIe 3: 4.16 us
    assert (
        f"swap {round(one_way / 1000, 4):g} ms: 65536 bytes of hot rows over PCIe per switch, round trip false"
        in PRINTED
    )


def test_every_step_of_a_graph_gets_its_hot_batch() -> None:
    dense = collective_us("allreduce", HOT_BYTES, 2, intra_node_link(V100, 8))
    baseline, predicted, g = run(hybrid(with_comm=True, steps=2), ranks=2)
    # each step as the one-step graph, the next starting where it ends: the traced MLP all-reduce on stream 20 after
    # K2 [172,212], the hot rows' after it [212, 212 + dense] (Kb ended at 172.5), K3 waits for both
    # [212 + dense, 222 + dense], S 3 us more: 225 + dense a step
    assert baseline == 786.0  # the step time: the median of the two steps' periods, each 786
    hot = predicted
    assert hot == pytest.approx(225 + dense)
    assert PRINTED[0].startswith("tables 2 ; CPU embedding tasks removed 16 in 2 step(s)")
    assert f"T_cold 0.786 ms (hybrid, traced); T_hot {round(hot / 1000, 4):g} ms" in PRINTED[1]
    for step in ("s0", "s1"):
        mine = [a for a in g.nodes.values() if a["step"] == step]
        assert sorted(a["name"] for a in mine if "FAE" in a["name"]) == [
            "embedding_bag_backward (FAE hot rows)",
            "embedding_bag_forward (FAE hot rows)",
            "ncclAllReduce (FAE hot rows)",
        ]
        assert not [a for a in mine if a["kind"] == "memcpy" or a["name"] == "aten::embedding_bag"]


def test_each_rank_of_a_job_gets_its_own_hot_batch() -> None:
    ranks = [hybrid(), hybrid()]
    for r, g in enumerate(ranks):
        for a in g.nodes.values():  # each rank its own process and GPU, as traced
            a["rank"] = r
            a["thread"] = a["thread"].replace("cpu:1/", f"cpu:{100 + r}/").replace("gpu:0/", f"gpu:{r}/")
    job = join_ranks(
        ranks, [RankInfo(rank=r, trace=f"rank{r}", measured_us=786.0, origin_us=0.0) for r in range(2)], "hand-built"
    )
    baseline, predicted, g = run(job)
    # the ranks run side by side, each as the one-rank graph: 786 us traced, 185 + bwd hot
    assert baseline == 786.0 and predicted == pytest.approx(185 + kernel_us(True))
    for r in range(2):
        mine = [a for a in g.nodes.values() if a["rank"] == r]
        assert sorted(a["name"] for a in mine if "FAE" in a["name"]) == [
            "embedding_bag_backward (FAE hot rows)",
            "embedding_bag_forward (FAE hot rows)",
        ]
        assert not [a for a in mine if a["kind"] == "memcpy" or a["name"] == "aten::embedding_bag"]
    assert PRINTED[0].startswith("tables 2 ; CPU embedding tasks removed 16 in 1 step(s)")


def test_given_tables_replace_the_recorded_dims() -> None:
    _, _, g = run(hybrid(), rows=[1000, 2000], dims=16, pooling=[4, 4], batch=256, hot_rows=[100, 200])
    got = next(a["duration"] for _, a in g.nodes(data=True) if a["name"].startswith("embedding_bag_forward"))
    assert got == pytest.approx(sum(embedding_bag_us(256, r, 1, 4, 16, V100) for r in (100, 200)))
    with pytest.raises(DaydreamError, match="rows lists 3 tables, but there are 2"):
        run(hybrid(), rows=[1, 2, 3])


# ---- (c) not a hybrid trace ----------------------------------------------------------------------------------------


def test_a_trace_with_the_tables_on_the_gpu_stops_with_a_clear_message() -> None:
    with pytest.raises(
        NotApplicable, match="^fae does not apply to this trace: not a hybrid trace: no CPU embedding-bag op"
    ):
        run_whatif(iteration(), [FAE], on_print=lambda _line: None)


def test_a_cpu_recording_stops_with_a_clear_message() -> None:
    g = nx.DiGraph()
    g.graph.update(delays=Delays(2.0, 0.0))
    add_task(g, "aten::embedding_bag", "cpu", CPU, 100, start=0.0, op="aten::embedding_bag", phase="forward")
    with pytest.raises(
        NotApplicable, match=r"^fae does not apply to this trace: the trace has no GPU kernels \(recorded on the CPU\)"
    ):
        run_whatif(g, [FAE], on_print=lambda _line: None)


def test_a_blocking_copy_removed_with_its_call_takes_its_wait_along() -> None:
    """The edit the script relies on: the thread no longer waits for the stream's earlier work through a copy that is
    gone. cpu L0 [0,10] C [10,20] W(ait) X [..]; s7 K0 [12,112] then M, the pageable copy, [112,122]: W waits for M."""
    g = nx.DiGraph()
    g.graph.update(delays=Delays(2.0, 0.0))
    l0 = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=0.0)
    k0 = add_task(g, "sgemm", "gpu", S7, 100, start=12.0, stream=7)
    c = add_task(g, "cudaMemcpyAsync", "cpu", CPU, 10, start=10.0)
    m = add_task(g, "Memcpy DtoH (Device -> Pageable)", "memcpy", S7, 10, start=112.0, stream=7, bytes=1024)
    w = add_task(g, "cudaMemcpyAsync [wait]", "cpu", CPU, 1, start=122.0)
    x = add_task(g, "aten::relu", "cpu", CPU, 5, start=123.0)
    for u, v, kind in [(l0, c, "thread"), (c, w, "thread"), (w, x, "thread"), (k0, m, "stream"), (m, w, "sync")]:
        add_dependency(g, u, v, kind, **({"lag": 0.0} if kind == "sync" else {}))
    add_dependency(g, l0, k0, "launch", lag=2)
    add_dependency(g, c, m, "launch", lag=2)
    assert simulate(g).makespan() == 128  # X waits for the copy, which waits for K0
    result = run_whatif(g, [parse_script("remove memcpy with launches\n", "copy.whatif")])
    # X follows L0 on the CPU, [10, 15]; the GPU's K0 ends at 112 and holds nothing on the CPU
    assert [a["name"] for a in result.graph.nodes.values()] == ["cudaLaunchKernel", "sgemm", "aten::relu"]
    assert result.predicted_us == 112
    assert on(result.graph, CPU) == [("cudaLaunchKernel", 0, 10), ("aten::relu", 10, 15)]


def test_a_step_without_the_pooled_embeddings_copy_stops_with_a_clear_message() -> None:
    g = hybrid()
    for a in g.nodes.values():
        if a["kind"] == "memcpy":
            a["name"] = "Memcpy DtoD (Device -> Device)"  # lookups on the CPU, but nothing crosses PCIe
    with pytest.raises(NotApplicable, match="a hybrid step without a host-to-device copy after its CPU lookups"):
        run_whatif(g, [FAE], on_print=lambda _line: None)


H100_DLRM = Path(__file__).resolve().parent.parent / "validation" / "traces" / "h100"


@pytest.mark.parametrize(
    ("sizes", "hot_bytes", "t_hot_ms"),
    [("dlrm", 8 * 10_000 * 16 * 4, 4.20), ("dlrm_large", 26 * 200_000 * 64 * 4, 10.60)],
)
def test_the_hybrid_dlrm_recorded_on_an_h100(sizes: str, hot_bytes: int, t_hot_ms: float) -> None:
    """docs/embeddings.md's walkthrough on the H100 recordings: every row hot predicts the GPU-resident step, which
    was measured beside it. The prediction is a lower bound there (the resident steps are launch-bound and the GPU
    lookups' own CPU dispatch is not priced): the figures the walkthrough quotes, kept true."""
    hybrid = H100_DLRM / sizes / "hybrid" / "run1" / "rank0.json.xz"
    quiet = lambda _line: None  # noqa: E731
    result = whatif(hybrid, [FAE], {"hot_bytes": hot_bytes, "hot_fraction": 1, "batches": 10_000}, on_print=quiet)
    assert result.predicted_us / 1e3 == pytest.approx(t_hot_ms, rel=0.01)
    resident = [whatif(H100_DLRM / sizes / "resident" / f"run{k}" / "rank0.json.xz", []).measured_us for k in (1, 2)]
    assert all(result.predicted_us < r for r in resident)
    assert result.baseline_us > min(resident)  # the hybrid step (T_cold) is the slower one
