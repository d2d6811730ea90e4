"""A job simulated by workers that each hold some of its ranks (daydream.api.job_workers, daydream.simulation.shard):
the joint simulation's result, number for number - every rank's step, wait, offset and held time, the straggler
with its evidence, the breakdown, every collective's start - on a generated job whose ranks all differ and on the real
8-rank DLRM job, in this process, in local processes and on Ray; and red when a collective's start ignores one rank's
arrival."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from synth import COMM_STREAM, make_rank_trace, write_trace
from test_multirank import DLRM8, needs_dlrm8

import daydream.api.job as job_api
import daydream.api.job_workers as job_workers
from daydream.api.job import JobReplay, replay_job
from daydream.api.job_workers import replay_job_by_workers
from daydream.commands.cli import main
from daydream.errors import DaydreamError
from daydream.simulation import FIFO

RANKS = 12


def write_job(folder: Path, ranks: int = RANKS, change: Any = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        doc = make_rank_trace(r, ranks)
        if change is not None:
            change(r, doc)
        write_trace(folder / f"rank{r}.json", doc)
    return folder


@pytest.fixture(scope="module")
def differing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of 12 ranks that all differ (each its own start, its own kernels' times)."""
    return write_job(tmp_path_factory.mktemp("differing"))


def assert_same_job(joint: JobReplay, workers: JobReplay) -> None:
    a, b = joint.to_dict(), workers.to_dict()
    assert a.pop("workers") is None and b.pop("workers") is not None
    assert a == b  # every number, to the bit
    assert joint.collective_starts == workers.collective_starts


def test_a_job_whose_ranks_all_differ_is_simulated_by_workers_as_jointly(differing: Path) -> None:
    joint = replay_job(differing)
    assert joint.report.simulated_ranks == RANKS and joint.straggler is not None
    assert len(joint.collective_starts) == 4 and len({r.wait_us for r in joint.ranks}) > RANKS // 2
    for count in (1, 2, 5, RANKS):
        workers = replay_job_by_workers(differing, workers=count, in_process=True)
        assert_same_job(joint, workers)
        assert workers.workers is not None and workers.workers.count == count
        # ranks split across workers meet at each collective: a round for it, and one to finish
        assert workers.workers.rounds == (1 if count == 1 else len(joint.collective_starts) + 1)
    assert workers.graph is None and workers.timeline is None  # no process holds the whole job


def test_local_worker_processes_give_the_same_job(differing: Path) -> None:
    joint = replay_job(differing)
    workers = replay_job(differing, jobs=2, by_workers=True)
    assert_same_job(joint, workers)
    assert workers.workers is not None and workers.workers.kind == "local processes"
    assert len(workers.workers.peak_bytes) == 2 and all(b > 0 for b in workers.workers.peak_bytes)


def test_red_when_a_collective_start_ignores_one_ranks_arrival(
    differing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison above catches a coordinator that starts a collective without one rank's arrival: the last
    rank's, dropped here, moves every collective's start and every rank's wait."""
    joint = replay_job(differing)
    last = joint.straggler.rank if joint.straggler is not None else -1
    add = job_workers._Gang.add

    def ignoring(gang: job_workers._Gang, a: job_workers.GangArrival) -> None:
        if a.rank != last:
            add(gang, a)

    monkeypatch.setattr(job_workers._Gang, "add", ignoring)
    broken = replay_job_by_workers(differing, workers=RANKS, in_process=True)
    with pytest.raises(AssertionError):
        assert_same_job(joint, broken)
    assert broken.collective_starts != joint.collective_starts


@needs_dlrm8
def test_dlrm8_by_workers_as_jointly() -> None:
    joint = replay_job(DLRM8)
    for count in (2, 3):
        assert_same_job(joint, replay_job_by_workers(DLRM8, workers=count, in_process=True))
    assert_same_job(joint, replay_job(DLRM8, jobs=2, by_workers=True))


def test_twins_share_one_simulation_in_workers_too(tmp_path: Path) -> None:
    # ranks 0-3 differ; 4-7 repeat rank 0's times (their traces name their own ranks): twins of rank 0
    def same_as_zero(r: int, doc: dict[str, Any]) -> None:
        if r >= 4:
            doc.clear()
            doc.update(make_rank_trace(0, 8), distributedInfo={"backend": "nccl", "rank": r, "world_size": 8})

    folder = write_job(tmp_path / "twins", 8, same_as_zero)
    joint = replay_job(folder)
    assert joint.report.simulated_ranks == 4
    assert [r.same_as for r in joint.ranks] == [None] * 4 + [0] * 4
    assert_same_job(joint, replay_job_by_workers(folder, workers=3, in_process=True))


def test_ray_actors_give_the_same_job(differing: Path) -> None:
    """Workers as Ray actors on a Ray started here (Ray is a test dependency: this runs in CI)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed")
    joint = replay_job(differing)
    for count in (1, 2):
        workers = replay_job(differing, jobs=count, ray="local", by_workers=True)
        assert_same_job(joint, workers)
        assert workers.workers is not None and workers.workers.kind == "Ray actors" and workers.workers.count == count


def test_collectives_that_do_not_match_are_said_as_jointly(tmp_path: Path) -> None:
    def drop_one(r: int, doc: dict[str, Any]) -> None:
        if r == 5:  # rank 5 never issues the second step's second all-reduce
            nccl = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ncclKernel")]
            doc["traceEvents"].remove(nccl[3])

    folder = write_job(tmp_path / "mismatch", 6, drop_one)
    with pytest.raises(DaydreamError) as joint:
        replay_job(folder)
    with pytest.raises(DaydreamError) as workers:
        replay_job_by_workers(folder, workers=2, in_process=True)
    assert str(workers.value) == str(joint.value)
    assert "does not match across ranks" in str(workers.value)


def test_a_collective_that_can_never_start_is_said(tmp_path: Path) -> None:
    """Two process groups of the same two ranks, their collectives issued in opposite orders on one stream: each
    rank holds the stream for a collective the other reaches only after the one it holds (a deadlock)."""

    def crossed(r: int, doc: dict[str, Any]) -> None:
        nccl = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ncclKernel")]
        for k, e in enumerate(nccl[:2]):
            e["args"]["Process Group Name"] = e["args"]["Process Group Description"] = "ab"[k if r == 0 else 1 - k]
            e["args"]["Process Group Ranks"] = "[0, 1]"
        for e in nccl[2:]:
            doc["traceEvents"].remove(e)

    folder = write_job(tmp_path / "crossed", 2, crossed)
    with pytest.raises(DaydreamError, match=r"never starts: rank [01] reached it, rank [01] never did"):
        replay_job(folder, step="all")
    with pytest.raises(DaydreamError, match=r"never starts: rank [01] reached it, rank [01] never did"):
        replay_job_by_workers(folder, step="all", workers=2, in_process=True)


def test_the_cli_simulates_a_large_job_by_workers(
    differing: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """By default a job of more than BY_WORKERS_BYTES of traces is simulated by workers (here: every job, the bound
    set to 0), with the joint simulation's numbers; --no-by-workers keeps it in this process; the terminal says who
    simulated it."""
    assert not job_api.by_workers_pays(differing)  # a small job: jointly
    monkeypatch.setattr(job_api, "BY_WORKERS_BYTES", 0)
    assert job_api.by_workers_pays(differing) and not job_api.by_workers_pays(differing, FIFO)
    one = replay_job(differing)  # the Python API's default, one worker: this process, holding arrays, not graphs
    assert one.workers is not None and (one.workers.count, one.workers.kind) == (1, "this process")
    assert main(["simulate", str(differing), "--jobs", "2", "--json"]) == 0
    spread = json.loads(capsys.readouterr().out)
    assert main(["simulate", str(differing), "--jobs", "2", "--no-by-workers", "--json"]) == 0
    joint = json.loads(capsys.readouterr().out)
    assert spread.pop("workers")["count"] == 2 and joint.pop("workers") is None
    assert spread == joint
    assert main(["simulate", str(differing), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "simulated by" in out and "2 workers (local" in out
    # a timeline to export is the whole job's: jointly, unless workers were asked for
    exported = differing.parent / "timeline.json"
    assert main(["simulate", str(differing), "--jobs", "2", "--export-trace", str(exported)]) == 0
    assert exported.exists()
    capsys.readouterr()
    assert main(["simulate", str(differing), "--by-workers", "--export-trace", str(exported)]) != 0
    assert "--no-by-workers" in capsys.readouterr().err


def test_the_comm_stream_is_where_the_collectives_run(differing: Path) -> None:
    # (the generated job is what it says: its collectives on their own stream, after the kernels they reduce)
    joint = replay_job(differing)
    assert joint.timeline is not None
    threads = {str(t) for t, k in zip(joint.timeline.values("thread"), joint.timeline.values("kind")) if k == "comm"}
    assert threads and all(str(COMM_STREAM) in t for t in threads)
