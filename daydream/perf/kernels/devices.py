"""The GPU catalog (``kernels/devices.toml``): peak FLOP/s per dtype, memory bandwidth, caches, links.

A device is found by its catalog key (``a100-40gb``), an alias (``h100`` -> the SXM part), or the name a trace
records in ``deviceProperties`` (``NVIDIA A100-SXM4-40GB``). Names some vendors give several parts (ROCm's
``AMD Instinct MI250X / MI250``, or the generic ``AMD Radeon Graphics``) are told apart by the SM/CU count and
memory size the trace also records.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from daydream.errors import DaydreamError, did_you_mean
from daydream.perf.paths import KERNELS_DIR
from daydream.trace.sizes import normalize_dtype

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CATALOG_PATH = KERNELS_DIR / "devices.toml"
COMPUTE_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
_FIELDS = (
    "full_name",
    "vendor",
    "names",
    "peak_tflops",
    "hbm_gbps",
    "l2_mb",
    "sms",
    "clock_mhz",
    "memory_gb",
    "pcie_gen",
    "nvlink_gbps",
    "source",
)


@dataclass(frozen=True)
class Device:
    """One GPU as one rank sees it (one die of a two-die module: see ``devices_per_package``).

    ``peak_tflops``: dense peak TFLOP/s per dtype (fp64, fp32, tf32, fp16, bf16, fp8; absent where the hardware
    has no such path); ``hbm_gbps``: device-memory bandwidth, GB/s; ``l2_mb``: L2 size, MB; ``sms``: SMs or CUs;
    ``clock_mhz``: boost clock; ``memory_gb``; ``pcie_gen``; ``nvlink_gbps``: NVLink / Infinity Fabric bandwidth
    to peers, GB/s (0: none); ``source``: the vendor documents the figures come from; ``vector_tflops``: the FP32
    rate of the vector (non-tensor) units, what element-wise kernels compute at; ``l2_bytes_per_clk``: L2
    bandwidth per clock where a vendor whitepaper states it (else None); ``nvlink_peers``: how many other GPUs its
    NVLink reaches (a bridge joins two cards: 1; else every GPU of a node, through a switch or a full mesh).
    """

    key: str
    full_name: str
    vendor: str
    peak_tflops: Mapping[str, float] = field(hash=False)
    hbm_gbps: float
    l2_mb: float
    sms: int
    clock_mhz: float
    memory_gb: float
    pcie_gen: int
    nvlink_gbps: float
    source: str
    vector_tflops: float
    l2_bytes_per_clk: float | None = None
    names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    devices_per_package: int = 1
    nvlink_peers: int = 1023

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gbps * 1e9

    @property
    def l2_bytes(self) -> float:
        """L2 size in bytes: vendors count cache sizes in binary megabytes (A100's 40 MB is 40 MiB)."""
        return self.l2_mb * 2**20

    @property
    def l2_gbps(self) -> float | None:
        """Peak L2 bandwidth, GB/s (bytes per clock x boost clock), where the catalog has the bytes per clock."""
        return None if self.l2_bytes_per_clk is None else self.l2_bytes_per_clk * self.clock_mhz / 1e3

    def matches(self, name: str) -> bool:
        """Whether a trace's device name is one of this entry's names."""
        return any(re.search(p, name, re.IGNORECASE) for p in self.names)


def _device(key: str, raw: Mapping[str, Any]) -> Device:
    missing = [f for f in _FIELDS if f not in raw]
    if missing:
        raise DaydreamError(f"{CATALOG_PATH}: device '{key}' lacks {', '.join(missing)}")
    per = int(raw.get("devices_per_package", 1))
    peaks = {normalize_dtype(k): float(v) for k, v in raw["peak_tflops"].items()}
    # Module-level datasheet figures -> one die (what one PyTorch device, one rank, runs on).
    return Device(
        key=key,
        full_name=str(raw["full_name"]),
        vendor=str(raw["vendor"]),
        peak_tflops={k: v / per for k, v in peaks.items()},
        hbm_gbps=float(raw["hbm_gbps"]) / per,
        l2_mb=float(raw["l2_mb"]) / per,
        sms=int(raw["sms"]) // per,
        clock_mhz=float(raw["clock_mhz"]),
        memory_gb=float(raw["memory_gb"]) / per,
        pcie_gen=int(raw["pcie_gen"]),
        nvlink_gbps=float(raw["nvlink_gbps"]) / per,
        source=str(raw["source"]),
        vector_tflops=float(raw.get("fp32_vector_tflops", peaks.get("fp32", 0.0))) / per,
        l2_bytes_per_clk=float(raw["l2_bytes_per_clk"]) / per if "l2_bytes_per_clk" in raw else None,
        names=tuple(raw["names"]),
        aliases=tuple(str(a).lower() for a in raw.get("aliases", ())),
        devices_per_package=per,
        nvlink_peers=int(raw.get("nvlink_peers", 1023)),
    )


@cache
def load_catalog(path: Path = CATALOG_PATH) -> dict[str, Device]:
    """Every device of the catalog file, by key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DaydreamError(f"cannot read the device catalog {path}: {exc}") from None
    return {key.lower(): _device(key.lower(), raw) for key, raw in data.get("devices", {}).items()}


def device_names() -> list[str]:
    """The catalog keys, sorted."""
    return sorted(load_catalog())


def _key_form(name: str) -> str:
    """``A100 40GB`` / ``a100_40gb`` -> ``a100-40gb``: how a typed key is compared."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


@cache  # names are looked up once per kernel by scripts that price each task (device_time)
def _by_key(name: str) -> Device | None:
    catalog = load_catalog()
    key = _key_form(name)
    if key in catalog:
        return catalog[key]
    for dev in catalog.values():
        if key in dev.aliases:
            return dev
    return None


@cache
def match_device(name: str | None, sms: int | None = None, memory_bytes: float | None = None) -> Device | None:
    """The catalog entry for a trace's GPU: its deviceProperties ``name`` and, where known, its SM/CU count and
    memory (bytes). A name only one entry matches decides alone; a name several entries share (``AMD Instinct
    MI250X / MI250``) or a generic one (``AMD Radeon Graphics``: any part of that vendor) needs the counts.
    None when no entry fits, or several do that differ and the counts cannot tell them apart."""
    if not name:
        return None
    catalog = load_catalog()
    named = [d for d in catalog.values() if d.matches(name)]
    if not named and (dev := _by_key(name)) is not None:
        named = [dev]
    if len(named) == 1:
        return named[0]
    if named:
        candidates = named
    elif sms is not None:
        vendor = "amd" if re.search(r"\bAMD\b|Radeon|Instinct", name, re.IGNORECASE) else "nvidia"
        candidates = [d for d in catalog.values() if d.vendor == vendor]
    else:
        return None
    if sms is not None:
        candidates = [d for d in candidates if d.sms == sms]
    if memory_bytes is not None:
        # within 10%: datasheets count GB, devices report the usable bytes
        candidates = [d for d in candidates if abs(memory_bytes / 1e9 - d.memory_gb) <= 0.1 * d.memory_gb]
    # parts the trace's counts cannot tell apart may still be one GPU to every model (an MI210 and one GCD of an
    # MI250: the same die, clock and memory): then the first in catalog order
    if not candidates:
        return None
    first = _figures(candidates[0])
    same = all(math.isclose(a, b, rel_tol=0.01) for d in candidates[1:] for a, b in zip(first, _figures(d)))
    return candidates[0] if same else None


def _figures(d: Device) -> tuple[float, ...]:
    """What the performance models read of a device (within 1%, two entries are the same GPU to them)."""
    return (
        *(d.peak_tflops.get(k, 0.0) for k in COMPUTE_DTYPES),
        d.vector_tflops,
        d.hbm_gbps,
        d.l2_mb,
        d.sms,
        d.clock_mhz,
        d.memory_gb,
    )


@cache  # an unknown name raises, and is not kept
def get_device(name: str) -> Device:
    """A device by catalog key, alias (case-insensitive) or deviceProperties name; DaydreamError when unknown."""
    dev = _by_key(name)
    if dev is not None:
        return dev
    matching = [d for d in load_catalog().values() if d.matches(name)]
    if len(matching) == 1:
        return matching[0]
    if matching:
        raise DaydreamError(f"device '{name}' could be {', '.join(d.key for d in matching)}: name one of them")
    raise DaydreamError(unknown_device_message(name))


def unknown_device_message(name: str) -> str:
    """What to say about a device name the catalog does not hold: every key with its aliases (so a suggestion is
    never a name the list does not show), and the closest keys or aliases."""
    catalog = load_catalog()
    known = ", ".join(k + (f" ({', '.join(catalog[k].aliases)})" if catalog[k].aliases else "") for k in device_names())
    hint = did_you_mean(_key_form(name), [*device_names(), *(a for d in catalog.values() for a in d.aliases)], n=3)
    return f"unknown device '{name}'" + (f"; {hint}" if hint else "") + f" (the catalog, aliases in brackets: {known})"


def device_of_graph(graph: Any) -> Device | None:
    """The catalog entry for the GPU a graph was traced on (``graph.graph["device"]``, the trace's device name,
    with ``graph.graph["device_properties"]`` - numSms, totalGlobalMem - where the builder keeps them)."""
    meta = getattr(graph, "graph", {}) or {}
    props = meta.get("device_properties") or {}
    return match_device(meta.get("device"), props.get("numSms"), props.get("totalGlobalMem"))


def device_of_trace(trace: Any) -> Device | None:
    """The catalog entry for a loaded trace's first GPU (its deviceProperties: name, SM count, memory)."""
    if not trace.devices:
        return None
    d = trace.devices[0]
    return match_device(d.name, d.numSms, d.totalGlobalMem)


def peak_flops(device: Device, dtype: str) -> float:
    """Dense peak FLOP/s of ``device`` in ``dtype`` (fp64/fp32/tf32/fp16/bf16/fp8 or a torch name for one)."""
    try:
        key = normalize_dtype(dtype)
    except ValueError as exc:
        raise DaydreamError(str(exc)) from None
    if key not in device.peak_tflops:
        have = ", ".join(k for k in COMPUTE_DTYPES if k in device.peak_tflops)
        raise DaydreamError(f"{device.key} has no {key} peak in the catalog (it has: {have})")
    return device.peak_tflops[key] * 1e12
