"""The ``daydream`` command line, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from synth import STEP_MEASURED_US, make_trace, write_trace


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=120)


def test_simulate_json(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json.gz", make_trace(), gz=True)
    out = run("simulate", str(trace), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["measured_us"] == STEP_MEASURED_US and d["predicted_us"] == STEP_MEASURED_US
    assert d["steps"] == [{"name": "ProfilerStep#2", "measured_us": STEP_MEASURED_US, "predicted_us": STEP_MEASURED_US}]
    assert set(d["breakdown"]) == {"total_us", "cpu_only_us", "gpu_only_us", "cpu_gpu_overlap_us", "idle_us"}


def test_simulate_all_steps_and_export(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    exported = tmp_path / "sim.json"
    out = run("simulate", str(trace), "--step", "all", "--json", "--export-trace", str(exported))
    assert out.returncode == 0, out.stderr
    assert [s["name"] for s in json.loads(out.stdout)["steps"]] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    events = json.loads(exported.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    tasks = [e for e in spans if e["cat"] not in ("op", "module", "critical_path")]  # not the range tracks
    assert len(tasks) == 3 * 12 and all(e["dur"] >= 0 and isinstance(e["tid"], int) for e in spans)
    metadata = {e["name"] for e in events if e["ph"] == "M"}
    assert metadata == {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def test_simulate_table(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    out = run("simulate", str(trace))
    assert out.returncode == 0, out.stderr
    for text in ("Iteration time", "ProfilerStep#2", "0.820 ms", "Breakdown", "Critical path"):
        assert text in out.stdout


def test_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for args in (["simulate", str(bad)], ["simulate", str(tmp_path / "none.json")], ["simulate", str(bad), "--policy", "x"]):
        out = run(*args)
        assert out.returncode == 1
        assert "Traceback" not in out.stderr and out.stderr.startswith("daydream: error: ")
        assert out.stderr.count("\n") == 1
    trace = write_trace(tmp_path / "t.json", make_trace())
    out = run("simulate", str(trace), "--export-trace", str(tmp_path / "missing_dir" / "x.json"))
    assert out.returncode == 1 and "does not exist" in out.stderr


def test_no_command_prints_usage() -> None:
    out = run()
    assert out.returncode == 2 and "usage" in out.stderr
