"""Sizes a trace records: bytes per element of a dtype as any layer spells it, a collective's message size.

Here, at the bottom, because the graph builder reads message sizes and the performance models price bytes: both
need the same table.
"""

from __future__ import annotations

import math
import re
from typing import Any

# Bytes per element. Keys are the normalized names of ``normalize_dtype``.
DTYPE_BYTES: dict[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # stored as fp32; only the tensor-core arithmetic is reduced
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

_DTYPE_ALIASES: dict[str, str] = {
    "float64": "fp64",
    "double": "fp64",
    "f64": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "single": "fp32",
    "f32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "c10::half": "fp16",
    "f16": "fp16",
    "bfloat16": "bf16",
    "c10::bfloat16": "bf16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "long": "int64",
    "long int": "int64",
    "int": "int32",
    "short": "int16",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
    "byte": "uint8",
    "unsigned int": "int32",
    "long long": "int64",
}

INDEX_BYTES = 8  # index and offset tensors (embedding lookups) are int64


def normalize_dtype(dtype: str) -> str:
    """The catalog name of a dtype: ``torch.float16``, ``half``, ``c10::Half`` -> ``fp16``. Raises ``ValueError``
    for a name it does not know (callers turn that into their own user-facing error)."""
    name = str(dtype).strip().lower().removeprefix("torch.")
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
    return name


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[normalize_dtype(dtype)]


def traced_dtype_bytes(name: object) -> int | None:
    """Bytes per element of a dtype as a trace spells it (``float``, ``long int``, ``c10::Half``), None if unknown."""
    try:
        return dtype_bytes(str(name).strip().lower().removeprefix("c10::"))
    except ValueError:
        return None


def message_bytes(args: Any) -> int | None:
    """A collective's message size from its op's args: the element counts PyTorch records, else (an older
    `nccl:<name>` range) its first tensor's dims and type."""
    if args is None:
        return None
    n = args.in_msg_nelems if isinstance(args.in_msg_nelems, (int, float)) else None
    out = args.out_msg_nelems if isinstance(args.out_msg_nelems, (int, float)) else None
    if n is None and out is None:
        # A `nccl:<name>` range: the message is its first tensor (dims and type recorded with shapes).
        dims = args.input_dims if args.input_dims is not None else args.input_dims_2021
        types = args.input_type or []
        if dims and isinstance(dims[0], list) and dims[0] and all(isinstance(d, int) for d in dims[0]) and types:
            size = traced_dtype_bytes(types[0])
            return int(math.prod(dims[0]) * size) if size else None
        return None
    nelems = max(n or 0, out or 0)
    size = traced_dtype_bytes(args.dtype) or 4
    return int(nelems * size)


_MAX_GROUP_RANKS = 1 << 20  # more ranks than any job has: a longer list is not believed


def process_group(args: Any) -> dict[str, Any] | None:
    """A collective's process group from its op's args (PyTorch >= 2.1 records them on ``record_param_comms`` and
    NCCL kernels): ``group_size``, and for a group other than the default one its name (``group``) and member ranks
    (``group_ranks``). The default group is the job's world: it gets no name, as in traces that record none."""
    if args is None or not isinstance(args.group_size, (int, float)) or not 0 < args.group_size <= _MAX_GROUP_RANKS:
        return None
    out: dict[str, Any] = {"group_size": int(args.group_size)}
    ranks = _rank_list(args.group_ranks)
    default = args.group_desc == "default_pg" or (
        ranks is not None
        and ranks == list(range(len(ranks)))
        and args.group_desc is None
        and str(args.group_name) == "0"
    )
    if args.group_name is not None and not default:
        out["group"] = str(args.group_name)
        if ranks is not None and len(ranks) == out["group_size"]:
            out["group_ranks"] = ranks
    return out


def _rank_list(value: Any) -> list[int] | None:
    """Kineto writes the ranks as the text of a list ("[0, 1]"); a list is taken as it is."""
    if isinstance(value, str):
        if len(value) > 16 * _MAX_GROUP_RANKS or not re.fullmatch(r"\[\s*(\d+\s*(,\s*\d+\s*)*)?\]", value):
            return None
        value = [int(x) for x in re.findall(r"\d+", value)]
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value):
        return None
    return value if len(set(value)) == len(value) else None
