"""Every table of a step adds up to that step, on every shared trace and every command.

The invariants (issue "numbers a user can act on"): a breakdown's parts sum to the step it breaks down; the critical
path's GPU and CPU time add up to the step; a report's layers (time on the critical path) add up to its step; a
stream's busy and idle time make the step; no per-step row exceeds its step unless it says it sums over resources
(kernels over streams); the terminal, the JSON and the page give one value for one quantity. Checked on the bundled
trace and each Kineto trace of ../shared/traces (skipped where absent), for ``simulate``, ``run``, ``compare``,
``report`` (report.json and the page), ``demo`` and ``plan --json``, within 0.1%.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SHARED_TRACES

from daydream.api.demo import bundled_example
from daydream.commands.cli import main

REL = 1e-3  # within 0.1%
PARTS = ("cpu_only_us", "gpu_only_us", "cpu_gpu_overlap_us", "idle_us")


def _traces() -> list[str]:
    found = [bundled_example()]
    if SHARED_TRACES.is_dir():
        found += sorted(str(p) for p in SHARED_TRACES.glob("*/*.json.gz") if not p.name.endswith("_et.json.gz"))
        if (SHARED_TRACES / "param" / "dlrm8").is_dir():
            found.append(str(SHARED_TRACES / "param" / "dlrm8"))
    return found


TRACES = _traces()


def _id(path: str) -> str:
    return Path(path).name.removesuffix(".json.gz")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out = _run([*argv, "--json"], capsys)
    assert code == 0, argv
    return json.loads(out)


def _adds_up(breakdown: dict[str, float], step_us: float, what: str) -> None:
    """A breakdown's parts sum to its total, and the total is the step it breaks down."""
    parts = sum(breakdown[k] for k in PARTS)
    assert parts == pytest.approx(breakdown["total_us"], rel=REL), (
        f"{what}: parts {parts} != total {breakdown['total_us']}"
    )
    assert breakdown["total_us"] == pytest.approx(step_us, rel=REL), (
        f"{what}: breakdown {breakdown['total_us']} != step {step_us}"
    )


def _ms(us: float) -> str:
    return f"{us / 1e3:,.3f}"


def _script(trace: str, tmp_path: Path) -> str:
    """A change every trace can take: its GPU work halved (a CPU recording: its CPU work)."""
    path = tmp_path / "half.whatif"
    path.write_text(
        '"""Half the work."""\nif count(gpu) + count(memcpy) > 0 {\n    scale gpu | memcpy by 0.5\n} else {\n'
        "    scale cpu by 0.5\n}\n"
    )
    return str(path)


@pytest.mark.parametrize("steps", [[], ["--step", "all"]], ids=["default step", "all steps"])
@pytest.mark.parametrize("trace", TRACES, ids=_id)
def test_simulate_tables_add_up_to_the_step(trace: str, steps: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Over several measured steps the step is their median period, and each table is one step's share."""
    d = _json(["simulate", trace, *steps], capsys)
    step = d["baseline_us"]
    _adds_up(d["breakdown"], step, "simulate breakdown")
    cp = d.get("critical_path")
    if cp is not None:  # one trace (a job's ranks each have their own)
        assert cp["gpu_us"] + cp["cpu_us"] + cp["release_us"] == pytest.approx(step, rel=REL), "critical path's time"
        for table in ("by_phase", "by_kernel_class", "by_layer", "by_name"):
            assert sum(cp[table].values()) <= step * (1 + REL), f"critical path {table} exceeds the step"
    code, text = _run(["simulate", trace, *steps], capsys)
    assert code == 0
    flat = " ".join(text.split())
    for key in ("total_us", *PARTS):  # the terminal shows the JSON's values
        if key != "total_us":
            assert f"{_ms(d['breakdown'][key])} ms" in flat, key
    assert f"{_ms(step)} ms" in flat


@pytest.mark.parametrize("trace", TRACES, ids=_id)
def test_run_tables_add_up_to_each_step(trace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(["run", trace, _script(trace, tmp_path)], capsys)
    _adds_up(d["breakdown"]["baseline"], d["baseline_us"], "run baseline breakdown")
    _adds_up(d["breakdown"]["predicted"], d["predicted_us"], "run predicted breakdown")
    # what each statement changed in the measured step is part of what it changed in the window
    for e in d["statements"]:
        assert abs(e["step_duration_delta_us"]) <= abs(e["duration_delta_us"]) * (1 + REL) + 1e-6
        assert e["step_tasks"] <= e["tasks"]
    text = " ".join(_run(["run", trace, _script(trace, tmp_path)], capsys)[1].split())
    assert f"{_ms(d['predicted_us'])} ms" in text and f"{_ms(d['baseline_us'])} ms" in text
    assert "-0.000" not in text and "(-100.0%)" not in text


@pytest.mark.parametrize("trace", TRACES, ids=_id)
def test_compare_and_demo_breakdowns_are_of_their_steps(
    trace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'[[scenario]]\nname = "half"\nscripts = ["{_script(trace, tmp_path)}"]\n')
    d = _json(["compare", trace, str(spec)], capsys)
    _adds_up(d["baseline"]["breakdown"], d["baseline"]["baseline_us"], "compare baseline")
    for s in d["scenarios"]:
        _adds_up(s["breakdown"], s["predicted_us"], f"compare {s['name']}")
        bound = s["bound"]
        assert sum(bound["by_phase"].values()) <= 100 * (1 + REL) and bound["gpu_pct"] + bound["cpu_pct"] <= 100 * (
            1 + REL
        )
    if Path(trace).is_dir():
        return  # demo and plan take one trace
    demo = _json(["demo", trace], capsys)
    _adds_up(demo["breakdown"], demo["baseline_us"], "demo breakdown")


@pytest.mark.parametrize("trace", TRACES, ids=_id)
def test_report_tables_add_up_and_the_page_says_the_same(
    trace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rep"
    code, text = _run(["report", trace, _script(trace, tmp_path), "--out", str(out)], capsys)
    assert code == 0
    doc = json.loads((out / "report.json").read_text())
    html = (out / "index.html").read_text()
    flat = " ".join(text.split())
    assert doc["baseline_us"] == doc["analyses"][0]["step_us"] and doc["predicted_us"] == doc["analyses"][1]["step_us"]
    for a in doc["analyses"]:
        step = a["step_us"]
        _adds_up(a["breakdown"], step, f"report {a['label']} breakdown")
        for table in ("layers", "modules"):
            if a[table]:
                total = sum(r["critical_us"] for r in a[table])
                assert total == pytest.approx(step, rel=REL), f"report {a['label']} {table}: {total} != step {step}"
        streams = len(a["streams"]) or 1
        for s in a["streams"]:
            assert s["busy_us"] + s["idle_us"] == pytest.approx(step, rel=REL)
        for k in a["kernels"]:  # a row of kernels is over the step, summed over its streams (said in its header)
            assert k["total_us"] <= step * streams * (1 + REL), k["name"]
        cp = a["critical_path"]
        assert cp["gpu_us"] + cp["cpu_us"] + cp["release_us"] == pytest.approx(step, rel=REL)
        # the page and the terminal give the JSON's numbers
        assert _ms(step) in html and f"{_ms(step)} ms" in flat
        for key in PARTS:
            assert f'<td class="num">{_ms(a["breakdown"][key])}</td>' in html or _ms(a["breakdown"][key]) in html, key
    titles = re.findall(r"<title>[^<]*</title>", html)
    assert titles


@pytest.mark.parametrize("trace", [t for t in TRACES if not Path(t).is_dir()], ids=_id)
def test_plan_shares_are_of_each_plans_step(trace: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(["plan", trace, "--gpus", "4", "--json"], capsys)
    if code != 0:
        pytest.skip(f"plan does not apply to {_id(trace)} (exit {code})")
    d = json.loads(out)
    for p in d["plans"]:
        if p["predicted_us"] is None or p["bound"] is None:
            continue
        b = p["bound"]
        assert b["gpu_pct"] + b["cpu_pct"] <= 100 * (1 + REL) and sum(b["by_phase"].values()) <= 100 * (1 + REL), p[
            "name"
        ]
