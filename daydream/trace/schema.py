"""Typed schema of a Kineto / Chrome-trace JSON file.

Only the fields the simulator needs are declared; msgspec skips the rest while
decoding, which keeps a 1M-event file at a few hundred MB instead of several GB
of Python dicts. Both the 2021 schema (``Operator``/``Runtime``/``Kernel``,
``external id``, ``Input dims``) and the current one (``cpu_op``/``cuda_runtime``/
``kernel``, ``External id``, ``Input Dims``) decode into the same structs.
"""

from __future__ import annotations

from typing import Any

import msgspec

Id = int | str | None
Number = int | float | str | None


class EventArgs(msgspec.Struct, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(name="External id", default=None)
    external_id_2021: int | None = msgspec.field(name="external id", default=None)
    record_function_id: int | None = msgspec.field(name="Record function id", default=None)
    sequence_number: int | None = msgspec.field(name="Sequence number", default=None)
    fwd_thread_id: int | None = msgspec.field(name="Fwd thread id", default=None)
    input_dims: list[Any] | None = msgspec.field(name="Input Dims", default=None)
    input_dims_2021: list[Any] | None = msgspec.field(name="Input dims", default=None)
    input_type: list[Any] | None = msgspec.field(name="Input type", default=None)
    stream: Id = None
    device: Id = None
    bytes: Number = None
    kind: Id = None
    cuda_sync_kind: str | None = None
    wait_on_stream: Id = None
    wait_on_cuda_event_record_corr_id: int | None = None
    collective_name: str | None = msgspec.field(name="Collective name", default=None)
    in_msg_nelems: Number = msgspec.field(name="In msg nelems", default=None)
    out_msg_nelems: Number = msgspec.field(name="Out msg nelems", default=None)
    group_size: Number = msgspec.field(name="Group size", default=None)
    group_name: Id = msgspec.field(name="Process Group Name", default=None)
    group_desc: Any = msgspec.field(name="Process Group Description", default=None)
    group_ranks: Any = msgspec.field(name="Process Group Ranks", default=None)  # "[0, 1]": a string in Kineto
    dtype: str | None = None
    grid: Any = None  # a kernel's grid of thread blocks ([x, y, z]; a Triton launch's op writes its own as text)
    # metadata ('M') events: process_name / thread_name / thread_sort_index
    name: Any = None
    labels: Any = None
    # `[memory]` instant events of a trace recorded with profile_memory=True: a block allocated (Bytes > 0) or freed
    # (< 0) at Addr on a device, and the allocator's totals after it
    addr: Number = msgspec.field(name="Addr", default=None)
    alloc_bytes: Number = msgspec.field(name="Bytes", default=None)
    total_allocated: Number = msgspec.field(name="Total Allocated", default=None)
    total_reserved: Number = msgspec.field(name="Total Reserved", default=None)
    device_type: Number = msgspec.field(name="Device Type", default=None)
    device_id: Number = msgspec.field(name="Device Id", default=None)


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: Id = 0
    tid: Id = 0
    ts: float | None = None
    dur: float | None = None
    id: Id = None
    bp: str | None = None
    args: EventArgs | None = None


class DeviceProperties(msgspec.Struct, gc=False):
    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None


class TraceFile(msgspec.Struct, gc=False):
    traceEvents: list[Event]
    schemaVersion: Number = None
    deviceProperties: list[DeviceProperties] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: Number = None


TRACE_DECODER = msgspec.json.Decoder(TraceFile)
EVENTS_DECODER = msgspec.json.Decoder(list[Event])
