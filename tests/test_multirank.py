"""Multi-rank jobs simulated jointly: collectives matched across ranks start when their last rank arrives and end
together. Hand-built jobs with every time worked out by hand; the real 8-rank DLRM job of ../shared/traces."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import networkx as nx
import pytest

from daydream.cli import main
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task
from daydream.graph.job import RankInfo, join_ranks
from daydream.job import load_job, replay_job, replay_job_graph
from daydream.perf.job_collectives import price_collectives
from daydream.simulation import simulate
from daydream.simulation.ranks import rank_results
from daydream.whatif import whatif

DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"
needs_dlrm8 = pytest.mark.skipif(not DLRM8.is_dir(), reason=f"{DLRM8} not present (shared traces)")
CPU, COMPUTE, COMM = "cpu:1/1", "gpu:0/7", "gpu:0/20"


def rank_graph(compute_us: list[float], comm_us: float = 50.0, groups: list[str] | None = None,
               collectives: list[str] | None = None) -> nx.DiGraph:  # fmt: skip
    """One rank: for each entry of ``compute_us``, a CPU launch (10 us) of a compute kernel of that length, then a
    launch (10 us) of a collective that waits for it (sync edge) on the communication stream. Launch lag 0, no
    gaps. Alone, with compute [100]: launch [0,10], kernel [10,110], launch [10,20], collective [110,160]."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, origin_us=0.0, steps=[{"name": "s", "measured_us": 0.0}])
    prev_call = prev_kernel = prev_comm = None
    t = 0.0
    for k, c in enumerate(compute_us):
        launch = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=t, step="s")
        kernel = add_task(g, f"gemm{k}", "gpu", COMPUTE, c, start=t + 10, step="s")
        add_dependency(g, launch, kernel, "launch")
        issue = add_task(g, "ncclLaunch", "cpu", CPU, 10, start=t + 10, step="s")
        comm = add_task(g, f"ncclKernel_AllReduce_{k}", "comm", COMM, comm_us, start=t + 10 + c, step="s",
                        collective=(collectives or ["allreduce"] * len(compute_us))[k], bytes=1 << 20,
                        group=(groups or ["world"] * len(compute_us))[k])  # fmt: skip
        add_dependency(g, issue, comm, "launch")
        add_dependency(g, kernel, comm, "sync")
        add_dependency(g, launch, issue, "thread")
        if prev_call is not None:
            add_dependency(g, prev_call, launch, "thread")
            add_dependency(g, prev_kernel, kernel, "stream")
            add_dependency(g, prev_comm, comm, "stream")
        prev_call, prev_kernel, prev_comm = issue, kernel, comm
        t += 20
    return g


def job(graphs: list[nx.DiGraph], origins: list[float] | None = None, measured: list[float] | None = None) -> nx.DiGraph:
    infos = [RankInfo(rank=r, trace=f"rank{r}", measured_us=(measured or [0.0] * len(graphs))[r],
                      origin_us=(origins or [0.0] * len(graphs))[r]) for r in range(len(graphs))]  # fmt: skip
    return join_ranks(graphs, infos, "hand-built")


def ends(graph: nx.DiGraph) -> dict[tuple[int, str], tuple[float, float]]:
    tl = simulate(graph)
    return {(a["rank"], a["name"]): (float(tl.start[i]), float(tl.end[i])) for i, a in enumerate(tl.task_attrs)}


def test_a_collective_starts_when_its_last_rank_arrives_and_ends_together() -> None:
    # rank 0 reaches the all-reduce at 110 (kernel [10,110]), rank 1 at 310 (kernel [10,310]): both run [310,360]
    g = job([rank_graph([100]), rank_graph([300])])
    t = ends(g)
    assert t[(0, "ncclKernel_AllReduce_0")] == (310.0, 360.0)
    assert t[(1, "ncclKernel_AllReduce_0")] == (310.0, 360.0)
    results, straggler = rank_results(g, simulate(g))
    assert [r.wait_us for r in results] == [200.0, 0.0]  # rank 0 waited 310 - 110
    assert [r.predicted_us for r in results] == [360.0, 360.0]
    assert straggler is not None and straggler.rank == 1 and straggler.held_us == 200.0


def test_the_longest_member_sets_the_end_and_a_rank_alone_is_unchanged() -> None:
    a, b = rank_graph([100], comm_us=50), rank_graph([100], comm_us=80)
    t = ends(job([a, b]))
    assert t[(0, "ncclKernel_AllReduce_0")] == (110.0, 190.0) == t[(1, "ncclKernel_AllReduce_0")]
    assert ends(job([rank_graph([100])]))[(0, "ncclKernel_AllReduce_0")] == (110.0, 160.0)


def test_a_late_rank_holds_every_collective() -> None:
    # rank 1's step starts 1000 us after rank 0's: its roots are released then; kernels [1010,1110], [1110,1210]
    g = job([rank_graph([100, 100]), rank_graph([100, 100])], origins=[0.0, 1000.0])
    assert g.graph["ranks"][1]["offset_us"] == 1000.0
    t = ends(g)
    assert t[(0, "ncclKernel_AllReduce_0")] == (1110.0, 1160.0)
    # rank 0's second all-reduce waits behind its first on the stream; rank 1 arrives at 1210
    assert t[(0, "ncclKernel_AllReduce_1")] == (1210.0, 1260.0) == t[(1, "ncclKernel_AllReduce_1")]
    results, straggler = rank_results(g, simulate(g))
    assert [r.predicted_us for r in results] == [1260.0, 260.0]  # each from its own start
    assert straggler is not None and straggler.rank == 1 and straggler.late_start_us == 500.0  # median offset 500


def test_two_process_groups_synchronise_only_their_own_ranks() -> None:
    # ranks 0, 1 in group "a"; 2, 3 in group "b"; compute 100, 200, 300, 400
    gs = [rank_graph([c], groups=[grp]) for c, grp in zip([100, 200, 300, 400], "aabb")]
    for g in gs:
        for a in g.nodes.values():
            if a["kind"] == "comm":
                a["group_size"] = 2
    g = job(gs)
    t = ends(g)
    assert t[(0, "ncclKernel_AllReduce_0")] == (210.0, 260.0) == t[(1, "ncclKernel_AllReduce_0")]
    assert t[(2, "ncclKernel_AllReduce_0")] == (410.0, 460.0) == t[(3, "ncclKernel_AllReduce_0")]
    assert g.graph["collectives"]["a"] == {"ranks": 2, "collectives": 1}


def test_a_collective_missing_on_one_rank_is_named() -> None:
    with pytest.raises(DaydreamError) as err:
        job([rank_graph([100, 100]), rank_graph([100]), rank_graph([100, 100])])
    msg = str(err.value)
    assert "collective #2 of process group 'world'" in msg
    assert "ranks 0, 2 issue allreduce, 1,048,576 bytes" in msg and "rank 1 issues no collective #2" in msg


def test_collectives_issued_in_another_order_are_named() -> None:
    with pytest.raises(DaydreamError, match=r"collective #1 .* rank 1 issues alltoall"):
        job([rank_graph([100, 100], collectives=["allreduce", "alltoall"]),
             rank_graph([100, 100], collectives=["alltoall", "allreduce"])])  # fmt: skip


def test_crossed_collectives_of_two_groups_stop_with_a_message_not_a_hang() -> None:
    # the same stream issues group x then y on rank 0, y then x on rank 1: each waits for the other's first
    g = job([rank_graph([100, 100], groups=["x", "y"]), rank_graph([100, 100], groups=["y", "x"])])
    with pytest.raises(DaydreamError, match=r"collective (x|y)#0 \(allreduce\) never starts: rank (0|1) reached it, rank (0|1) never"):
        simulate(g)


def test_pricing_gives_members_one_modelled_duration_and_keeps_the_traced_one() -> None:
    g = job([rank_graph([100], comm_us=500), rank_graph([300], comm_us=300)])
    pricing = price_collectives(g, "nvlink4")
    comms = [a for a in g.nodes.values() if a["kind"] == "comm"]
    # all-reduce of 1 MiB on 2 ranks over nvlink4: 15 us + 2(2-1)/2 x 1048576 B / 360e3 B/us
    assert [a["duration"] for a in comms] == pytest.approx([15 + 1048576 / 360e3] * 2)
    assert sorted(a["traced_us"] for a in comms) == [300.0, 500.0]
    assert pricing.modelled == 1 and pricing.as_traced == 0


@needs_dlrm8
@pytest.mark.parametrize("link", [None, "nvlink2"])
def test_dlrm8_every_rank_within_5_percent_with_modelled_collectives(link: str | None) -> None:
    result = replay_job(DLRM8, link=link)
    assert len(result.ranks) == 8
    for r in result.ranks:
        assert abs(r.error_pct) < 5.0, (r.rank, r.measured_us, r.predicted_us)
    comms = [a for a in result.graph.nodes.values() if a["kind"] == "comm"]
    assert len(comms) == 64 and all("collective_id" in a for a in comms)
    assert sum(a["duration"] != a["traced_us"] for a in comms) >= 60  # modelled, not copied
    assert result.graph.graph["collectives"]["pricing"]["modelled"] == 8
    # the measured steps differ by 7 ms; the ranks started at different times and waited for each other
    assert max(r.wait_us for r in result.ranks) > 5000


@needs_dlrm8
def test_dlrm8_without_the_inter_rank_sync_the_prediction_is_far_off() -> None:
    """The mechanism matters: the same modelled collectives, each rank alone, miss by far more than 5%."""
    graph = load_job(DLRM8)
    price_collectives(graph)
    for a in graph.nodes.values():
        a.pop("collective_id", None)
    alone = replay_job_graph(graph)
    assert max(abs(r.error_pct) for r in alone.ranks) > 20


@needs_dlrm8
def test_dlrm8_balancing_the_straggler_predicts_less() -> None:
    base = replay_job(DLRM8)
    assert base.straggler is not None and base.straggler.rank == 7
    balanced = whatif(DLRM8, ["straggler"])
    assert balanced.predicted_us < balanced.baseline_us
    changes = balanced.rank_changes()
    assert changes is not None
    slowest_before = max(c["baseline_us"] for c in changes)
    slowest_after = max(c["predicted_us"] for c in changes)
    assert slowest_after < slowest_before - 100


@needs_dlrm8
def test_dlrm8_scaled_out_from_8_to_1024_ranks() -> None:
    # the same 8 V100s on their own NVLink2 ("auto"): the collectives priced as --link nvlink2 prices them
    same = whatif(DLRM8, ["scale_out"], params={"ranks": 8}, link="nvlink2")
    assert same.predicted_us == pytest.approx(same.baseline_us)
    assert same.session.printed == ["from 8 to 8 ranks", "one node of 8 GPUs joined by nvlink2"]
    steps = [whatif(DLRM8, ["scale_out"], params={"ranks": n}, link="nvlink2") for n in (8, 16, 128, 1024)]
    # more nodes: the all-to-alls and all-reduces cross more of the network; no rank's step shorter, the job's longer
    # (rank 7, the straggler, ends its step on the CPU before its last collective ends)
    for fewer, more in zip(steps, steps[1:]):
        pairs = zip(fewer.rank_changes() or [], more.rank_changes() or [], strict=True)
        assert all(b["predicted_us"] >= a["predicted_us"] for a, b in pairs)
        assert more.predicted_us > fewer.predicted_us
    # and a slower network, longer still
    slow = whatif(DLRM8, ["scale_out"], params={"ranks": 1024, "inter": "eth-10g"}, link="nvlink2")
    assert slow.predicted_us > steps[-1].predicted_us


def _rewrite_rank(src: Path, dst: Path, rank: int, world: int) -> None:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["distributedInfo"] = dict(doc.get("distributedInfo") or {}, rank=rank, world_size=world)
    dst.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))


@needs_dlrm8
def test_identical_ranks_share_one_simulation_with_the_same_result(tmp_path: Path) -> None:
    # 16 ranks: dlrm8's ranks 0 and 1, each eight times
    for r in range(16):
        _rewrite_rank(DLRM8 / f"rank{r % 2}.json.gz", tmp_path / f"rank{r}.json.gz", r, 16)
    shared = replay_job(tmp_path, link="nvlink2")
    full = replay_job(tmp_path, link="nvlink2", share=False)
    assert sum(r.same_as is None for r in shared.ranks) == 2
    assert shared.graph.number_of_nodes() * 8 == full.graph.number_of_nodes()
    assert [r.predicted_us for r in shared.ranks] == pytest.approx([r.predicted_us for r in full.ranks], abs=1e-6)
    assert [r.wait_us for r in shared.ranks] == pytest.approx([r.wait_us for r in full.ranks], abs=1e-6)
    assert [r.held_us for r in shared.ranks] == [r.held_us for r in full.ranks] == [0.0] * 16  # twins hold nobody alone
    assert shared.straggler is None and full.straggler is None
    assert all(a["group_size"] == 16 for a in shared.graph.nodes.values() if a["kind"] == "comm")
    parallel = replay_job(tmp_path, link="nvlink2", jobs=2)
    assert [r.predicted_us for r in parallel.ranks] == [r.predicted_us for r in shared.ranks]


@needs_dlrm8
def test_cli_simulate_a_job_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(DLRM8), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in d["ranks"]] == list(range(8))
    assert set(d["ranks"][0]) >= {"rank", "measured_us", "predicted_us", "wait_us"}
    assert d["measured_us"] == max(r["measured_us"] for r in d["ranks"]) == 19717.0
    assert d["predicted_us"] == max(r["predicted_us"] for r in d["ranks"])
    assert d["straggler"]["rank"] == 7
    assert main(["simulate", str(DLRM8)]) == 0
    out = capsys.readouterr().out
    assert "straggler: rank 7" in out
    assert main(["run", str(DLRM8), "straggler", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["ranks"]) == 8 and d["predicted_us"] < d["baseline_us"]


@needs_dlrm8
def test_cli_a_missing_rank_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in (0, 1, 3):
        (tmp_path / f"rank{r}.json.gz").write_bytes((DLRM8 / f"rank{r}.json.gz").read_bytes())
    assert main(["simulate", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "no trace for ranks 2, 4, 5, 6, 7 of a world of 8" in err
    assert "Traceback" not in err


def test_cli_an_empty_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path)]) != 0
    assert "holds no rank traces" in capsys.readouterr().err


def test_job_functions_on_one_rank() -> None:
    from daydream.dsl import Session, parse_expression

    g = rank_graph([100])
    g.graph["rank"] = 0
    s = Session(g)
    assert s.env.value(parse_expression("straggler()")) == -1
    assert s.env.value(parse_expression("job_ranks()")) == [0]
    with pytest.raises(DaydreamError, match="one rank's, not a job's"):
        s.env.value(parse_expression("rank_works()"))
    assert not math.isnan(s.env.value(parse_expression("median(rank_offsets())")))
