"""Results in a notebook: a short repr, and rows a DataFrame takes (a list of flat dicts, the same keys in each)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from daydream.api.demo import bundled_example
from daydream.api.replay import replay
from daydream.api.whatif import whatif
from daydream.api.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"


def _flat_rows(rows: list[dict[str, object]]) -> None:
    assert rows and all(set(r) == set(rows[0]) for r in rows)
    assert all(v is None or isinstance(v, (int, float, str)) for r in rows for v in r.values())


def test_a_whatif_and_a_replay_in_a_notebook() -> None:
    result = whatif(Workload(bundled_example(), step="all"), ["batch_size"])
    text = repr(result)
    assert (
        len(text) < 300
        and "scripts=['batch_size']" in text
        and "speedup 0.603x, throughput 1.207x" in text
        and "390 tasks" in text
    )
    rows = result.rows()
    _flat_rows(rows)
    assert [r["step"] for r in rows] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert rows[0]["speedup"] == pytest.approx(rows[0]["baseline_us"] / rows[0]["predicted_us"])
    assert rows[0]["throughput"] == pytest.approx(2 * rows[0]["speedup"])  # batch_size x2: twice the samples a step
    base = replay(bundled_example(), step="all")
    assert len(repr(base)) < 300 and repr(base).startswith("Replay(trace=") and ", baseline " in repr(base)
    _flat_rows(base.rows())
    assert [r["step"] for r in base.rows()] == [r["step"] for r in rows]
    assert [r["measured_us"] for r in base.rows()] == pytest.approx([r["measured_us"] for r in rows])
    assert [r["baseline_us"] for r in base.rows()] == pytest.approx([r["baseline_us"] for r in rows])


@pytest.mark.skipif(not DLRM8.is_dir(), reason="shared traces absent")
def test_a_job_in_a_notebook() -> None:
    from daydream.api.job import replay_job

    job = replay_job(DLRM8)
    assert repr(job) == (
        "JobReplay(trace='"
        + str(DLRM8)
        + "', 8 ranks, slowest rank 1: measured 19.717 ms, baseline 19.716 ms, straggler 7)"
    )
    _flat_rows(job.rows())
    assert [r["rank"] for r in job.rows()] == list(range(8)) and job.rows()[1]["baseline_us"] == job.baseline_us
    changed = whatif(DLRM8, ["straggler"])
    assert len(repr(changed)) < 300
    rows = changed.rows()
    _flat_rows(rows)
    assert rows[7]["baseline_us"] == pytest.approx(12311.0) and rows[7]["speedup"] < 1


def test_params_are_shown_in_their_units() -> None:
    # bucket_cap's default is written 25MiB: shown "25 MiB", not 2.62144e+07; a value given with a unit keeps it
    from daydream.api.demo import bundled_traces
    from daydream.api.whatif import whatif

    trace = next(t for t in bundled_traces() if t.endswith("_cpu.json.gz"))
    shown = whatif(trace, ["ddp"], {"ranks": 2}).to_dict()["params_text"]
    assert shown["bucket_cap"] == "25 MiB" and shown["first_bucket"] == "1 MiB"
    assert shown["link"] == "nvlink3" and shown["ranks"] == "2"
    given = whatif(trace, ["ddp"], {"ranks": 2, "bucket_cap": "10MB"}).to_dict()
    assert given["params_text"]["bucket_cap"] == "10 MB" and given["params"]["bucket_cap"] == 10_000_000
    assert whatif(trace, ["batch_size"], {"kernel_fixed": "1.5ms"}).to_dict()["params_text"]["kernel_fixed"] == "1.5 ms"


def test_one_vocabulary_in_every_result() -> None:
    """The unchanged trace replayed is the baseline (``baseline_us``) in simulate, run, demo, compare and report; the
    prediction after scripts ``predicted_us``; speedup baseline / predicted (above 1 faster) everywhere; throughput
    the speedup times the samples a step processes."""
    from daydream.api.compare import Scenario, compare
    from daydream.api.demo import run_demo

    trace = bundled_example()
    simulated = replay(trace).to_dict()
    assert simulated["baseline_us"] == simulated["predicted_us"]  # predicted_us: the README's first name for it, kept
    assert [s["baseline_us"] for s in simulated["steps"]] == [s["predicted_us"] for s in simulated["steps"]]
    ran = whatif(trace, ["batch_size"]).to_dict()
    assert ran["baseline_us"] == simulated["baseline_us"] and ran["speedup"] == pytest.approx(
        ran["baseline_us"] / ran["predicted_us"]
    )
    assert (ran["samples"], ran["throughput"]) == (2, pytest.approx(2 * ran["speedup"]))
    demo = run_demo(trace).to_dict()
    assert demo["baseline_us"] == simulated["baseline_us"] and "simulated_us" not in demo
    (batch,) = [w for w in demo["whatifs"] if w["script"] == "batch_size"]
    assert batch["speedup"] < 1 < batch["throughput"]  # before / after: a slower step, more samples per second
    assert (batch["speedup"], batch["throughput"]) == (pytest.approx(ran["speedup"]), pytest.approx(ran["throughput"]))
    compared = compare(trace, [Scenario("bigger batch", ["batch_size"])]).to_dict()
    assert (
        compared["baseline"]["baseline_us"] == simulated["baseline_us"] and "simulated_us" not in compared["baseline"]
    )
    (scenario,) = compared["scenarios"]
    assert (scenario["speedup"], scenario["throughput"]) == (
        pytest.approx(ran["speedup"]),
        pytest.approx(ran["throughput"]),
    )


def test_a_trace_in_a_notebook_is_one_line() -> None:
    from daydream import load_trace

    text = repr(load_trace(bundled_example()))
    assert (
        len(text) < 400 and text.startswith("Trace(") and " events: " in text
    )  # was every event, millions of characters


def test_a_change_too_small_to_show_has_no_sign_or_percent() -> None:
    from daydream.units import change, signed_ms

    assert change(0.3, 0.0) == "0.000 ms"  # was "-0.000 ms (-100.0%)"
    assert change(0.3, 1500.3) == "+1.500 ms"  # before shows as 0.000 ms: no percent of it
    assert change(2000.0, 1500.0) == "-0.500 ms (-25.0%)"
    # a part under 1% of the step it is part of: no percentage of it (was "+6165.2%")
    assert (
        change(600.0, 37_591.0, whole=158_000.0) == "+36.991 ms" and change(600.0, 37_591.0) == "+36.991 ms (+6165.2%)"
    )
    assert signed_ms(-0.4) == "0.000 ms" and signed_ms(-0.6) == "-0.001 ms"


def test_a_param_two_scripts_bind_apart_is_shown_with_each() -> None:
    """`run T amp device` printed `dtype = none` while amp ran fp16: each script's value, by script, where they
    differ."""
    from test_transforms import chain

    from daydream.api.whatif import run_whatif

    g = chain(("volta_sgemm_128x64_nn", "gemm", 100, {}), ("relu", "elementwise", 20, {}))
    g.graph["device"] = "NVIDIA A100-SXM4-40GB"
    shown = run_whatif(g, ["amp", "device"]).params_text
    assert shown["dtype"] == "fp16 (amp), none (device)" and shown["device"] == "h100"
    same = run_whatif(g, ["amp", "device"], params={"dtype": "bf16"}).params_text  # a bare word: its text
    assert same["dtype"] == "bf16"


def _bench_reprs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_reprs", ROOT / "bench" / "bench_reprs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("events", [None, pytest.param(20_000, marks=pytest.mark.slow)], ids=["bundled", "tiled-20k"])
def test_every_result_has_a_repr_of_one_screen(events: int | None, tmp_path: Path) -> None:
    """Each public result (load_trace, build_graph, simulate, critical_path, replay, whatif, compare, demo, plan,
    report, embeddings, models) and what it holds, three levels down, has a repr under 2,000 characters on the bundled
    trace and on a tiling of it with every step in the graph (issue 75: a timeline's repr was 120,340 characters on the
    bundled trace; bench/bench_reprs.py checks a 1M-event tiling, too slow for the suite)."""
    bench = _bench_reprs()
    trace = bundled_example() if events is None else bench.tiled(events, tmp_path)
    named = bench.results(Path(trace), tmp_path, step=None if events is None else "all")
    assert len(named) >= 14
    assert bench.too_long(named) == []
    # the figures as people read them, the graph and the path by what they hold
    assert "ms" in repr(named["whatif"].interval) and "e+" not in repr(named["whatif"].interval)
    assert repr(named["build_graph"]).startswith("TaskGraph(") and " tasks, " in repr(named["build_graph"])
    assert "by layer:" in repr(named["critical_path"])


def test_the_critical_path_sums_by_what_its_tasks_are() -> None:
    from daydream import build_graph, critical_path, load_trace, simulate

    path = critical_path(simulate(build_graph(load_trace(bundled_example()))))
    by_layer = path.by("layer")
    assert sum(by_layer.values()) == pytest.approx(path.length_us())
    assert list(by_layer.values()) == sorted(by_layer.values(), reverse=True)
    assert len(path.by("name", top=3)) == 3 and set(path.by("kind")) <= {"cpu", "dataloader", "gpu", "runtime"}
