"""What-if scripts on a job simulated by workers, each rank's scripts run where the rank lives
(daydream.api.job_whatif): the joint what-if's report, field for field - every rank before and after, the straggler
before and after, the slowest rank, the breakdowns, the statements' effects, the printed lines - on the real 8-rank
DLRM job and on a generated job whose ranks all differ; job-level functions answered from the job's prediction; and
the two things workers cannot do said clearly."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_job_workers import write_job
from test_multirank import DLRM8, needs_dlrm8

import daydream.api.job as job_api
import daydream.graph.job as graph_job
from daydream.api.whatif import WhatIf, whatif
from daydream.api.workload import Workload
from daydream.commands.cli import main
from daydream.errors import DaydreamError, ScriptError

HALF_ON_RANK_3 = '''"""Rank 3's kernels twice as fast, every GEMM 20% faster."""
let k = select kernel where rank == 3
scale k by 0.5
scale (select kernel where name ~ "gemm") by 0.8
print "kernels of rank 3:", count(k) > 0
'''


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats within 1e-9 (a statement's effect is summed over the ranks, not task by task)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), f"{path}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def both(folder: Path, scripts: list[str], jobs: int = 1, **params: Any) -> tuple[WhatIf, WhatIf]:
    joint = whatif(Workload(str(folder), by_workers=False), scripts, params or None)
    workers = whatif(Workload(str(folder), by_workers=True, jobs=jobs), scripts, params or None)
    assert joint.graph.number_of_nodes() > 0 and workers.graph.number_of_nodes() == 0  # no process held the job
    return joint, workers


@pytest.fixture(scope="module")
def halved(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("scripts") / "half_rank3.whatif"
    path.write_text(HALF_ON_RANK_3)
    return str(path)


@needs_dlrm8
@pytest.mark.parametrize("scripts", [["straggler"], ["network"], ["scale_out"], ["halved"]], ids=lambda s: s[0])
def test_dlrm8_scripts_by_workers_as_jointly(scripts: list[str], halved: str) -> None:
    scripts = [halved if s == "halved" else s for s in scripts]
    joint, workers = both(DLRM8, scripts, jobs=2 if scripts == ["straggler"] else 1)
    a, b = joint.to_dict(), workers.to_dict()
    assert a["ranks"] is not None and len(a["ranks"]) == 8
    assert any(r["predicted_us"] != r["baseline_us"] for r in a["ranks"])  # the scripts changed the job
    if scripts == [halved]:
        # a line that differs by rank is each rank's, said so (a count over the job's tasks is each rank's count)
        assert a.pop("printed") == ["kernels of rank 3: true"]
        assert b.pop("printed") == [f"rank {r}: kernels of rank 3: {str(r == 3).lower()}" for r in range(8)]
    same(a, b)
    # the numbers the issue names, to the bit: each rank's step, wait and start after, the straggler, the slowest
    assert a["ranks"] == b["ranks"] and a["straggler"] == b["straggler"] and a["slowest_rank"] == b["slowest_rank"]
    assert a["predicted_us"] == b["predicted_us"] and a["baseline_us"] == b["baseline_us"]


def test_a_job_whose_ranks_all_differ_by_workers_as_jointly(tmp_path: Path, halved: str) -> None:
    folder = write_job(tmp_path / "job")
    for scripts in (["straggler"], [halved]):
        joint, workers = both(folder, scripts)
        a, b = joint.to_dict(), workers.to_dict()
        if scripts == [halved]:
            assert len(a.pop("printed")) == 1 and len(b.pop("printed")) == 12  # each rank's line (they differ)
        same(a, b)
        assert joint.report.ranks == workers.report.ranks
    # straggler() read the job's prediction: the rank it balanced is the baseline's straggler
    assert joint.report.straggler is not None


def test_red_when_a_rank_is_not_placed_on_the_jobs_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's script sees its tasks at the job's times: run without the offset, straggler's `release` moves wrong."""
    folder = write_job(tmp_path / "job")
    joint = whatif(Workload(str(folder), by_workers=False), ["straggler"]).to_dict()
    placed = graph_job.place_rank

    def unplaced(graph: Any, info: Any, *rest: Any) -> None:
        placed(
            graph, info.__class__(**{**{f: getattr(info, f) for f in info.__struct_fields__}, "offset_us": 0.0}), *rest
        )

    import daydream.api.job_whatif as job_whatif

    monkeypatch.setattr(job_whatif, "place_rank", unplaced)
    workers = whatif(Workload(str(folder), by_workers=True), ["straggler"]).to_dict()
    assert joint["ranks"] != workers["ranks"]


def test_job_functions_after_a_change_say_to_run_jointly(tmp_path: Path) -> None:
    folder = write_job(tmp_path / "job")
    script = tmp_path / "late.whatif"
    script.write_text("scale (select kernel where rank == 3) by 0.5\nlet r = straggler()\n")
    with pytest.raises(ScriptError, match="--no-by-workers") as err:
        whatif(Workload(str(folder), by_workers=True), [str(script)])
    assert err.value.line == 2
    assert whatif(Workload(str(folder), by_workers=False), [str(script)]).report.predicted_us > 0  # jointly: fine


def test_a_script_that_removes_a_collective_is_refused_by_workers(tmp_path: Path) -> None:
    folder = write_job(tmp_path / "job")
    script = tmp_path / "drop.whatif"
    script.write_text("remove (select comm where rank == 0)\n")
    with pytest.raises(DaydreamError, match="add or remove collectives.*--no-by-workers"):
        whatif(Workload(str(folder), by_workers=True), [str(script)])


def test_the_cli_runs_a_large_job_by_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past BY_WORKERS_BYTES of traces (here: every job) `run` simulates by workers, with the joint run's JSON."""
    folder = write_job(tmp_path / "job")
    assert main(["run", str(folder), "straggler", "--json"]) == 0
    joint = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(job_api, "BY_WORKERS_BYTES", 0)
    assert Workload(str(folder)).by_workers_pays()
    assert main(["run", str(folder), "straggler", "--json", "--jobs", "2"]) == 0
    spread = json.loads(capsys.readouterr().out)
    same(joint, spread)
    assert main(["run", str(folder), "straggler", "--jobs", "2"]) == 0
    assert "simulated by 2 workers (local processes)" in capsys.readouterr().out
    # --no-by-workers keeps it in this process; a timeline to export is the whole job's, in one process
    assert main(["run", str(folder), "straggler", "--no-by-workers"]) == 0
    assert "simulated by" not in capsys.readouterr().out
    exported = tmp_path / "timeline.json"
    assert main(["run", str(folder), "straggler", "--export-trace", str(exported)]) == 0 and exported.exists()
    capsys.readouterr()
    assert main(["run", str(folder), "straggler", "--by-workers", "--export-trace", str(exported)]) != 0
    assert "--no-by-workers" in capsys.readouterr().err


# a Ray started here, about 9 s: in the slow run (Ray's job workers are tested in the default run by test_job_workers)
@pytest.mark.slow
def test_ray_actors_run_the_scripts_as_jointly(tmp_path: Path) -> None:
    """Workers as Ray actors (a Ray started here; Ray is a test dependency): the scripts run in the actors."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed")
    folder = write_job(tmp_path / "job")
    joint = whatif(Workload(str(folder), by_workers=False), ["straggler"])
    on_ray = whatif(Workload(str(folder), by_workers=True, jobs=2, ray="local"), ["straggler"])
    assert on_ray.workers is not None and on_ray.workers.kind == "Ray actors"
    same(joint.to_dict(), on_ray.to_dict())
