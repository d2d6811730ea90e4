"""One meaning of a step's time everywhere, the steady-state period, and an interval on every predicted time.

A step is simulated after the steps before it (its context), so that it starts with what they left pending: where
the CPU runs ahead of the GPU a step simulated alone took its span (resnet_kineto +11%, up to +170% on traces held
out), where a training run pays its period. Every command, the Python API and every JSON report that one time; and
each predicted time comes with a 90% interval from the trace's own noise and the measured error of the models the
change used (daydream.perf.trust.uncertainty), checked for calibration on the validation ledger.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from daydream import build_graph, load_trace
from daydream.api.compare import compare
from daydream.api.demo import bundled_example, run_demo
from daydream.api.replay import replay, replay_graph
from daydream.api.whatif import whatif
from daydream.perf.trust import uncertainty
from daydream.presentation.page import write_report
from daydream.trace.steps import iteration_steps

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def _gpu_traces() -> list[Path]:
    if not SHARED.is_dir():
        return []
    return [p for p in sorted(SHARED.rglob("*.json.gz")) if "_et" not in p.name and ".et." not in p.name]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared traces absent")
def test_the_default_step_is_its_measured_period_on_every_shared_trace() -> None:
    checked = 0
    for path in _gpu_traces():
        trace = load_trace(path)
        if not trace.has_gpu_activity:
            continue
        r = replay_graph(build_graph(trace))
        assert abs(r.baseline_us - r.measured_us) <= 0.03 * r.measured_us, (path.name, r.measured_us, r.baseline_us)
        checked += 1
    assert checked >= 15


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="shared traces absent")
def test_every_steady_step_of_a_trace_whose_cpu_runs_ahead() -> None:
    """resnet_kineto's CPU issues a step ahead of the GPU: each step, named with --step N, replays its period. After a
    single step of context iteration#9 took +37% (its context started with an empty queue); after two, none is off."""
    trace = load_trace(SHARED / "param" / "resnet_kineto.json.gz")
    for step in iteration_steps(trace)[1:]:
        r = replay_graph(build_graph(trace, step.name))
        assert abs(r.baseline_us - r.measured_us) <= 0.03 * r.measured_us, (step.name, r.measured_us, r.baseline_us)
    alone = replay_graph(build_graph(trace, "iteration#3", context=False))
    assert alone.baseline_us > 1.1 * alone.measured_us  # the step's span: what the default step gave before


def test_every_command_reports_the_same_step_time(tmp_path: Path) -> None:
    """simulate, run, compare, report, demo, the Python API and their JSON: one baseline, the period."""
    trace = bundled_example()
    base = replay(trace).baseline_us
    assert whatif(trace, ["batch_size"], {"factor": 1}).baseline_us == base
    scenarios = tmp_path / "s.toml"
    scenarios.write_text('[[scenario]]\nname = "same"\nscripts = ["batch_size"]\nparams = { factor = 1 }\n')
    result = compare(trace, scenarios)
    assert result.baseline.baseline_us == base and result.scenarios[0].predicted_us == pytest.approx(base)
    assert write_report(trace, [], out_dir=str(tmp_path / "rep")).baseline_us == pytest.approx(base)
    assert run_demo(trace).baseline.baseline_us == base
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "simulate", trace, "--json"], capture_output=True, text=True, timeout=120
    )
    d = json.loads(out.stdout)
    assert d["baseline_us"] == base and d["measured_us"] == pytest.approx(base)
    # the measured step, after its context
    assert [s["context"] for s in d["steps"]] == [True] * (len(d["steps"]) - 1) + [False]


# ---- the interval: one test per source, each red when that source is dropped ----------------------------------------


def test_the_baseline_interval_is_the_traces_own_noise() -> None:
    r = replay(bundled_example())
    periods = r.graph.graph["steady_periods_us"]
    assert len(periods) == 2  # three recorded steps: the two after the first
    sigma = math.sqrt(math.pi) / 2 * abs(periods[0] - periods[1])  # a normal's sigma from two draws
    expected = 100 * 1.6449 * sigma / statistics.median(periods)
    iv = r.interval
    assert iv.half_width_pct == pytest.approx(expected) and iv.driver == "noise" and not iv.extrapolated
    assert iv.low_us == pytest.approx(r.baseline_us * (1 - expected / 100))
    # more steps: the median absolute deviation
    part = uncertainty.noise_part([100.0, 102.0, 98.0, 100.0, 130.0])
    assert part is not None and part.half_width_pct == pytest.approx(1.6449 * 1.4826 * 2.0)
    assert uncertainty.noise_part([100.0]) is None  # one step says nothing of its variation


def test_a_scripts_ledger_error_widens_the_interval() -> None:
    r = whatif(bundled_example(), ["batch_size"])
    table = uncertainty.shipped_table()
    assert table is not None and len(table.scripts["batch_size"].errors_pct) >= 2
    bound = max(abs(e) for e in table.scripts["batch_size"].errors_pct)
    iv = r.interval
    names = [p.name for p in iv.parts]
    assert names == ["noise", "batch_size"]
    assert iv.parts[1].half_width_pct == pytest.approx(bound) and not iv.extrapolated
    noise = iv.parts[0].half_width_pct
    assert iv.half_width_pct == pytest.approx(math.hypot(noise, bound)) and iv.half_width_pct > noise


def test_what_the_ledger_never_measured_is_extrapolated() -> None:
    """A factor beyond the cases' values, a script the ledger never ran (kernel fusion), a script of one's own:
    widened, and said."""
    table = uncertainty.shipped_table()
    assert table is not None
    factors = table.scripts["batch_size"].params["factor"]
    beyond = whatif(bundled_example(), ["batch_size"], {"factor": 8}).interval
    assert max(factors) < 8
    part = next(p for p in beyond.parts if p.name == "batch_size")
    assert part.extrapolated and "factor = 8" in part.source
    assert part.half_width_pct == pytest.approx(2 * max(abs(e) for e in table.scripts["batch_size"].errors_pct))
    assert "kernel_fusion" not in table.scripts and "device" in table.scripts  # the H200 <-> H100 swaps
    fusion = uncertainty.model_parts(["kernel_fusion"], {})
    assert fusion[0].extrapolated and fusion[0].half_width_pct == pytest.approx(2 * table.pooled_pct())
    swap = uncertainty.model_parts(["device"], {})
    assert not swap[0].extrapolated and swap[0].half_width_pct == pytest.approx(
        max(abs(e) for e in table.scripts["device"].errors_pct)
    )
    own = uncertainty.model_parts([None], {})
    assert own[0].extrapolated and "of your own" in own[0].source


def test_compare_ranks_overlapping_intervals_as_ties(tmp_path: Path) -> None:
    scenarios = tmp_path / "s.toml"
    scenarios.write_text(
        '[[scenario]]\nname = "fused"\nscripts = ["fused_optimizer"]\n'
        '[[scenario]]\nname = "fused again"\nscripts = ["fused_optimizer"]\n'
        '[[scenario]]\nname = "twice the batch"\nscripts = ["batch_size"]\n'
    )
    result = compare(bundled_example(), scenarios)
    by_name = {s.name: s for s in result.scenarios}
    assert by_name["fused"].rank == by_name["fused again"].rank == 1  # the same prediction: a tie
    assert by_name["fused"].ties == ["fused again"] and by_name["twice the batch"].rank == 3
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "compare", bundled_example(), str(scenarios)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "1= " in out.stdout and "=: tied" in out.stdout
    # each tie said once
    assert out.stdout.count("fused = fused again") == 1 and "fused again = fused" not in out.stdout


def test_every_predicted_time_carries_its_interval_in_json_and_text(tmp_path: Path) -> None:
    trace = bundled_example()
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "run", trace, "batch_size", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    d = json.loads(out.stdout)
    iv = d["predicted_interval"]
    assert iv["low_us"] < d["predicted_us"] < iv["high_us"] and iv["driver"] in ("noise", "batch_size")
    assert d["baseline_interval"]["parts"][0]["name"] == "noise"
    text = subprocess.run(
        [sys.executable, "-m", "daydream", "run", trace, "batch_size"], capture_output=True, text=True, timeout=120
    ).stdout
    assert f"({iv['low_us'] / 1e3:,.3f}-{iv['high_us'] / 1e3:,.3f})" in text and "90% interval" in text
    report = write_report(trace, ["batch_size"], out_dir=str(tmp_path / "rep"))
    assert len(report.intervals) == 2 and report.intervals[1].half_width_pct == pytest.approx(iv["half_width_pct"])
    page = (tmp_path / "rep" / "index.html").read_text()
    assert 'id="interval-1"' in page and f"{iv['low_us'] / 1e3:,.3f}" in page
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["intervals"][1]["driver"] == iv["driver"]
    demo = run_demo(trace).to_dict()
    assert all(w["interval"]["high_us"] > w["predicted_us"] for w in demo["whatifs"])
