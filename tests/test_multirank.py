"""Multi-rank jobs simulated jointly: collectives matched across ranks start when their last rank arrives and end
together. Hand-built jobs with every time worked out by hand; the real 8-rank DLRM job of ../shared/traces."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import re
from pathlib import Path

import networkx as nx
import pytest

from daydream.api.job import load_job, replay_job, replay_job_graph
from daydream.api.whatif import whatif
from daydream.api.workload import Workload
from daydream.commands.cli import main
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task
from daydream.graph.job import join_ranks
from daydream.graph.schema import ProcessGroup, RankInfo, StepInfo
from daydream.perf.collectives.job import price_collectives
from daydream.simulation import simulate
from daydream.simulation.ranks import rank_results
from daydream.simulation.timeline import BREAKDOWN_PARTS

DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"
needs_dlrm8 = pytest.mark.skipif(not DLRM8.is_dir(), reason=f"{DLRM8} not present (shared traces)")
CPU, COMPUTE, COMM = "cpu:1/1", "gpu:0/7", "gpu:0/20"


def rank_graph(
    compute_us: list[float],
    comm_us: float = 50.0,
    groups: list[str] | None = None,
    collectives: list[str] | None = None,
) -> nx.DiGraph:
    """One rank: for each entry of ``compute_us``, a CPU launch (10 us) of a compute kernel of that length, then a
    launch (10 us) of a collective that waits for it (sync edge) on the communication stream. Launch lag 0, no
    gaps. Alone, with compute [100]: launch [0,10], kernel [10,110], launch [10,20], collective [110,160]."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, origin_us=0.0, steps=[StepInfo("s", 0.0)])
    prev_call = prev_kernel = prev_comm = None
    t = 0.0
    for k, c in enumerate(compute_us):
        launch = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=t, step="s")
        kernel = add_task(g, f"gemm{k}", "gpu", COMPUTE, c, start=t + 10, step="s")
        add_dependency(g, launch, kernel, "launch")
        issue = add_task(g, "ncclLaunch", "cpu", CPU, 10, start=t + 10, step="s")
        comm = add_task(
            g,
            f"ncclKernel_AllReduce_{k}",
            "comm",
            COMM,
            comm_us,
            start=t + 10 + c,
            step="s",
            collective=(collectives or ["allreduce"] * len(compute_us))[k],
            bytes=1 << 20,
            group=(groups or ["world"] * len(compute_us))[k],
        )
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


def job(
    graphs: list[nx.DiGraph], origins: list[float] | None = None, measured: list[float] | None = None
) -> nx.DiGraph:
    infos = [
        RankInfo(
            rank=r,
            trace=f"rank{r}",
            measured_us=(measured or [0.0] * len(graphs))[r],
            origin_us=(origins or [0.0] * len(graphs))[r],
        )
        for r in range(len(graphs))
    ]
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
    assert [r.step_us for r in results] == [360.0, 360.0]
    assert straggler is not None and straggler.rank == 1 and straggler.held_us == 200.0


def test_the_longest_member_sets_the_end_and_a_rank_alone_is_unchanged() -> None:
    a, b = rank_graph([100], comm_us=50), rank_graph([100], comm_us=80)
    t = ends(job([a, b]))
    assert t[(0, "ncclKernel_AllReduce_0")] == (110.0, 190.0) == t[(1, "ncclKernel_AllReduce_0")]
    assert ends(job([rank_graph([100])]))[(0, "ncclKernel_AllReduce_0")] == (110.0, 160.0)


def test_a_late_rank_holds_every_collective() -> None:
    # rank 1's step starts 1000 us after rank 0's: its roots are released then; kernels [1010,1110], [1110,1210]
    g = job([rank_graph([100, 100]), rank_graph([100, 100])], origins=[0.0, 1000.0])
    assert g.graph["ranks"][1].offset_us == 1000.0
    t = ends(g)
    assert t[(0, "ncclKernel_AllReduce_0")] == (1110.0, 1160.0)
    # rank 0's second all-reduce waits behind its first on the stream; rank 1 arrives at 1210
    assert t[(0, "ncclKernel_AllReduce_1")] == (1210.0, 1260.0) == t[(1, "ncclKernel_AllReduce_1")]
    results, straggler = rank_results(g, simulate(g))
    assert [r.step_us for r in results] == [1260.0, 260.0]  # each from its own start
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
    assert g.graph["collectives"].groups["a"] == ProcessGroup(ranks=2, collectives=1)


def _named_groups(groups: str, members: dict[str, list[int]], compute: list[float]) -> list[nx.DiGraph]:
    gs = [rank_graph([c], groups=[grp]) for c, grp in zip(compute, groups)]
    for g, grp in zip(gs, groups):
        for a in g.nodes.values():
            if a["kind"] == "comm":
                a.update(group_size=len(members[grp]), group_ranks=members[grp])
    return gs


def test_a_process_group_whose_trace_names_its_ranks() -> None:
    # the traces name the members (Process Group Ranks): the same times as above
    ab = {"a": [0, 1], "b": [2, 3]}
    t = ends(job(_named_groups("aabb", ab, [100, 200, 300, 400])))
    assert t[(0, "ncclKernel_AllReduce_0")] == (210.0, 260.0) == t[(1, "ncclKernel_AllReduce_0")]
    assert t[(3, "ncclKernel_AllReduce_0")] == (410.0, 460.0)
    # a member that issues nothing on its group is named; so is a rank the job lacks, and one not in the group
    with pytest.raises(DaydreamError, match=r"rank 2 issues no collective #1"):
        job(_named_groups("aab", {"a": [0, 1, 2], "b": [2]}, [100, 200, 300]))
    with pytest.raises(
        DaydreamError, match=r"process group 'a' holds ranks 0, 1, 5, and the job has no trace for rank 5"
    ):
        job(_named_groups("aa", {"a": [0, 1, 5]}, [100, 200]))
    with pytest.raises(
        DaydreamError, match=r"rank 2 issues collectives on process group 'a', whose members are ranks 0, 1"
    ):
        job(_named_groups("aaa", {"a": [0, 1]}, [100, 200, 300]))


def test_a_collective_missing_on_one_rank_is_named() -> None:
    with pytest.raises(DaydreamError) as err:
        job([rank_graph([100, 100]), rank_graph([100]), rank_graph([100, 100])])
    msg = str(err.value)
    assert "collective #2 of process group 'world'" in msg
    assert "ranks 0, 2 issue allreduce, 1,048,576 bytes" in msg and "rank 1 issues no collective #2" in msg


def test_collectives_issued_in_another_order_are_named() -> None:
    with pytest.raises(DaydreamError, match=r"collective #1 .* rank 1 issues alltoall"):
        job(
            [
                rank_graph([100, 100], collectives=["allreduce", "alltoall"]),
                rank_graph([100, 100], collectives=["alltoall", "allreduce"]),
            ]
        )


def test_crossed_collectives_of_two_groups_stop_with_a_message_not_a_hang() -> None:
    # the same stream issues group x then y on rank 0, y then x on rank 1: each waits for the other's first
    g = job([rank_graph([100, 100], groups=["x", "y"]), rank_graph([100, 100], groups=["y", "x"])])
    with pytest.raises(
        DaydreamError, match=r"collective (x|y)#0 \(allreduce\) never starts: rank (0|1) reached it, rank (0|1) never"
    ):
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
        assert abs(r.error_pct) < 5.0, (r.rank, r.measured_us, r.step_us)
    comms = [a for a in result.graph.nodes.values() if a["kind"] == "comm"]
    assert len(comms) == 64 and all("collective_id" in a for a in comms)
    assert sum(a["duration"] != a["traced_us"] for a in comms) >= 60  # modelled, not copied
    assert result.graph.graph["collectives"].pricing.modelled == 8
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
    changes = balanced.report.ranks
    assert changes is not None
    slowest_before = max(c["baseline_us"] for c in changes)
    slowest_after = max(c["predicted_us"] for c in changes)
    assert slowest_after < slowest_before - 100


@pytest.mark.slow
@needs_dlrm8
def test_dlrm8_scaled_out_from_8_to_1024_ranks() -> None:
    # the same 8 V100s on their own NVLink2 ("auto"): the collectives priced as --link nvlink2 prices them
    same = whatif(Workload(DLRM8, link="nvlink2"), ["scale_out"], params={"ranks": 8})
    assert same.predicted_us == pytest.approx(same.baseline_us)
    assert same.printed == ["from 8 to 8 ranks", "one node of 8 GPUs joined by nvlink2"]
    steps = [whatif(Workload(DLRM8, link="nvlink2"), ["scale_out"], params={"ranks": n}) for n in (8, 16, 128, 1024)]
    # more nodes: the all-to-alls and all-reduces cross more of the network; no rank's step shorter, the job's longer
    # (rank 7, the straggler, ends its step on the CPU before its last collective ends)
    for fewer, more in zip(steps, steps[1:]):
        pairs = zip(fewer.report.ranks or [], more.report.ranks or [], strict=True)
        assert all(b["predicted_us"] >= a["predicted_us"] for a, b in pairs)
        assert more.predicted_us > fewer.predicted_us
    # and a slower network, longer still
    slow = whatif(Workload(DLRM8, link="nvlink2"), ["scale_out"], params={"ranks": 1024, "inter": "eth-10g"})
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
    assert [r.step_us for r in shared.ranks] == pytest.approx([r.step_us for r in full.ranks], abs=1e-6)
    assert [r.wait_us for r in shared.ranks] == pytest.approx([r.wait_us for r in full.ranks], abs=1e-6)
    assert [r.held_us for r in shared.ranks] == [r.held_us for r in full.ranks] == [0.0] * 16  # twins hold nobody alone
    assert shared.straggler is None and full.straggler is None
    assert all(a["group_size"] == 16 for a in shared.graph.nodes.values() if a["kind"] == "comm")
    parallel = replay_job(tmp_path, link="nvlink2", jobs=2)
    assert [r.step_us for r in parallel.ranks] == [r.step_us for r in shared.ranks]


@needs_dlrm8
def test_cli_simulate_a_job_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(DLRM8), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in d["ranks"]] == list(range(8))
    assert set(d["ranks"][0]) >= {"rank", "measured_us", "baseline_us", "predicted_us", "wait_us"}
    assert d["measured_us"] == max(r["measured_us"] for r in d["ranks"]) == 19717.0
    assert (
        d["baseline_us"] == d["predicted_us"] == max(r["baseline_us"] for r in d["ranks"])
    )  # predicted_us: the old name
    assert all(r["baseline_us"] == r["predicted_us"] for r in d["ranks"])
    assert d["straggler"]["rank"] == 7
    assert main(["simulate", str(DLRM8)]) == 0
    out = capsys.readouterr().out
    assert "straggler: rank 7" in out
    assert main(["run", str(DLRM8), "straggler", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["ranks"]) == 8 and d["predicted_us"] < d["baseline_us"]


@needs_dlrm8
@pytest.mark.parametrize("command", [["simulate", str(DLRM8)], ["run", str(DLRM8), "straggler"]])
def test_per_rank_tables_fit_80_columns(command: list[str]) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run(
        [sys.executable, "-m", "daydream", *command], capture_output=True, text=True, env=env, check=True
    ).stdout
    # the tables fit; prose lines are left whole for the terminal to wrap (a path is never broken mid-token)
    assert max(len(line) for line in out.splitlines() if line[:1] in "┏┃┡│└") <= 80
    # one line per rank: its number first, then its times
    rows = [line for line in out.splitlines() if line.startswith("│ ") and "12.311" in line]
    assert rows and all(line.split("│")[1].strip() == "7" for line in rows)


@needs_dlrm8
def test_cli_a_missing_rank_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in (0, 1, 3):
        (tmp_path / f"rank{r}.json.gz").write_bytes((DLRM8 / f"rank{r}.json.gz").read_bytes())
    assert main(["simulate", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "no trace for ranks 2, 4, 5, 6, 7 of a world of 8" in err
    assert "(found 3 rank traces: rank0.json.gz (rank 0), rank1.json.gz (rank 1), rank3.json.gz (rank 3))" in err
    assert "Traceback" not in err


def test_cli_an_empty_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path)]) != 0
    assert "holds no rank traces" in capsys.readouterr().err


def test_job_functions_on_one_rank() -> None:
    from daydream.dsl import Session, parse_expression

    g = rank_graph([100])
    g.graph["rank"] = 0
    s = Session(g)
    assert s.env.value(parse_expression("straggler()")) is None
    assert s.env.value(parse_expression("job_ranks()")) == [0]
    with pytest.raises(DaydreamError, match="one rank's, not a job's"):
        s.env.value(parse_expression("rank_works()"))
    assert not math.isnan(s.env.value(parse_expression("median(rank_offsets())")))


def test_process_groups_read_from_the_args_kineto_records() -> None:
    import msgspec

    from daydream.trace.schema import EventArgs
    from daydream.trace.sizes import process_group

    def args(**kw: object) -> EventArgs:
        return msgspec.convert(kw, EventArgs)

    tp = {
        "Process Group Name": "3",
        "Process Group Description": "tp",
        "Process Group Ranks": "[4, 5, 6, 7]",
        "Group size": 4,
    }
    assert process_group(args(**tp)) == {"group_size": 4, "group": "3", "group_ranks": [4, 5, 6, 7]}
    # the default group is the world: no name, as in traces that record none
    default = {
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1]",
        "Group size": 2,
    }
    assert process_group(args(**default)) == {"group_size": 2}
    # ranks that are no list of distinct ranks, or disagree with the size, are not believed; the name is kept
    for bad in ("[4, 4, 5, 6]", "[4, -5]", "4,5", "[4, 5]"):
        assert process_group(args(**{**tp, "Process Group Ranks": bad})) == {"group_size": 4, "group": "3"}
    assert process_group(args(**{**tp, "Group size": 0})) is None and process_group(args()) is None


def test_a_traced_rank_carries_its_process_group(shared_traces: Path) -> None:
    from daydream.graph import build_graph
    from daydream.trace import load_trace

    g = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"))
    step = g.graph["steps"][-1].name  # the measured step (the step before it is its context)
    comms = [a for a in g.nodes.values() if a["kind"] == "comm" and a["step"] == step]
    assert len(comms) == 7 and all(a["group_size"] == 2 and "group" not in a for a in comms)


# ---- embedding-table sharding on a job (transforms/sharding.whatif) ------------------------------------------------


def embedding_rank() -> nx.DiGraph:
    """One rank of a DLRM-like step: launches [0,10] [10,20] [20,30]; the forward lookups EF 100 us on stream 7
    [10,110], the all-to-all of their outputs (8 KiB) on stream 20 after them [110,160], the backward lookups EB
    100 us after it [160,260]."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, origin_us=0.0, steps=[StepInfo("s", 0.0)], device="Tesla V100-SXM2-32GB")
    calls = [add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=10.0 * i, step="s") for i in range(3)]
    for a, b in zip(calls, calls[1:]):
        add_dependency(g, a, b, "thread")
    ef = add_task(
        g,
        "split_embedding_codegen_forward",
        "gpu",
        COMPUTE,
        100,
        start=10,
        step="s",
        phase="forward",
        **{"class": "embedding"},
    )
    a2a = add_task(
        g,
        "ncclKernel_SendRecv",
        "comm",
        COMM,
        50,
        start=110,
        step="s",
        phase="forward",
        collective="alltoall",
        bytes=8192,
        group="world",
    )
    eb = add_task(
        g,
        "split_embedding_backward_codegen",
        "gpu",
        COMPUTE,
        100,
        start=160,
        step="s",
        phase="backward",
        **{"class": "embedding"},
    )
    for call, k in zip(calls, (ef, a2a, eb)):
        add_dependency(g, call, k, "launch")
    add_dependency(g, ef, a2a, "sync")
    add_dependency(g, a2a, eb, "sync")
    add_dependency(g, ef, eb, "stream")
    return g


def test_sharding_on_a_job_by_hand() -> None:
    from daydream.api.whatif import run_whatif
    from daydream.perf.collectives import collective_us
    from daydream.perf.embeddings.sharding import ShardingProblem, Table, evaluate, shard

    rows, pooling, dim, batch = [4_000_000, 1_000_000, 10_000, 1_000], [20, 5, 1, 1], 64, 512
    tables = [Table(f"t{i}", e, dim, p) for i, (e, p) in enumerate(zip(rows, pooling))]
    # the sharding model's loads of the traced (naive: tables 0, 2 on rank 0) and the size_greedy plan
    before = evaluate(ShardingProblem(tables, 2, batch, "v100-sxm2-32gb", "nvlink2"), shard(tables, 2, "naive"))
    after = evaluate(ShardingProblem(tables, 2, batch, "v100-sxm2-32gb", "nvlink2"), shard(tables, 2, "size_greedy"))
    assert after.assignment != before.assignment
    f = [a.forward_us / b.forward_us for a, b in zip(after.ranks, before.ranks)]
    b = [a.backward_us / b.backward_us for a, b in zip(after.ranks, before.ranks)]
    ratio = after.alltoall_bytes / before.alltoall_bytes
    # the all-to-all (50 us: one size only, the job keeps its traced time) grows by the formula's difference
    a2a = (
        50
        + collective_us("alltoall", round(8192 * ratio), 2, "nvlink2")
        - collective_us("alltoall", 8192, 2, "nvlink2")
    )
    # EF on each rank [10, 10 + 100 f]; the all-to-all starts when both are done; EB after it
    start = max(10 + 100 * x for x in f)
    expected = [start + a2a + 100 * y for y in b]
    params = {
        "rows": rows,
        "pooling": pooling,
        "dims": dim,
        "batch": batch,
        "sharder": "size_greedy",
        "link": "nvlink2",
    }
    result = run_whatif(job([embedding_rank(), embedding_rank()]), ["sharding"], params=params)
    assert [c["predicted_us"] for c in result.report.ranks or []] == pytest.approx(expected)
    assert result.printed[-1].startswith("plan [0, 1, 1, 1] for naive [0, 1, 0, 1]")
    # every sharder's plan priced by the model; the best no slower than any
    modelled = {line.split()[0]: float(line.split()[1]) for line in result.printed[:7]}
    assert list(modelled) == [
        "naive",
        "random",
        "size_greedy",
        "lookup_greedy",
        "norm_lookup_greedy",
        "size_lookup_greedy",
        "best",
    ]
    assert modelled["best"] == min(modelled.values())
    # the plan the model calls best, found by the script: no slower than the sharders' by the model
    best = run_whatif(job([embedding_rank(), embedding_rank()]), ["sharding"], params={**params, "sharder": "best"})
    assert best.predicted_us <= result.predicted_us + 1e-6


def test_sharding_needs_a_job_and_sound_tables() -> None:
    from daydream.api.whatif import run_whatif

    with pytest.raises(DaydreamError, match="a multi-rank job only"):
        run_whatif(embedding_rank(), ["sharding"])
    with pytest.raises(DaydreamError, match=r"4 tables, but 3 dims and 4 poolings"):
        run_whatif(job([embedding_rank(), embedding_rank()]), ["sharding"], params={"dims": [64, 64, 64]})
    with pytest.raises(DaydreamError, match=r"a plan is one rank \(0 to 1\) per table, 4 of them"):
        run_whatif(job([embedding_rank(), embedding_rank()]), ["sharding"], params={"sharder": [0, 1, 2, 0]})


@needs_dlrm8
def test_ray_builds_the_same_job(monkeypatch: pytest.MonkeyPatch) -> None:
    # without Ray: a clear message; with it (a Ray started here), the same result as a serial load
    if importlib.util.find_spec("ray") is None:
        with pytest.raises(DaydreamError, match=r"--ray needs Ray: pip install"):
            load_job(DLRM8, ray="local")
        pytest.skip("Ray is not installed: the serial and Ray loads are not compared")
    serial = replay_job(DLRM8)
    on_ray = replay_job(DLRM8, ray="local", jobs=2)
    assert [(r.rank, r.step_us, r.wait_us, r.same_as) for r in on_ray.ranks] == [
        (r.rank, r.step_us, r.wait_us, r.same_as) for r in serial.ranks
    ]


def test_ray_loads_rank_traces_as_a_serial_load_does(tmp_path: Path) -> None:
    """Per-rank loads on a local Ray (--ray local), on rank traces made here (CI holds no shared traces): the same
    job as the serial load, rank for rank (Ray is a test dependency: this runs in CI)."""
    pytest.importorskip("ray")
    from synth import make_trace, write_trace

    for r in range(4):
        doc = make_trace()
        doc["distributedInfo"] = {"rank": r, "world_size": 4}
        write_trace(tmp_path / f"rank{r}.json", doc)
    serial = replay_job(tmp_path)
    on_ray = replay_job(tmp_path, ray="local", jobs=2)
    assert [(r.rank, r.measured_us, r.step_us, r.same_as) for r in on_ray.ranks] == [
        (r.rank, r.measured_us, r.step_us, r.same_as) for r in serial.ranks
    ]
    assert len(on_ray.ranks) == 4 and on_ray.baseline_us == serial.baseline_us


def test_workers_by_default_one_per_32_ranks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI's default --jobs (None): a worker process for every RANKS_PER_PROCESS ranks past the first, at most one
    per core; the job built so is the serial one, rank for rank."""
    from synth import make_trace, write_trace

    import daydream.api.job as job_api
    import daydream.workers as workers

    monkeypatch.setattr(workers, "cores", lambda: 2)
    assert [workers.processes_for(n, 32) for n in (0, 31, 32, 63, 64, 1023)] == [1, 1, 1, 1, 2, 2]
    monkeypatch.setattr(workers, "cores", lambda: 16)
    assert workers.processes_for(1023, 32) == 16 and workers.processes_for(200, 32) == 6
    for r in range(5):
        doc = make_trace()
        doc["distributedInfo"] = {"rank": r, "world_size": 5}
        write_trace(tmp_path / f"rank{r}.json", doc)
    pools: list[int] = []
    real_pool = job_api.ProcessPoolExecutor

    def pool(*args: object, **kwargs: object) -> object:
        pools.append(int(kwargs["max_workers"]))  # type: ignore[call-overload]
        return real_pool(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(job_api, "ProcessPoolExecutor", pool)
    monkeypatch.setattr(job_api, "RANKS_PER_PROCESS", 2)  # 4 ranks past the first: 2 workers
    auto = replay_job(tmp_path, jobs=None)
    assert pools == [2]
    serial = replay_job(tmp_path)
    assert pools == [2]  # (jobs=1: no pool)
    assert [(r.rank, r.measured_us, r.step_us, r.same_as) for r in auto.ranks] == [
        (r.rank, r.measured_us, r.step_us, r.same_as) for r in serial.ranks
    ]


def test_ray_absent_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives an import
    from daydream.api.job import _build_on_ray

    with pytest.raises(
        DaydreamError, match=r"--ray needs Ray: pip install 'ray\[default\]' \(local worker processes: --jobs N\)"
    ):
        _build_on_ray("local", [(str(tmp_path / "rank1.json"), None, True)], 1)


def test_one_word_one_value_for_a_job(shared_traces: Path) -> None:
    """A job's step time is its slowest rank's period, whichever command asks: run's baseline of the unchanged job is
    simulate's (the span across the ranks' offset steps is no rank's step: it was 4.7% longer on dlrm8)."""
    job = shared_traces / "param" / "dlrm8"
    simulated = replay_job(job)
    ran = whatif(job, ["straggler"])
    assert ran.baseline_us == pytest.approx(simulated.baseline_us, rel=1e-9)
    assert ran.baseline_us == pytest.approx(max(r["baseline_us"] for r in ran.report.ranks or []), rel=1e-9)
    assert ran.predicted_us == pytest.approx(max(r["predicted_us"] for r in ran.report.ranks or []), rel=1e-9)


# ---- the straggler explained; a job's breakdown adds up to its step -------------------------------------------------


def _with_optimizer(g: nx.DiGraph, us: float) -> nx.DiGraph:
    """``rank_graph``'s rank, then an optimizer kernel of ``us`` launched (10 us) after its last collective's launch
    and waiting for that collective (sync edge): the rank's step ends ``us`` after its last collective."""
    last_issue = max((n for n, a in g.nodes.items() if a["name"] == "ncclLaunch"), key=lambda n: g.nodes[n]["start"])
    last_comm = max((n for n, a in g.nodes.items() if a["kind"] == "comm"), key=lambda n: g.nodes[n]["start"])
    last_gemm = max((n for n, a in g.nodes.items() if a["kind"] == "gpu"), key=lambda n: g.nodes[n]["start"])
    t = g.nodes[last_issue]["start"] + 10
    launch = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=t, step="s")
    sgd = add_task(g, "sgd", "gpu", COMPUTE, us, start=t + 10, step="s")
    add_dependency(g, last_issue, launch, "thread")
    add_dependency(g, launch, sgd, "launch")
    add_dependency(g, last_comm, sgd, "sync")
    add_dependency(g, last_gemm, sgd, "stream")
    return g


def straggler_job() -> nx.DiGraph:
    """Three ranks, two all-reduces (50 us), the straggler the shortest window. Rank 0 starts at 0 (kernels [10,110]
    [110,210]), rank 1 at 50 (kernels 150 and 370 us: [60,210] [210,580]), rank 2 at 400 (kernels [410,510] [510,610]).
    The first all-reduce: arrivals 110, 210, 510, run [510,560]; the second: arrivals 560 (after the first, on the
    stream), 580, 610, run [610,660]. Rank 2 holds both (510 - 210 = 300, 610 - 580 = 30) and then runs an 80 us
    optimizer kernel [660,740]. Windows: rank 0 [0,660] 660 us, waiting 400 + 50; rank 1 [50,660] 610, waiting
    300 + 30; rank 2 [400,740] 340, waiting none. The job's step is rank 0's 660 us; the span across the ranks is
    740."""
    graphs = [rank_graph([100, 100]), rank_graph([150, 370]), _with_optimizer(rank_graph([100, 100]), 80)]
    return job(graphs, origins=[0.0, 50.0, 400.0], measured=[660.0, 610.0, 340.0])


def _text(render: object, result: object, width: int = 80) -> str:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=width)
    render(result, console)  # type: ignore[operator]
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in out.splitlines()) <= width
    return out


def _flat(text: str) -> str:
    """The terminal's text with its lines joined: a sentence wrapped at 80 columns read whole."""
    return " ".join(line.strip() for line in text.splitlines())


def _breakdown_row(text: str) -> tuple[float, list[float]]:
    """The job breakdown's step (its title, ms) and its parts (the row under it, ms)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Breakdown of the job's step, "))
    step = float(re.search(r"step, ([\d,.]+) ms", lines[at]).group(1).replace(",", ""))  # type: ignore[union-attr]
    row = next(line for line in lines[at:] if line.startswith("│"))
    return step, [float(x.replace(",", "")) for x in re.findall(r"([\d,.]+) ms \(", row)]


def _path_shares(text: str) -> tuple[float, float, list[float]]:
    """The straggler's critical path as the terminal says it: its length, its step and each task's share (ms)."""
    m = re.search(
        r"critical path from .*?, ([\d.]+) ms of its ([\d.]+) ms step, by task \(.*?\): (.*?)(?: rank \d+'s step is|$)",
        _flat(text),
    )
    assert m is not None, text
    return float(m.group(1)), float(m.group(2)), [float(x) for x in re.findall(r" ([\d.]+) ms", m.group(3))]


def test_the_straggler_is_the_rank_the_others_wait_for_not_the_longest_window() -> None:
    from daydream.presentation.terminal import render_job

    result = replay_job_graph(straggler_job())
    d = result.to_dict()
    assert [(r["rank"], r["baseline_us"], r["wait_us"], r["offset_us"], r["held_us"]) for r in d["ranks"]] == [
        (0, 660.0, 450.0, 0.0, 0.0),
        (1, 610.0, 330.0, 50.0, 0.0),
        (2, 340.0, 0.0, 400.0, 330.0),
    ]
    s = d["straggler"]
    assert s["rank"] == 2 and s["held_us"] == 330.0 and s["late_start_us"] == 350.0  # the median rank starts at 50
    assert s["offset_us"] == 400.0 and s["first_rank"] == 0 and s["job_collectives"] == 2
    assert [(c["id"], c["kind"], c["held_us"], c["reached_us"], c["next_rank"]) for c in s["collectives"]] == [
        ("world#0", "allreduce", 300.0, 110.0, 1),
        ("world#1", "allreduce", 30.0, 210.0, 1),
    ]
    # its critical path back from the second all-reduce's start (610): launch [400,410], kernels [410,510] [510,610]
    assert (s["path_from_us"], s["path_to_us"], s["path_waited_for"]) == (0.0, 210.0, None)
    assert s["tasks"] == {"gemm0": 100.0, "gemm1": 100.0, "cudaLaunchKernel": 10.0}
    # the job's step is rank 0's window, and so is its breakdown: rank 0's CPU busy [0,40], its GPU [10,210]
    # [510,560] [610,660] (the span across the ranks, 740 us, is no rank's step)
    assert d["baseline_us"] == 660.0 and d["slowest_rank"] == 0
    assert d["breakdown"] == {
        "total_us": 660.0,
        "cpu_only_us": 10.0,
        "gpu_only_us": 270.0,
        "cpu_gpu_overlap_us": 30.0,
        "idle_us": 350.0,
    }
    text = _text(render_job, result)
    flat = _flat(text)
    assert (
        "straggler: rank 2, the rank the others wait for: its step starts 0.350 ms after the median rank's (0.400 "
        "ms after rank 0's, the first to start), and it reached 2 of the job's 2 collectives last, holding the "
        "others back 0.330 ms in all"
    ) in flat
    assert re.search(r"│ allreduce world#0 │ .* │ +0\.110 │ 0\.300 │ +rank 1 │", text)
    assert re.search(r"│ allreduce world#1 │ .* │ +0\.210 │ 0\.030 │ +rank 1 │", text)
    assert "rank 0's step is the longest, 0.660 ms, and is the job's step: it starts first and waits 0.450 ms" in flat
    assert "not the rank with the longest step" in flat
    path, step, shares = _path_shares(text)
    assert (path, step, shares) == (0.21, 0.34, [0.1, 0.1, 0.01])
    step, parts = _breakdown_row(text)
    assert step == 0.66 and parts == [0.01, 0.27, 0.03, 0.35]


def test_the_run_of_straggler_names_it_before_and_after() -> None:
    from daydream.api.whatif import run_whatif
    from daydream.presentation.terminal import render_whatif

    ran = run_whatif(straggler_job(), ["straggler"])
    d = ran.to_dict()
    assert d["straggler"]["baseline"]["rank"] == 2 and d["slowest_rank"]["baseline"] == 0
    for side in ("baseline", "predicted"):
        bd = d["breakdown"][side]
        assert sum(bd[k] for k in BREAKDOWN_PARTS) == pytest.approx(d[f"{side}_us"], rel=1e-3)
        assert bd["total_us"] == pytest.approx(d[f"{side}_us"], rel=1e-9)
    # rank 2 starts its step no later than the median rank (50): its window grows by the 350 us it now waits
    r2 = d["ranks"][2]
    assert (r2["baseline_offset_us"], r2["offset_us"]) == (400.0, 50.0)
    flat = _flat(_text(render_whatif, ran))
    assert "rank 2's step starts 0.350 ms earlier (0.050 ms after the first rank's, was 0.400 ms)" in flat
    assert "straggler (baseline): rank 2, the rank the others wait for" in flat
    assert "Breakdown of the job's step, its slowest rank's window" in flat


@needs_dlrm8
def test_dlrm8_the_straggler_explained_in_text_and_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 7 is the one the others wait for: its step starts 3.301 ms after the median rank's, 7.528 ms after rank 1's,
    and it reached 5 of the 8 collectives last, holding the others 1.310 ms; rank 1's window is the longest (19.716 ms)
    as it starts first and waits 11.133 ms of it."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["simulate", str(DLRM8), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    by_rank = {r["rank"]: r for r in d["ranks"]}
    s = d["straggler"]
    assert s["rank"] == 7 and d["slowest_rank"] == 1
    assert by_rank[7]["baseline_us"] < by_rank[1]["baseline_us"]  # the straggler's window is the shortest
    assert by_rank[1]["wait_us"] == pytest.approx(11132.9, abs=0.1) and by_rank[1]["offset_us"] == 0.0
    assert s["late_start_us"] == 3301.0 and s["offset_us"] == by_rank[7]["offset_us"] == 7528.0 and s["first_rank"] == 1
    assert s["held_us"] == pytest.approx(1309.5, abs=0.1) == by_rank[7]["held_us"]
    assert s["held_us"] == pytest.approx(sum(c["held_us"] for c in s["collectives"]), rel=1e-12)
    assert [c["id"] for c in s["collectives"]] == ["world#1", "world#0", "world#2", "world#3", "world#4"]
    assert [c["kind"] for c in s["collectives"]] == ["alltoall"] * 4 + ["allreduce"] and s["job_collectives"] == 8
    assert [round(c["held_us"]) for c in s["collectives"]] == [509, 505, 163, 124, 9]
    # the critical path's shares lie within rank 7's window (they summed to 21.7 ms of its 12.3: each collective's
    # path counted again)
    assert 0.0 <= s["path_from_us"] < s["path_to_us"] <= by_rank[7]["baseline_us"]
    assert sum(s["tasks"].values()) <= s["path_to_us"] - s["path_from_us"] + 1e-6
    # the breakdown is of the job's step: it adds up to it
    bd = d["breakdown"]
    assert bd["total_us"] == d["baseline_us"]
    assert sum(bd[k] for k in BREAKDOWN_PARTS) == pytest.approx(d["baseline_us"], rel=1e-3)

    assert main(["simulate", str(DLRM8)]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = _flat(text)
    assert (
        "straggler: rank 7, the rank the others wait for: its step starts 3.301 ms after the median rank's (7.528 ms "
        "after rank 1's, the first to start), and it reached 5 of the job's 8 collectives last, holding the others "
        "back 1.310 ms in all"
    ) in flat
    assert re.search(r"│ alltoall world#1 +│ forward +│ .* │ +5\.907 │ 0\.509 │ +rank 2 │", text)
    assert "rank 1's step is the longest, 19.716 ms, and is the job's step: it starts first and waits 11.133 ms" in flat
    path, step, shares = _path_shares(text)
    assert step == 12.311 and path <= step and sum(shares) <= path + 0.003
    step, parts = _breakdown_row(text)
    assert step == round(d["baseline_us"] / 1e3, 3) and sum(parts) == pytest.approx(step, rel=1e-3)


@needs_dlrm8
def test_dlrm8_run_straggler_and_its_breakdowns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(DLRM8), "straggler", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["straggler"]["baseline"]["rank"] == 7 and d["slowest_rank"] == {"baseline": 1, "predicted": 1}
    for side in ("baseline", "predicted"):
        bd = d["breakdown"][side]
        assert sum(bd[k] for k in BREAKDOWN_PARTS) == pytest.approx(d[f"{side}_us"], rel=1e-3)
    r7 = d["ranks"][7]
    assert r7["baseline_offset_us"] == 7528.0 and r7["offset_us"] < r7["baseline_offset_us"]


@needs_dlrm8
def test_dlrm8_report_page_names_the_straggler_and_its_breakdown_adds_up(tmp_path: Path) -> None:
    from daydream.presentation.page import write_report

    report = write_report(DLRM8, out_dir=str(tmp_path / "r"))
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    job = replay_job(DLRM8)
    assert doc["baseline_us"] == pytest.approx(job.baseline_us, rel=1e-12)  # one value: simulate's
    bd = doc["analyses"][0]["breakdown"]
    assert sum(bd[k] for k in BREAKDOWN_PARTS) == pytest.approx(doc["baseline_us"], rel=1e-3)
    assert doc["step_ranks"] == [1] and doc["straggler"]["rank"] == 7 and len(doc["ranks"]) == 8
    html = Path(report.index).read_text()
    assert (
        "Straggler: rank 7, the rank the others wait for: its step starts 3.301 ms after the median rank&#39;s" in html
    )
    assert "Breakdown (ms) of the job&#39;s step, its slowest rank&#39;s window: baseline rank 1&#39;s" in html
    assert 'id="straggler-collectives"' in html and "Rank 1&#39;s step is the longest, 19.716 ms" in html
