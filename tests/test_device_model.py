"""The measured-kernels device model (daydream.perf.kernels.device_model): the shipped model's figures, its trees
evaluated
as sklearn does, swaps through `device`, the interval's device part, `daydream models kernels`."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daydream.perf.kernels import device_model
from daydream.perf.kernels.costs import op_dims
from daydream.perf.kernels.devices import get_device
from daydream.perf.kernels.roofline import Calibration, move_us

NEUSIGHT = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "neusight"
MEASURED = {
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "l4",
    "mi100",
    "mi210",
    "p100-pcie-16gb",
    "p4",
    "t4",
    "v100-pcie-32gb",
}


@pytest.fixture(scope="module")
def model() -> device_model.DeviceModel:
    m = device_model.shipped_model()
    assert m is not None, "daydream/kernels/data/device_model.json ships with daydream"
    return m


def test_the_shipped_model_covers_every_class_and_measured_gpu(model: device_model.DeviceModel) -> None:
    assert set(model.trees) == {"gemm", "conv", "elementwise", "norm"}
    assert set(model.anchors) == MEASURED
    for key, anchors in model.anchors.items():
        for cls, a in anchors.items():
            assert a.kernels > 0 and 0 < a.efficiency < 3 and 0 <= a.latency_us < 1000, (key, cls, a)
    # the power-capped parts (70 W) reach a smaller share of their FP32 peak on GEMMs than a 300 W A100 does
    for capped in ("t4", "l4"):
        assert model.anchors[capped]["gemm"].efficiency < 0.6 * model.anchors["a100-pcie-80gb"]["gemm"].efficiency


def test_each_gpu_left_out_the_measured_target_beats_the_roofline_ratio(model: device_model.DeviceModel) -> None:
    """The issue's bar, as far as this model reaches it: with the target's kernels measured, better than the ratio of
    datasheet rooflines for every class and every GPU of the data set."""
    rows = model.accuracy
    assert {(r.kernel_class, r.target) for r in rows} >= {("gemm", k) for k in MEASURED}
    for r in rows:
        assert r.pairs > 500
        assert r.calibrated_gmae_pct < r.roofline_gmae_pct, r
        assert r.calibrated_gmae_pct < 25, r


@pytest.mark.slow
def test_trees_as_data_predict_what_sklearn_predicts() -> None:
    pytest.importorskip("sklearn")
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(1)
    x = rng.normal(size=(3000, 5))
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] * x[:, 2] + rng.normal(scale=0.05, size=3000)
    trees = device_model._fit_trees(x, y)
    reference = HistGradientBoostingRegressor(**device_model.TREE_PARAMS).fit(x, y)
    probe = rng.normal(size=(200, 5))
    np.testing.assert_allclose(trees.predict(probe), reference.predict(probe), rtol=1e-9, atol=1e-9)
    assert trees.predict_one(list(probe[7])) == pytest.approx(float(reference.predict(probe[7:8])[0]), abs=1e-9)


def test_op_dims_lay_out_the_work() -> None:
    assert op_dims("aten::addmm", [[64], [32, 128], [128, 64]]) == (1, 32, 64, 128)
    assert op_dims("aten::bmm", [[8, 32, 16], [8, 16, 4]]) == (8, 32, 4, 16)
    assert op_dims("aten::linear", [[4, 10, 128], [64, 128], [64]]) == (1, 40, 64, 128)
    assert op_dims("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3]]) == (1, 8 * 32 * 32, 16, 27)
    assert op_dims("aten::add", [[4, 5, 6], [4, 5, 6]]) == (1, 20, 6, 1)
    assert op_dims("aten::add", []) is None


GEMM = ("gemm", "aten::mm", [[4096, 4096], [4096, 4096]])


def test_a_swap_between_measured_gpus_is_the_models_ratio(model: device_model.DeviceModel) -> None:
    t4, v100 = get_device("t4"), get_device("v100-pcie-32gb")
    s = device_model.swap(*GEMM, t4, v100, "fp32", "fp32")
    assert s is not None and s.measured and s.kernel_class == "gemm"
    roofline = t4.peak_tflops["fp32"] / v100.peak_tflops["fp32"]
    # a T4 reaches far less of its peak on a large GEMM than a V100 does: the V100 gains more than the peaks say
    assert s.ratio < 0.8 * roofline
    assert s.error_pct == next(
        r.calibrated_gmae_pct for r in model.accuracy if r.kernel_class == "gemm" and r.target == "v100-pcie-32gb"
    )
    back = device_model.swap(*GEMM, v100, t4, "fp32", "fp32")
    assert back is not None and back.ratio == pytest.approx(1 / s.ratio, rel=1e-9)


def test_a_gpu_or_dtype_without_measured_kernels_is_extrapolated() -> None:
    h100, mi300x = get_device("h100"), get_device("mi300x")
    s = device_model.swap(*GEMM, h100, mi300x, "fp32", "fp32")
    assert s is not None and not s.measured
    bf16 = device_model.swap(*GEMM, h100, get_device("a100-pcie-40gb"), "bf16", "bf16")
    assert bf16 is not None and not bf16.measured  # the data set measured FP32 GEMMs only
    # the error said of an extrapolated swap is at least the measured one's
    measured = device_model.swap(*GEMM, h100, get_device("a100-pcie-40gb"), "fp32", "fp32")
    assert measured is not None and measured.measured and bf16.error_pct >= measured.error_pct
    # memory-bound kernels move by bandwidth efficiency, which the data set measured in any dtype's bytes
    add = device_model.swap(
        "elementwise",
        "aten::add",
        [[1 << 24], [1 << 24]],
        get_device("t4"),
        get_device("a100-pcie-40gb"),
        "bf16",
        "bf16",
    )
    assert add is not None and add.measured


def test_refit_data_sets_each_gpu_and_class_from_the_first(tmp_path: Path) -> None:
    """Several data sets refit one model: each GPU and class from the first that holds it (two sessions of one GPU are
    not mixed in one anchor), a sweep's tables (with a DType column) by their FP32 rows."""
    from daydream.perf.kernels.kernel_data import read_sources

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    head = "OPName,B,M,N,K,Device,Latency"
    (first / "bmm.csv.gz").write_bytes(gzip.compress(f"{head}\nbmm,1,64,64,64,NVIDIA H100 80GB HBM3,0.05\n".encode()))
    rows = [
        "OPName,B,M,N,K,H,DType,Device,Latency",
        "bmm,1,64,64,64,,fp32,NVIDIA H100 80GB HBM3,0.01",
        "bmm,1,128,64,64,,fp32,NVIDIA H100 80GB HBM3,0.01",
        "add,1,,,,4096,fp32,NVIDIA H100 80GB HBM3,0.004",
        "add,1,,,,4096,bf16,NVIDIA H100 80GB HBM3,0.003",
    ]
    (second / "t.csv.gz").write_bytes(gzip.compress("\n".join(rows).encode()))
    got = read_sources([first, second])
    assert [(m.kernel_class, m.latency_us) for m in got] == [("gemm", 50.0), ("elementwise", 4.0)]


def test_a_gpu_without_measured_kernels_takes_its_chips_measured_sibling(model: device_model.DeviceModel) -> None:
    """An H200 is an H100 SXM with faster memory: it takes the H100's anchors, not NVIDIA's median (which made the
    H200 15% slower on FP32 GEMMs than the H100 it equals, and the measured H100 <-> H200 swaps -11% and +14%)."""
    h100, h200, mi300x = get_device("h100-sxm"), get_device("h200"), get_device("mi300x")
    assert model.extrapolated(h200, "gemm") == device_model.Anchor(
        model.anchors["h100-sxm"]["gemm"].latency_us, model.anchors["h100-sxm"]["gemm"].efficiency, 0
    )
    s = device_model.swap(*GEMM, h100, h200, "fp32", "fp32")
    assert s is not None and not s.measured and s.ratio == pytest.approx(1.0, abs=0.01)  # same SMs, clock, peak
    # a memory-bound kernel gains the H200's bandwidth (4.8 against 3.35 TB/s)
    add = device_model.swap("elementwise", "aten::add", [[1 << 26], [1 << 26]], h100, h200, "fp32", "fp32")
    assert add is not None and add.ratio == pytest.approx(3350 / 4800, rel=0.1)
    # no sibling: the vendor's median
    nvidia = [a["gemm"].efficiency for k, a in model.anchors.items() if get_device(k).vendor == "nvidia"]
    assert model.extrapolated(get_device("b200"), "gemm").efficiency == pytest.approx(float(np.median(nvidia)))
    assert model.extrapolated(mi300x, "gemm").efficiency != model.extrapolated(h200, "gemm").efficiency


def test_classes_and_ops_the_model_does_not_price_are_left_to_the_roofline() -> None:
    t4, v100 = get_device("t4"), get_device("v100-pcie-32gb")
    assert device_model.swap("reduction", "aten::sum", [[1 << 20]], t4, v100, "fp32", "fp32") is None
    assert (
        device_model.swap("gemm", "aten::mm", [[3, 4], [5, 6]], t4, v100, "fp32", "fp32") is None
    )  # shapes do not fit
    assert device_model.swap("gemm", None, None, t4, v100, "fp32", "fp32") is None


def test_move_us_applies_the_ratio_above_the_fixed_time_and_tallies_the_swap() -> None:
    t4, v100 = get_device("t4"), get_device("v100-pcie-32gb")
    cal = Calibration(device=t4, dtype="fp32", classes={})
    attrs = {"name": "volta_sgemm_128x64_nn", "class": "gemm", "duration": 40_000.0, "op": GEMM[1], "shapes": GEMM[2]}
    tally: dict = {}
    moved = move_us(attrs, cal, v100, tally=tally)
    s = device_model.swap(*GEMM, t4, v100, "fp32", "fp32")
    assert s is not None and moved == pytest.approx(40_000.0 * s.ratio)
    assert tally["kernels"] == 1 and tally["modelled"] == 1 and tally["time_us"] == pytest.approx(moved)
    assert tally["error_us"] == pytest.approx(moved * s.error_pct / 100) and "extrapolated_us" not in tally
    # a kernel without shapes moves by its class's peak ratio, counted as extrapolated at the roofline's error
    plain = move_us({**attrs, "op": None, "shapes": None}, cal, v100, tally=tally)
    assert plain == pytest.approx(40_000.0 * t4.peak_tflops["fp32"] / v100.peak_tflops["fp32"])
    assert tally["kernels"] == 2 and tally["extrapolated_us"] == pytest.approx(plain)


def test_device_swap_interval_has_a_device_part() -> None:
    from test_transforms import chain

    from daydream.api.whatif import run_whatif

    g = chain(
        ("volta_sgemm_128x64_nn", "gemm", 40_000, {"op": GEMM[1], "shapes": GEMM[2]}),
        ("vectorized_elementwise_kernel", "elementwise", 500, {"op": "aten::relu", "shapes": [[4096, 4096]]}),
    )
    g.graph["device"] = "Tesla T4"
    to_v100 = run_whatif(g, ["device"], params={"device": "v100-pcie-32gb"})
    s = device_model.swap(*GEMM, get_device("t4"), get_device("v100-pcie-32gb"), "fp32", "fp32")
    assert s is not None
    gemm = [a for _, a in to_v100.graph.nodes(data=True) if a.get("class") == "gemm"][0]
    assert gemm["duration"] == pytest.approx(40_000 * s.ratio)  # the trace's own calibration: no fixed part here
    part = {p.name: p for p in to_v100.interval.parts}["device"]
    assert 0 < part.half_width_pct < 30 and not part.extrapolated
    to_mi300x = run_whatif(g, ["device"], params={"device": "mi300x"})
    mi300x_part = {p.name: p for p in to_mi300x.interval.parts}["device"]
    assert mi300x_part.extrapolated and "read as" not in mi300x_part.source
    # an H200 has no measured kernels either, but it is read as the H100 SXM, and the interval says so
    to_h200 = run_whatif(g, ["device"], params={"device": "h200"})
    assert (
        "h200 read as h100-sxm, its chip's measured GPU" in {p.name: p for p in to_h200.interval.parts}["device"].source
    )
    assert "read as" not in part.source  # the V100's own kernels were measured
    # the tally lives beside the graph it was counted on: the unchanged graph has none
    assert "device" not in {p.name for p in run_whatif(g, [], params=None).interval.parts}


def _daydream(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_models_kernels_shows_each_class_and_gpu() -> None:
    out = _daydream("models", "kernels")
    assert out.returncode == 0, out.stderr
    assert "h100-sxm" in out.stdout and "measured target" in out.stdout and "roofline ratio" in out.stdout
    js = _daydream("models", "kernels", "--json")
    data = json.loads(js.stdout)
    assert {r["kernel_class"] for r in data["accuracy"]} == {"gemm", "conv", "elementwise", "norm"}
    bad = _daydream("models", "kernels", "--out", "x.json")
    assert bad.returncode != 0 and "--refit" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="the NeuSight data set is not at ../shared/calibration/neusight")
def test_refit_reproduces_the_shipped_figures(tmp_path: Path, model: device_model.DeviceModel) -> None:
    """One command refits; on the same data the leave-one-GPU-out figures come out as shipped (the memory-bound
    classes: the quick ones)."""
    pytest.importorskip("sklearn")
    out = tmp_path / "model.json"
    refit = device_model.refit(NEUSIGHT, out, classes=("norm",))
    assert out.is_file() and device_model.read_model(out).accuracy == refit.accuracy
    shipped = {r.target: r for r in model.accuracy if r.kernel_class == "norm"}
    for r in refit.accuracy:
        assert math.isclose(r.calibrated_gmae_pct, shipped[r.target].calibrated_gmae_pct, rel_tol=1e-6), r
        assert math.isclose(r.roofline_gmae_pct, shipped[r.target].roofline_gmae_pct, rel_tol=1e-6), r


@pytest.mark.slow
@pytest.mark.skipif(not NEUSIGHT.is_dir(), reason="the NeuSight data set is not at ../shared/calibration/neusight")
def test_refit_from_the_command_line(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    out = tmp_path / "m.json"
    run = _daydream("models", "kernels", "--refit", str(NEUSIGHT), "--classes", "norm", "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    assert {r["kernel_class"] for r in json.loads(run.stdout)["accuracy"]} == {"norm"} and out.is_file()
    bad = _daydream("models", "kernels", "--refit", str(NEUSIGHT), "--classes", "attention", "--out", str(out))
    assert bad.returncode != 0 and "the classes are gemm, conv, elementwise, norm" in bad.stderr
    import shutil

    data = tmp_path / "neusight"  # a copy: the shared data set is never the target of a write, even a refused one
    shutil.copytree(NEUSIGHT, data)
    data_file = next(data.glob("**/*.csv.gz"))
    before = data_file.read_bytes()
    onto = _daydream("models", "kernels", "--refit", str(data), "--classes", "norm", "--out", str(data_file))
    assert onto.returncode != 0 and "Traceback" not in onto.stderr and "--out" in onto.stderr
    assert data_file.read_bytes() == before
