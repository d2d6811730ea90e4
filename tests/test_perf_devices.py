"""The GPU catalog: every entry complete, names from real traces resolved, errors that help."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import networkx as nx
import pytest

from daydream.errors import DaydreamError
from daydream.perf.kernels.devices import (
    COMPUTE_DTYPES,
    device_names,
    device_of_graph,
    device_of_trace,
    get_device,
    load_catalog,
    match_device,
    peak_flops,
)

REQUIRED = (
    "v100-sxm2-16gb",
    "v100-sxm2-32gb",
    "v100-pcie-16gb",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "rtx-2080-ti",
    "t4",
    "l4",
    "mi250x",
    "mi250",
    "mi300x",
)


def test_catalog_has_the_required_parts() -> None:
    assert set(REQUIRED) <= set(device_names())
    assert device_names() == sorted(device_names())


@pytest.mark.parametrize("key", device_names())
def test_every_entry_is_complete_and_positive(key: str) -> None:
    d = get_device(key)
    assert d.key == key and d.full_name and d.vendor in ("nvidia", "amd") and d.source and d.names
    for value in (d.hbm_gbps, d.l2_mb, d.sms, d.clock_mhz, d.memory_gb, d.vector_tflops):
        assert value > 0 and math.isfinite(value)
    assert d.pcie_gen in (3, 4, 5, 6)
    assert d.nvlink_gbps >= 0
    assert set(d.peak_tflops) <= set(COMPUTE_DTYPES)
    assert {"fp64", "fp32", "fp16"} <= set(d.peak_tflops)
    assert all(v > 0 for v in d.peak_tflops.values())
    # dense tensor/matrix peaks: half precision is never slower than fp32, but on a part without a fast half path
    # (Pascal GP104, the Tesla P4: FP16 at 1/64 of FP32)
    if key == "p4":
        assert d.peak_tflops["fp16"] == pytest.approx(d.peak_tflops["fp32"] / 64, rel=0.05)
    else:
        assert d.peak_tflops["fp16"] >= d.peak_tflops["fp32"]
    if "fp8" in d.peak_tflops:
        assert d.peak_tflops["fp8"] == pytest.approx(2 * d.peak_tflops["fp16"], rel=0.01)


def test_a100_figures_from_the_datasheet() -> None:
    a100 = get_device("a100-40gb")
    assert a100.peak_tflops == {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}
    assert (a100.hbm_gbps, a100.l2_mb, a100.sms, a100.memory_gb, a100.nvlink_gbps) == (1555, 40, 108, 40, 600)
    assert get_device("a100-80gb").hbm_gbps == 2039
    assert peak_flops(a100, "fp16") == 312e12
    assert a100.l2_bytes == 40 * 2**20


def test_keys_and_aliases_case_insensitive() -> None:
    assert get_device("h100").key == "h100-sxm"
    assert get_device("H100-SXM").key == "h100-sxm"
    assert get_device("A100_40GB").key == "a100-40gb"
    assert get_device("a100").key == "a100-40gb"
    assert get_device("v100").key == "v100-sxm2-32gb"
    assert get_device("2080ti").key == "rtx-2080-ti"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100-PG509-200", "a100-40gb"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
        ("Tesla V100-PCIE-16GB", "v100-pcie-16gb"),
        ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("AMD Instinct MI300X", "mi300x"),
    ],
)
def test_device_property_names_resolve_to_one_entry(name: str, key: str) -> None:
    assert [d.key for d in load_catalog().values() if d.matches(name)] == [key]
    assert get_device(name).key == key
    assert match_device(name).key == key  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["NVIDIA L40S", "NVIDIA GH200 480GB", "NVIDIA H200 NVL", "NVIDIA GB200"])
def test_lookalike_parts_are_not_matched(name: str) -> None:
    assert match_device(name) is None


def test_shared_names_need_the_counts() -> None:
    # ROCm names both parts alike; the GCD's CU count (and memory) decides.
    name = "AMD Instinct MI250X / MI250"
    assert match_device(name) is None
    assert match_device(name, sms=110).key == "mi250x"  # type: ignore[union-attr]
    assert match_device(name, sms=104).key == "mi250"  # type: ignore[union-attr]
    with pytest.raises(DaydreamError, match="could be mi250x, mi250"):
        get_device(name)
    # a generic name: any AMD part with these counts
    assert match_device("AMD Radeon Graphics", sms=104, memory_bytes=68702699520).key == "mi250"  # type: ignore[union-attr]
    assert match_device("AMD Radeon Graphics") is None
    assert match_device("AMD Radeon Graphics", sms=12, memory_bytes=8e9) is None


def test_two_die_modules_are_one_die_per_device() -> None:
    gcd = get_device("mi250")
    assert gcd.devices_per_package == 2
    assert (gcd.sms, gcd.memory_gb, gcd.hbm_gbps, gcd.l2_mb) == (104, 64, 1638.4, 8)
    assert gcd.peak_tflops["fp16"] == pytest.approx(181.05)
    assert gcd.vector_tflops == pytest.approx(22.65)  # 45.3 TFLOP/s vector FP32 per module
    assert get_device("mi250x").sms == 110


def test_unknown_device_lists_the_catalog_and_suggests() -> None:
    with pytest.raises(DaydreamError) as err:
        get_device("a100-4gb")
    msg = str(err.value)
    assert msg.startswith("unknown device 'a100-4gb'; did you mean 'a100-40gb'")
    # every key with its aliases, so that a suggested alias ('h100') is one the message shows
    assert "(the catalog, aliases in brackets: a100-40gb (a100, " in msg and "h100-sxm (h100, " in msg
    with pytest.raises(DaydreamError, match=r"unknown device 'zzz' \(the catalog, aliases in brackets: .*\)$"):
        get_device("zzz")
    with pytest.raises(DaydreamError, match=r"unknown device 'h10'; did you mean 'h100'\? \("):
        get_device("h10")


def test_peak_flops_dtype_names_and_missing_dtypes() -> None:
    a100 = get_device("a100")
    assert peak_flops(a100, "float16") == peak_flops(a100, "half") == peak_flops(a100, "torch.float16") == 312e12
    assert peak_flops(a100, "torch.bfloat16") == 312e12
    assert peak_flops(a100, "float32") == 19.5e12
    assert peak_flops(get_device("h100"), "fp8") == 1979e12
    with pytest.raises(DaydreamError, match="v100-sxm2-32gb has no bf16 peak"):
        peak_flops(get_device("v100"), "bf16")
    with pytest.raises(DaydreamError, match="has no fp8"):
        peak_flops(a100, "float8_e4m3fn")
    with pytest.raises(DaydreamError, match="unknown dtype"):
        peak_flops(a100, "fp7")


def test_device_of_graph() -> None:
    assert device_of_graph(nx.DiGraph(device="NVIDIA A100-PG509-200")).key == "a100-40gb"  # type: ignore[union-attr]
    assert device_of_graph(nx.DiGraph(device=None)) is None
    assert device_of_graph(nx.DiGraph()) is None
    g = nx.DiGraph(device="AMD Radeon Graphics", device_properties={"numSms": 104, "totalGlobalMem": 68702699520})
    assert device_of_graph(g).key == "mi250"  # type: ignore[union-attr]


def _device_properties(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f).get("deviceProperties") or []


def test_every_shared_trace_gpu_resolves(shared_traces: Path) -> None:
    from daydream.trace import load_trace

    paths = [p for p in sorted(shared_traces.rglob("*.json.gz")) if "_et" not in p.name and p.parent.name != "dlrm8_et"]
    checked = 0
    for path in paths:
        if not _device_properties(path):
            continue
        trace = load_trace(path)
        device = device_of_trace(trace)
        assert device is not None, f"{path.name}: {trace.device_name!r} does not resolve"
        checked += 1
    assert checked >= 10
    assert device_of_trace(load_trace(shared_traces / "param/dlrm8/rank0.json.gz")).key == "v100-sxm2-32gb"  # type: ignore[union-attr]
    amd = load_trace(shared_traces / "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert device_of_trace(amd).key == "mi250"  # type: ignore[union-attr]
