"""The cross-device kernel data (the NeuSight data set's layout, ../shared/calibration): rows read as measured kernels
with their FLOPs and bytes worked out by hand, each kernel once."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from daydream.errors import DaydreamError
from daydream.perf.kernels.kernel_data import Measurement, read_gpus, read_measurements

DATA = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "neusight"


def test_costs_by_hand() -> None:
    gemm = Measurement("gemm", "bmm", (2, 3, 5, 7), "g", 10.0)
    assert gemm.flops() == 2 * 2 * 3 * 5 * 7 and gemm.bytes() == 4 * 2 * (3 * 7 + 7 * 5 + 3 * 5)
    conv = Measurement("conv", "conv", (1, 3, 8, 3, 32, 1, 1), "g", 10.0)  # 32x32 input, 3x3, pad 1: 32x32 output
    assert conv.flops() == 2 * 8 * 3 * 9 * 32 * 32 and conv.bytes() == 4 * (3 * 32 * 32 + 8 * 3 * 9 + 8 * 32 * 32)
    assert Measurement("elementwise", "add", (4, 10), "g", 1.0).bytes() == 4 * 3 * 40  # two inputs, one output
    assert Measurement("elementwise", "relu", (4, 10), "g", 1.0).bytes() == 4 * 2 * 40


def test_a_folder_without_data_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DaydreamError, match="no measured kernels"):
        list(read_measurements(tmp_path))


def test_rows_of_a_table(tmp_path: Path) -> None:
    table = tmp_path / "collect" / "linear.csv.gz"
    table.parent.mkdir()
    rows = [
        "OPName,Latency,Device,B,M,N,K",
        "linear,0.5,GPU A,1,64,64,64",
        "linear,0.5,GPU A,1,64,64,64",  # a repeat: once
        "linear,nan,GPU A,1,8,8,8",
        "unknown,1.0,GPU A,1,1,1,1",
        "linear,0.25,GPU B,1,64,64,64",
    ]
    table.write_bytes(gzip.compress("\n".join(rows).encode()))
    got = list(read_measurements(tmp_path))
    assert [(m.device, m.dims, m.latency_us) for m in got] == [
        ("GPU A", (1, 64, 64, 64), 500.0),
        ("GPU B", (1, 64, 64, 64), 250.0),
    ]


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/calibration/neusight absent")
def test_the_data_set() -> None:
    gpus = read_gpus(DATA)
    assert {"NVIDIA H100 80GB HBM3", "Tesla T4", "AMD Instinct MI210"} <= set(gpus)
    assert (
        gpus["NVIDIA H100 80GB HBM3"].sms == 132
        and gpus["AMD Instinct MI210"].vector_gflops < gpus["AMD Instinct MI210"].fp32_gflops
    )
    classes = {(m.kernel_class, m.device) for m in read_measurements(DATA)}
    assert (
        ("gemm", "NVIDIA H100 80GB HBM3") in classes
        and ("conv", "Tesla T4") in classes
        and ("norm", "AMD Instinct MI100") in classes
    )
