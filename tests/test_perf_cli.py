"""`daydream models` and `daydream calibrate` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def daydream(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=timeout)


def test_models_devices_lists_the_catalog() -> None:
    out = daydream("models", "devices", "--json")
    assert out.returncode == 0, out.stderr
    devices = {d["key"]: d for d in json.loads(out.stdout)["devices"]}
    assert len(devices) >= 14 and {"a100-40gb", "h100-sxm", "h200", "b200", "mi300x", "t4", "l4"} <= set(devices)
    assert devices["a100-40gb"]["peak_tflops"]["bf16"] == 312.0 and devices["a100-40gb"]["source"]
    table = daydream("models", "devices")
    assert table.returncode == 0 and "a100-40gb" in table.stdout


def test_models_accuracy_on_the_bundled_data_meets_the_bars() -> None:
    out = daydream("models", "accuracy", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)["models"]}
    assert set(next(iter(rows.values()))) == {"name", "gmae_pct", "n", "data"}
    # the bars: GEMM and element-wise <= 10% on held-out shapes of the same device, collectives <= 15%
    assert rows["gemm-mlp/cpu"]["gmae_pct"] <= 10 and rows["gemm-mlp/cpu"]["n"] >= 100
    assert rows["elementwise-mlp/cpu"]["gmae_pct"] <= 10
    sweeps = [r for name, r in rows.items() if name.startswith("collective-piecewise/")]
    assert len(sweeps) == 5 and all(r["gmae_pct"] <= 15 for r in sweeps)


def test_models_accuracy_with_a_real_trace(shared_traces: Path) -> None:
    out = daydream("models", "accuracy", str(shared_traces / "param" / "linear_kineto.json.gz"), "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)["models"]}
    assert rows["roofline/gemm/rtx-2080-ti"]["gmae_pct"] <= 10
    assert rows["e2e-overheads/linear_kineto"]["gmae_pct"] <= 13


def test_models_accuracy_bad_path_is_a_clear_error(tmp_path: Path) -> None:
    out = daydream("models", "accuracy", str(tmp_path / "nope"))
    assert (
        out.returncode == 1 and out.stderr.strip() == f"daydream: error: {tmp_path / 'nope'}: no such file or directory"
    )


@pytest.mark.slow
def test_calibrate_quick_writes_tables_and_models(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = daydream("calibrate", "--quick", "--out", str(tmp_path / "cal"))
    assert out.returncode == 0, out.stderr
    names = sorted(p.name for p in (tmp_path / "cal").iterdir())
    assert names == [
        "elementwise.csv",
        "elementwise.meta.json",
        "elementwise.mlp.json.gz",
        "gemm.csv",
        "gemm.meta.json",
        "gemm.mlp.json.gz",
    ]
    assert "gemm-mlp/cpu" in out.stdout
    bad = daydream("calibrate", "--quick", "--kernels", "conv", "--out", str(tmp_path / "x"))
    assert bad.returncode == 1 and "unknown kernel table 'conv'" in bad.stderr


def test_the_perf_package_exports_each_model_lazily() -> None:
    import daydream.perf as perf

    assert all(callable(getattr(perf, name)) or isinstance(getattr(perf, name), type) for name in perf.__all__)
    assert perf.collective_us("allreduce", 1e6, 8, 100) == pytest.approx(1.75 * 1e6 / 1e5)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        perf.nope  # noqa: B018
