"""bench/calibrate_gpu.py, the GPU kernel-table sweep (run on a lent GPU by validation/gpu_session.sh): the shapes it
picks, the tables it writes in the NeuSight layout (measured here on the CPU, a few shapes), and the H100 tables it
measured (kernels/data/h100-sxm/)."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import statistics
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEUSIGHT = ROOT.parent / "shared" / "calibration" / "neusight"
H100 = ROOT / "kernels" / "data" / "h100-sxm"


@pytest.fixture(scope="module")
def sweep() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibrate_gpu", ROOT / "bench" / "calibrate_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_resnet50_convolutions_are_torchvisions(sweep: ModuleType) -> None:
    convs = sweep.RESNET50
    assert len(convs) == 1 + 4 * 6 and convs[0] == (3, 64, 7, 96, 2, 3)  # the stem: 7x7, stride 2, 96x96 images
    # the four stages' 3x3 convolutions at 24, 12, 6 and 3 pixels (the stride-2 ones read the stage's input side)
    assert {(c, side) for c, f, r, side, stride, pad in convs if r == 3 and stride == 1} == {
        (64, 24),
        (128, 12),
        (256, 6),
        (512, 3),
    }


@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="needs ../shared/calibration/neusight")
def test_shapes_pair_with_the_data_sets_rows(sweep: ModuleType) -> None:
    shapes = sweep.pick_shapes(NEUSIGHT)
    assert set(shapes) == {"gemm", "conv", "vector", "sdpa"}
    gemm = shapes["gemm"]
    # two of the data set's H100 shapes for every small one, so that a budget cut keeps both kinds
    first = gemm[:300]
    small = [g for g in first if max(g["dims"][1:]) <= 2048 and g["dims"][0] <= 64]
    assert 90 <= len(small) <= 200
    assert all(2 * b * m * n * k <= sweep.MAX_GEMM_FLOPS for b, m, n, k in (g["dims"] for g in gemm))
    assert shapes["conv"][0]["source"] == "resnet50" and len(shapes["sdpa"]) > 100


def test_a_few_shapes_measured_on_the_cpu(sweep: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    shapes = {
        "gemm": [{"op": "linear", "dims": [2, 32, 48, 64]}, {"op": "bmm", "dims": [3, 16, 16, 16]}],
        "conv": [{"op": "conv", "dims": [2, 3, 8, 3, 16, 1, 1], "source": "resnet50"}],
        "vector": [{"op": op, "dims": [4, 256]} for op in ("add", "powu", "ln", "softmax", "gelu")],
        "sdpa": [{"batch": 1, "heads": 2, "seq": 64, "head_dim": 16, "causal": True}],
    }
    counts = sweep.measure(shapes, tmp_path, budget=60, device="cpu")
    assert counts["gemm"] == 2 * 4 and counts["conv"] == 3 and counts["vector"] == 5 * 2
    rows = list(csv.DictReader((tmp_path / "gemm.csv").open()))
    assert [r["DType"] for r in rows[:4]] == ["fp32", "tf32", "fp16", "bf16"]
    for r in rows:
        assert 0 < float(r["Min"]) <= float(r["Latency"]) and int(r["Runs"]) >= sweep.MIN_RUNS
        assert r["OPName"] in ("linear", "bmm") and r["Device"] == "cpu"
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["rows"] == counts and meta["torch"] and meta["statistic"] == "median"


def _table(name: str) -> list[dict[str, str]]:
    with gzip.open(H100 / f"{name}.csv.gz", "rt") as f:
        return list(csv.DictReader(f))


def test_the_h100_tables() -> None:
    meta = json.loads((H100 / "meta.json").read_text())
    assert meta["gpu"] == "NVIDIA H100 80GB HBM3" and meta["torch"].startswith("2.11") and meta["cuda"] == "13.0"
    gemm = _table("gemm")
    assert len(gemm) == meta["rows"]["gemm"] == 7112

    def tflops(dtype: str) -> float:
        rates = [
            2 * int(r["B"]) * int(r["M"]) * int(r["N"]) * int(r["K"]) / float(r["Latency"]) / 1e9
            for r in gemm
            if r["DType"] == dtype and 2 * int(r["B"]) * int(r["M"]) * int(r["N"]) * int(r["K"]) >= 1e11
        ]
        return statistics.median(rates)

    # FP32 under its 67 TFLOP/s peak, tensor cores far above it (the README's figures)
    assert 40 < tflops("fp32") < 67 < tflops("tf32") < tflops("bf16")
    attention = _table("sdpa")
    assert {(r["Backend"], r["Direction"]) for r in attention} == {
        (b, d) for b in ("flash", "efficient") for d in ("forward", "backward")
    }


@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="needs ../shared/calibration/neusight")
def test_the_h100_fp32_gemms_agree_with_the_data_sets_h100() -> None:
    from daydream.perf.kernels.kernel_data import read_measurements

    theirs = {(m.op, m.dims): m.latency_us for m in read_measurements(NEUSIGHT) if "H100" in m.device}
    ratios = [
        float(r["Latency"]) * 1e3 / theirs[(r["OPName"], dims)]
        for r in _table("gemm")
        if r["DType"] == "fp32" and (r["OPName"], dims := tuple(int(r[k]) for k in "BMNK")) in theirs
    ]
    assert len(ratios) == 1378
    assert 0.85 < statistics.median(ratios) < 1.05  # 0.94: two years of cuBLAS, another machine
