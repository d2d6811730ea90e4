"""The recording sidecar ``<stem>.daydream.json``: what ``daydream record`` knows beyond the Kineto trace (the
device and host, rank and world size, the steps, modules and their parameters, DDP's gradient buckets, embedding
statistics, optimizers), as typed structs. The recorder (:mod:`daydream.record.recorder`) writes a
:class:`Recording`; :func:`read_recording` reads one back, checking every field's type.

Every field but ``format`` is optional, with a default, so that sidecars written before a field existed (``host``
came after the first recordings) still load; fields this version does not know are ignored, so that a newer
recorder's sidecar loads too. A struct reads like the dict the sidecar once was (``recording["format"]``,
``recording.get("host")``), for code written against that.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from daydream.errors import TraceError
from daydream.trace.job import trace_stem
from daydream.trace.reading import MAX_NESTING, MAX_SIDECAR_BYTES, decode_json, nesting_exceeds, read_json_text
from daydream.units import brief_repr

FORMAT = "daydream.recording/1"


class SidecarPart(msgspec.Struct, frozen=True):
    """A part of the sidecar, read by attribute or, as the JSON object it is, by key."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.__struct_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.__struct_fields__ else default


class Environment(SidecarPart, frozen=True):
    torch: str | None = None
    python: str | None = None
    platform: str | None = None


class DeviceInfo(SidecarPart, frozen=True, omit_defaults=True):
    """The device the program trained on: a GPU (``type`` "cuda", with its index, count, memory and SMs) or the CPU
    (``type`` "cpu", with its intra-op ``threads``, as recordings before ``host`` tell them)."""

    type: str | None = None
    name: str | None = None
    index: int | None = None
    count: int | None = None
    memory_bytes: int | None = None
    sms: int | None = None
    cuda: str | None = None
    hip: str | None = None
    threads: int | None = None


class HostInfo(SidecarPart, frozen=True):
    """The host's intra-op threads, the cores the process could run on, and how much faster threaded work ran on
    T threads than on one, measured when the recording ended (``[[threads, speedup], ...]``;
    daydream.record.host_bench).
    :mod:`daydream.perf.cpu.host` reads all three."""

    threads: int | None = None
    cores: int | None = None
    thread_speedup: list[tuple[int, float]] | None = None


class Steps(SidecarPart, frozen=True):
    """What the recorder counted: steps from ``counted_from`` ("optimizer" or "explicit"), wall time of each."""

    counted_from: str | None = None
    warmup: int | None = None
    requested: int | None = None
    seen: int | None = None
    recorded: int | None = None
    complete: bool | None = None
    wall_ms: list[float] = []


class DeviceMemory(SidecarPart, frozen=True):
    """The GPU caching allocator's peak over the recorded steps (reset when they began, read when they ended):
    ``max_allocated`` bytes in tensors and ``max_reserved`` bytes held from the driver, as
    ``torch.cuda.max_memory_allocated()`` and ``max_memory_reserved()`` give them, on ``device`` ("cuda:0"). Absent
    on the CPU, and for a recording that did not end."""

    device: str | None = None
    max_allocated: int | None = None
    max_reserved: int | None = None


class Parameter(SidecarPart, frozen=True):
    name: str | None = None
    shape: list[int] = []
    dtype: str | None = None
    bytes: int | None = None
    requires_grad: bool | None = None


class Module(SidecarPart, frozen=True):
    """One module of a root that ran, with its own parameters (not its children's)."""

    path: str | None = None
    type: str | None = None
    root: str | None = None
    parameters: list[Parameter] = []


class Bucket(SidecarPart, frozen=True):
    bytes: int | None = None
    parameters: list[str] = []


class DdpBuckets(SidecarPart, frozen=True):
    """DDP's gradient buckets of one wrapped module, in the order the gradients became ready."""

    module: str | None = None
    bucket_cap_bytes: int | None = None
    buckets: list[Bucket] = []
    find_unused_parameters: bool | None = None
    gradient_as_bucket_view: bool | None = None


class EmbeddingTable(SidecarPart, frozen=True):
    """How an embedding table was looked up in the sampled steps; ``hot_share``: the share of lookups taken by the
    hottest fraction of its rows, by fraction."""

    module: str | None = None
    type: str | None = None
    rows: int | None = None
    dim: int | None = None
    mode: str | None = None
    device: str | None = None
    dtype: str | None = None
    steps_sampled: int | None = None
    lookups_per_step: float | None = None
    bags_per_step: float | None = None
    pooling: float | None = None
    unique_rows_per_call: float | None = None
    rows_touched: int | None = None
    hot_share: dict[str, float] = {}


class Optimizer(SidecarPart, frozen=True):
    """One optimizer: its type, defaults (as plain JSON values), and the parameters it steps."""

    type: str | None = None
    defaults: dict[str, Any] = {}
    param_groups: int | None = None
    parameters: int | None = None
    bytes: int | None = None


class Recording(SidecarPart, frozen=True):
    """One rank's sidecar, in the order the recorder writes it."""

    __repr__ = brief_repr  # one screen, whatever it holds

    format: str
    command: list[str] | None = None
    environment: Environment | None = None
    device: DeviceInfo | None = None
    host: HostInfo | None = None
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    steps: Steps | None = None
    device_memory: DeviceMemory | None = None
    error: str | None = None
    modules: list[Module] = []
    ddp: list[DdpBuckets] = []
    embeddings: list[EmbeddingTable] | None = None
    optimizers: list[Optimizer] = []


def recording_path(path: str) -> str:
    """The metadata sidecar ``daydream record`` writes next to a trace: ``out/rank0.json.gz`` ->
    ``out/rank0.daydream.json``."""
    name = Path(path).name
    name = trace_stem(name) or name
    return str(Path(path).with_name(name + ".daydream.json"))


def as_recording(doc: Any, where: str) -> Recording:
    """A decoded sidecar (plain JSON values) as a :class:`Recording`; :class:`TraceError` naming ``where`` and the
    field when it is not one (``host.threads: Expected `int | null`, got `str```)."""
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith("daydream.recording/"):
        raise TraceError(f"{where}: not a daydream recording sidecar (no 'format': '{FORMAT}')", path=where)
    try:
        return msgspec.convert(doc, Recording)
    except msgspec.ValidationError as exc:
        message, _, field = str(exc).partition(" - at `$.")
        at = f" at {field.rstrip('`')}" if field else ""
        raise TraceError(f"{where}: malformed recording metadata{at}: {message}", path=where) from None


def read_sidecar(path: str, warnings: list[str] | None = None) -> Recording:
    """The recording sidecar next to a trace, read within the loader's limits (a regular file of at most
    ``MAX_SIDECAR_BYTES``, nesting at most ``MAX_NESTING`` levels); :class:`TraceError` when it cannot be used."""
    raw = read_json_text(path, MAX_SIDECAR_BYTES, b"{", "empty file, expected recording metadata")
    try:
        doc = decode_json(raw, path, msgspec.json.decode, warnings)
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: cannot read recording metadata: {exc}", path=path) from None
    if nesting_exceeds(doc):
        raise TraceError(f"{path}: recording metadata nests more than {MAX_NESTING} levels", path=path)
    return as_recording(doc, path)


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """A recording's metadata, read within the loader's limits (size, nesting, a regular file); :class:`TraceError`
    when it cannot be read or is not one."""
    return read_sidecar(os.fspath(path))


def encode_recording(recording: Recording) -> bytes:
    """The sidecar's text: indented JSON, fields in the struct's order."""
    return msgspec.json.format(msgspec.json.encode(recording), indent=1) + b"\n"
