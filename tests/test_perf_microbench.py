"""The microbenchmark harness: shape sampling, costs, the CSV tables it writes, the noise floor."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path

import pytest

from daydream.errors import DaydreamError
from daydream.perf.kernels import microbench as mb
from daydream.stats import quantile


def test_gemm_costs_by_hand() -> None:
    # 2 x (3x5 @ 5x4): 2*2*3*4*5 FLOPs; bytes: 2 * (A 3*5 + B 5*4 + C 3*4) elements * 4 bytes
    assert mb.gemm_costs(2, 3, 4, 5, "float32") == (240.0, 2 * (15 + 20 + 12) * 4.0)
    assert mb.gemm_costs(1, 10, 10, 10, "float64") == (2000.0, 300 * 8.0)


def test_elementwise_costs_by_hand() -> None:
    assert mb.elementwise_costs("add", 1000, "float32") == (1000.0, 3 * 1000 * 4.0)  # two reads, one write
    assert mb.elementwise_costs("relu", 1000, "float64") == (1000.0, 2 * 1000 * 8.0)
    assert mb.elementwise_costs("gelu", 10, "bfloat16") == (1750.0, 2 * 10 * 2.0)


def test_sample_shapes_seeded_distinct_and_in_range() -> None:
    r = mb.RANGES["cpu"]
    shapes = mb.sample_shapes("gemm", 300, "cpu", seed=3)
    assert shapes == mb.sample_shapes("gemm", 300, "cpu", seed=3)
    assert shapes != mb.sample_shapes("gemm", 300, "cpu", seed=4)
    keys = {tuple(s.params[c] for c in mb.FEATURE_COLUMNS["gemm"]) for s in shapes}
    assert len(keys) == 300
    for s in shapes:
        p = s.params
        assert (p["op"] == "mm") == (p["batch"] == 1)
        assert p["dtype"] in mb.DEFAULT_DTYPES["cpu"]
        assert all(r.gemm_dim[0] <= p[d] <= r.gemm_dim[1] for d in "mnk")
        assert p["flops"] * mb.DTYPE_BYTES[p["dtype"]] / 4 <= r.gemm_max_flops
        assert p["bytes"] <= r.gemm_max_bytes
        assert (p["flops"], p["bytes"]) == mb.gemm_costs(p["batch"], p["m"], p["n"], p["k"], p["dtype"])
    # log-uniform: sizes spread over the decades of the range, not bunched at one end
    ms = sorted(s.params["m"] for s in shapes)
    assert ms[len(ms) // 4] < 100 < ms[3 * len(ms) // 4]
    assert {s.params["dtype"] for s in shapes} == {"float32", "float64"}


def test_sample_elementwise_covers_ops_and_sizes() -> None:
    shapes = mb.sample_shapes("elementwise", 200, "cpu", dtypes=["float32"], seed=0)
    assert {s.params["op"] for s in shapes} == set(mb.ELEMENTWISE_OPS)
    numels = [s.params["numel"] for s in shapes]
    lo, hi = mb.RANGES["cpu"].numel
    assert lo <= min(numels) < 1000 and 10**6 < max(numels) <= hi


def test_bad_inputs_are_daydream_errors() -> None:
    with pytest.raises(DaydreamError, match="unknown kernel"):
        mb.sample_shapes("conv9d", 3)
    with pytest.raises(DaydreamError, match="unknown device"):
        mb.sample_shapes("gemm", 3, device="tpu")
    with pytest.raises(DaydreamError, match="unknown dtype"):
        mb.sample_shapes("gemm", 3, dtypes=["int3"])


def test_missing_torch_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(
        DaydreamError, match=r"daydream calibrate needs torch: pip install 'daydream-whatif\[calibrate\]'"
    ):
        mb.run_microbenchmarks("/nonexistent", device="cpu")


def test_quantile_and_row_statistics() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    m = mb.Measurement(
        mb.Shape("elementwise", {"op": "add", "numel": 10, "dtype": "float32"}), [5.0, 1.0, 3.0, 100.0, 2.0]
    )
    row = mb.measurement_row(m)
    # the median ignores the one disturbed run (100 us); the mean would be 22.2
    assert (row["median_us"], row["p25_us"], row["p75_us"], row["min_us"], row["runs"]) == (3.0, 2.0, 5.0, 1.0, 5)
    assert mb._spread([10.0, 11.0]) == pytest.approx(0.1)


def test_write_atomic_keeps_old_file_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.csv"
    old_mask = os.umask(0o022)
    try:
        mb.write_atomic(target, "old\n")
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not mkstemp's private 0600

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(mb.os, "replace", fail)
    with pytest.raises(DaydreamError, match="cannot write: disk full"):
        mb.write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # no temp file left behind


def _write_table(path: Path, times: list[float]) -> None:
    rows = [
        {"op": "add", "numel": 100 * (i + 1), "dtype": "float32", "flops": 1.0, "bytes": 1.0, "median_us": t}
        for i, t in enumerate(times)
    ]
    mb.write_atomic(path, mb.rows_to_csv(rows))


def test_table_noise_by_hand(tmp_path: Path) -> None:
    _write_table(tmp_path / "a.csv", [10.0, 20.0, 40.0])
    _write_table(tmp_path / "b.csv", [11.0, 18.0, 44.0])  # |a-b|/b: 1/11, 2/18, 4/44
    noise = mb.table_noise(tmp_path / "a.csv", tmp_path / "b.csv")
    assert noise.name == "elementwise-noise" and noise.n == 3
    assert noise.gmae_pct == pytest.approx(100 * (1 / 11 * 2 / 18 * 4 / 44) ** (1 / 3))


def test_read_table_types(tmp_path: Path) -> None:
    _write_table(tmp_path / "a.csv", [1.5])
    (row,) = mb.read_table(tmp_path / "a.csv")
    assert row == {"op": "add", "numel": 100, "dtype": "float32", "flops": 1.0, "bytes": 1.0, "median_us": 1.5}
    assert isinstance(row["numel"], int)
    with pytest.raises(DaydreamError, match="cannot read"):
        mb.read_table(tmp_path / "missing.csv")


def test_quick_run_writes_well_formed_tables(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    threads_before = torch.get_num_threads()
    seen: list[tuple[str, int, int]] = []
    paths = mb.run_microbenchmarks(
        tmp_path, device="cpu", settings=mb.QUICK, seed=1, threads=1, progress=lambda *a: seen.append(a)
    )
    assert paths == [tmp_path / "gemm.csv", tmp_path / "elementwise.csv"]
    assert torch.get_num_threads() == threads_before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "elementwise.csv",
        "elementwise.meta.json",
        "gemm.csv",
        "gemm.meta.json",
    ]
    for path in paths:
        kernel = path.stem
        rows = mb.read_table(path)
        assert len(rows) == mb.QUICK.n_shapes
        assert list(rows[0]) == [
            *mb.FEATURE_COLUMNS[kernel],
            "flops",
            "bytes",
            "median_us",
            "p25_us",
            "p75_us",
            "min_us",
            "runs",
        ]
        sampled = [s.params for s in mb.sample_shapes(kernel, mb.QUICK.n_shapes, "cpu", seed=1)]
        assert [{c: r[c] for c in mb.FEATURE_COLUMNS[kernel]} for r in rows] == [
            {c: p[c] for c in mb.FEATURE_COLUMNS[kernel]} for p in sampled
        ]
        for r in rows:
            assert 0 < r["min_us"] <= r["p25_us"] <= r["median_us"] <= r["p75_us"]
            assert r["runs"] == mb.QUICK.repeats  # one pass: never re-measured
            assert math.isfinite(r["median_us"])
        meta = json.loads(path.with_suffix(".meta.json").read_text())
        assert meta["kernel"] == kernel and meta["device"] == "cpu" and meta["threads"] == 1
        assert meta["torch_version"] == torch.__version__ and meta["statistic"] == "median"
        assert meta["rows"] == mb.QUICK.n_shapes and meta["repeats"] == mb.QUICK.repeats and meta["date"]
    assert seen[-1] == ("elementwise", mb.QUICK.n_shapes, mb.QUICK.n_shapes)


def test_passes_split_the_repeats_and_retry_unstable_shapes() -> None:
    pytest.importorskip("torch")
    shapes = mb.sample_shapes("elementwise", 3, "cpu", seed=2)
    for m in mb.measure(shapes, "cpu", repeats=7, warmup=0, passes=3):
        # 3 passes of 3+2+2 runs, then at most MAX_RETRIES passes of 3 for shapes whose pass medians disagree
        assert len(m.times_us) in {7 + 3 * r for r in range(mb.MAX_RETRIES + 1)}
        assert len(m.pass_medians) == 3 + (len(m.times_us) - 7) // 3


def test_no_cuda_is_a_clear_error(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DaydreamError, match="no CUDA device"):
        mb.run_microbenchmarks(tmp_path, device="cuda", settings=mb.QUICK)
