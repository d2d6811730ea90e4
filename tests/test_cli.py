"""The ``daydream`` command line, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from synth import STEP_PERIOD_US, make_trace, write_trace


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=120)


def test_simulate_json(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json.gz", make_trace(), gz=True)
    out = run("simulate", str(trace), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["measured_us"] == STEP_PERIOD_US and d["baseline_us"] == d["predicted_us"] == STEP_PERIOD_US
    # baseline_us: the unchanged trace replayed, as run calls it; predicted_us: the README's first name for it, kept
    assert d["steps"][1] == {
        "name": "ProfilerStep#2",
        "measured_us": STEP_PERIOD_US,
        "baseline_us": STEP_PERIOD_US,
        "predicted_us": STEP_PERIOD_US,
        "context": False,
    }
    assert d["steps"][0]["name"] == "ProfilerStep#1" and d["steps"][0]["context"]  # simulated before it, not measured
    assert set(d["breakdown"]) == {"total_us", "cpu_only_us", "gpu_only_us", "cpu_gpu_overlap_us", "idle_us"}


def test_simulate_all_steps_and_export(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    exported = tmp_path / "sim.json"
    out = run("simulate", str(trace), "--step", "all", "--json", "--export-trace", str(exported))
    assert out.returncode == 0, out.stderr
    assert [s["name"] for s in json.loads(out.stdout)["steps"]] == [
        "ProfilerStep#1",
        "ProfilerStep#2",
        "ProfilerStep#3",
    ]
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
    for text in (
        "Iteration time",
        "ProfilerStep#1 (context)",
        "ProfilerStep#2",
        "1.000 ms",
        "Breakdown",
        "Critical path",
    ):
        assert text in out.stdout


def test_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for args in (
        ["simulate", str(bad)],
        ["simulate", str(tmp_path / "none.json")],
        ["simulate", str(bad), "--policy", "x"],
    ):
        out = run(*args)
        assert out.returncode == 1
        assert "Traceback" not in out.stderr and out.stderr.startswith("daydream: error: ")
        assert out.stderr.count("\n") == 1
    trace = write_trace(tmp_path / "t.json", make_trace())
    out = run("simulate", str(trace), "--export-trace", str(tmp_path / "missing_dir" / "x.json"))
    assert out.returncode == 1 and "does not exist" in out.stderr


def test_the_command_exits_with_its_output_written(tmp_path: Path) -> None:
    # the command leaves without tearing the interpreter down (daydream.commands.cli.run): its output still arrives
    # whole,
    # a reader that stops early is no error, an output that does not fit is one
    trace = write_trace(tmp_path / "t.json", make_trace())
    out = subprocess.run(
        f"{sys.executable} -m daydream simulate {trace} --json | head -c 20",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout == '{"trace":"' + str(trace)[:10] and out.stderr == ""
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            out = subprocess.run(
                [sys.executable, "-m", "daydream", "simulate", str(trace), "--json"],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        assert out.returncode == 1 and out.stderr.startswith("daydream: error: writing the output: ")
    big = run("simulate", str(trace), "--json")
    assert big.returncode == 0 and json.loads(big.stdout)["trace"] == str(trace)


def test_no_command_prints_usage() -> None:
    out = run()
    assert out.returncode == 2 and "usage" in out.stderr


def test_one_did_you_mean_for_every_unknown_name(tmp_path: Path) -> None:
    """Scripts, steps, devices, links, -p params, REPL commands and trace files all say "did you mean" through
    daydream.errors.did_you_mean: it names only options that exist, as they are spelled, the wrong case closest."""
    import ast as pyast

    from daydream.errors import close_matches, did_you_mean

    assert close_matches("profilerstep#5", ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]) == ["ProfilerStep#5"]
    assert did_you_mean("ampp", ["amp", "ddp"]) == "did you mean 'amp'?"
    assert (
        did_you_mean("a100-4gb", ["a100-40gb", "a100-80gb", "h100"], n=2) == "did you mean 'a100-40gb' or 'a100-80gb'?"
    )
    assert did_you_mean("zzz", ["amp"]) is None
    package = Path(__file__).resolve().parents[1] / "daydream"
    users = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if any(
            isinstance(n, (pyast.Import, pyast.ImportFrom)) and "difflib" in pyast.dump(n)
            for n in pyast.walk(pyast.parse(p.read_text()))
        )
    ]
    assert users == ["errors.py"], users  # the one helper: no module matches names its own way
    trace = write_trace(tmp_path / "t.json", make_trace())
    out = run("simulate", str(trace), "--step", "profilerstep#2")
    assert (
        out.returncode == 1
        and "did you mean 'ProfilerStep#2'? (steps: ProfilerStep#1, ProfilerStep#2, ProfilerStep#3;" in out.stderr
    )
    out = run("run", str(trace), "ampp")
    assert out.returncode == 2 and "did you mean 'amp'?" in out.stderr
    out = run("run", str(trace), "device", "-p", "device=h10")
    assert out.returncode == 2 and "unknown device 'h10'; did you mean 'h100'?" in out.stderr
    assert "h100-sxm (h100, h100-sxm5, h100-80gb)" in out.stderr  # the alias suggested is one the catalog shows
    out = run("simulate", str(tmp_path / "t.jsn"))
    assert (
        out.returncode == 1
        and out.stderr == f"daydream: error: {tmp_path / 't.jsn'}: no such file; did you mean 't.json'?\n"
    )
