"""Results and models as msgspec structs: the JSON the CLI prints is its report struct's, field for field, and the
saved models are written byte for byte as before."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest

from daydream.api.demo import DemoReport, run_demo
from daydream.api.replay import ReplayReport, replay_graph
from daydream.api.validate import CaseResult, Ledger, LedgerReport
from daydream.api.whatif import WhatIfReport, run_whatif
from daydream.graph import build_graph
from daydream.perf.collectives import TraceCollectiveCosts, model_from_dict
from daydream.perf.cpu.end_to_end import predict_e2e
from daydream.perf.cpu.overhead_table import Overheads, extract_overheads
from daydream.perf.kernels import mlp
from daydream.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "daydream" / "examples" / "mlp_cpu.json.gz"


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return build_graph(load_trace(EXAMPLE))


def test_each_result_is_its_report_struct(graph) -> None:  # type: ignore[no-untyped-def]
    """to_dict is the report struct as JSON values, in the struct's field order, and reads back as it."""
    replay = replay_graph(graph)
    whatif = run_whatif(graph, ["threads"], {"threads": 1})
    demo = run_demo(str(EXAMPLE))
    for result, report in ((replay, ReplayReport), (whatif, WhatIfReport), (demo, DemoReport)):
        d = result.to_dict()
        assert list(d) == list(report.__struct_fields__)
        assert msgspec.convert(d, report) == result.report
    assert list(replay.to_dict()["critical_path"]) == [
        "tasks",
        "gpu_us",
        "cpu_us",
        "by_kernel_class",
        "by_phase",
        "by_layer",
        "by_name",
        "release_us",
    ]
    assert whatif.to_dict()["tasks"] == {"baseline": whatif.baseline.tasks, "predicted": whatif.predicted.tasks}


def test_the_ledger_keys_stay_in_order() -> None:
    case = CaseResult("c", 100.0, 1.0, 90.0, 2.0, 3, None, 50.0, "stopped")
    d = Ledger("cases.toml", [case]).to_dict()
    assert list(d) == list(LedgerReport.__struct_fields__)
    assert d["cases"][0] == {
        "name": "c",
        "measured_us": 90.0,
        "predicted_us": None,
        "error_pct": None,
        "no_change_error_pct": case.no_change_error_pct,
        "ratio_us": 50.0,
        "ratio_error_pct": case.ratio_error_pct,
        "spread_pct": 2.0,
        "runs": 3,
        "before_us": 100.0,
        "before_spread_pct": 1.0,
        "moved": case.moved,
        "beats_no_change": None,
        "message": "stopped",
        "note": "",
        "interval": None,
        "covered": None,
    }


@pytest.mark.parametrize("kernel", ["gemm", "elementwise"])
def test_bundled_kernel_models_save_byte_for_byte(kernel: str, tmp_path: Path) -> None:
    bundled = REPO / "daydream" / "kernels" / "data" / "cpu" / f"{kernel}.mlp.json.gz"
    model = mlp.KernelModel.load(bundled)
    again = model.save(tmp_path / bundled.name)
    assert again.read_bytes() == bundled.read_bytes()
    assert json.loads(gzip.decompress(again.read_bytes())) == json.loads(json.dumps(model.to_dict()))


def test_overheads_and_the_estimate_as_json(graph) -> None:  # type: ignore[no-untyped-def]
    trace = load_trace(EXAMPLE)
    ov = extract_overheads(trace)
    d = ov.to_dict()
    assert list(d) == list(Overheads.__struct_fields__) and list(d["t2"]) == sorted(d["t2"])
    assert Overheads.from_dict(json.loads(json.dumps(d))) == ov
    e = predict_e2e(trace, ov)
    assert list(e.to_dict()) == [
        "step",
        "predicted_us",
        "period_us",
        "measured_us",
        "cpu_us",
        "gpu_us",
        "gpu_active_us",
        "ops",
        "kernels",
    ]


def test_collective_models_are_tagged_by_kind() -> None:
    costs = TraceCollectiveCosts(
        {
            "broadcast": model_from_dict(
                {"kind": "alpha-beta", "collective": "broadcast", "ranks": 2, "latency_us": 5, "bus_bw_gbs": 10}
            ),
            "allreduce": model_from_dict(
                {
                    "kind": "piecewise",
                    "collective": "all_reduce",
                    "ranks": 8,
                    "m1": 4096,
                    "m2": None,
                    "latency_us": 20,
                    "max_bus_bw_gbs": 100,
                    "sigmoid": [2, 20, 0.4, 0.3],
                }
            ),
        }
    )
    d = costs.to_dict()
    assert list(d) == ["allreduce", "broadcast"] and d["allreduce"]["collective"] == "allreduce"  # normalized on load
    assert [list(m)[0] for m in d.values()] == ["kind", "kind"]
    assert {k: model_from_dict(json.loads(json.dumps(v))) for k, v in d.items()} == costs.models
