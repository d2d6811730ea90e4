"""Linking a PyTorch execution trace (ET, Chakra schema) to the Kineto ops of the same run.

The ET holds what Kineto lacks: every op's input/output tensors (ids, shapes, dtypes).
Ops are linked by record-function id where Kineto records it; otherwise by aligning the
sequence of op names (the ET usually covers one iteration of a longer Kineto window).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import msgspec

from daydream.errors import TraceError
from daydream.trace.model import Trace
from daydream.trace.reading import MAX_NESTING, byte_offset, decode_json, event_index, nesting_exceeds, read_trace_bytes


class _EtFile(msgspec.Struct, gc=False):
    nodes: list[dict[str, Any]]
    schema: str | None = None


_ET_DECODER = msgspec.json.Decoder(_EtFile)


@dataclass(frozen=True, slots=True)
class EtOp:
    """What the execution trace knows about one op."""

    et_id: int
    name: str
    input_shapes: tuple[Any, ...]
    input_types: tuple[str, ...]
    input_tensors: tuple[int, ...]
    output_shapes: tuple[Any, ...]
    output_tensors: tuple[int, ...]


class _BadNode(Exception):
    """A node field of the wrong type (the message names the field); load_execution_trace names the node."""


def _field(node: dict[str, Any], key: str) -> Any:
    """A node field in either ET schema: top-level (1.0.x) or in ``attrs`` (1.1.x / Chakra)."""
    if key in node:
        return node[key]
    attrs = node.get("attrs")
    if attrs is not None and not isinstance(attrs, list):
        raise _BadNode(f"'attrs' must be a list, not {_json_type(attrs)}")
    for a in attrs or ():
        if isinstance(a, dict) and a.get("name") == key:
            return a.get("value")
    return None


def _list(value: Any, what: str) -> list[Any]:
    """A list field (absent or null: empty), its nesting checked (MAX_NESTING) so nothing downstream recurses without
    bound."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadNode(f"{what} must be a list, not {_json_type(value)}")
    if nesting_exceeds(value):
        raise _BadNode(f"{what} nests more than {MAX_NESTING} levels")
    return value


def _io(node: dict[str, Any], side: str) -> tuple[list[Any], list[Any], list[Any]]:
    """(values, shapes, types) of a node's inputs or outputs, in either schema."""
    block = node.get(side)
    if isinstance(block, dict):  # 1.1.x: {"values": [...], "shapes": [...], "types": [...]}
        return (
            _list(block.get("values"), f"'{side}.values'"),
            _list(block.get("shapes"), f"'{side}.shapes'"),
            _list(block.get("types"), f"'{side}.types'"),
        )
    if block is not None and not isinstance(block, list):
        raise _BadNode(f"'{side}' must be a list or an object, not {_json_type(block)}")
    singular = side[:-1]  # 1.0.x: "inputs", "input_shapes", "input_types"
    return (
        _list(block, f"'{side}'"),
        _list(node.get(f"{singular}_shapes"), f"'{singular}_shapes'"),
        _list(node.get(f"{singular}_types"), f"'{singular}_types'"),
    )


def _tensor_ids(values: list[Any], types: list[Any]) -> tuple[int, ...]:
    ids = []
    for v, t in zip(values, types):
        if (
            isinstance(t, str)
            and t.startswith("Tensor")
            and isinstance(v, list)
            and len(v) >= 2
            and isinstance(v[1], int)
        ):
            ids.append(v[1])  # [tensor_id, storage_id, offset, numel, itemsize, device]: storage id is the data
    return tuple(ids)


def _et_op(node: dict[str, Any], et_id: int, name: str) -> EtOp:
    in_values, in_shapes, in_types = _io(node, "inputs")
    out_values, out_shapes, out_types = _io(node, "outputs")
    in_types = [str(t) for t in in_types]
    out_types = [str(t) for t in out_types]
    return EtOp(
        et_id=et_id,
        name=name,
        input_shapes=tuple(_freeze(x) for x in in_shapes),
        input_types=tuple(in_types),
        input_tensors=_tensor_ids(in_values, in_types),
        output_shapes=tuple(_freeze(x) for x in out_shapes),
        output_tensors=_tensor_ids(out_values, out_types),
    )


def _freeze(x: Any) -> Any:
    """Lists as tuples, all the way down (the caller checked the nesting: the recursion is bounded)."""
    return tuple(_freeze(v) for v in x) if isinstance(x, list) else x


_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _json_type(value: Any) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def _node_id(node: dict[str, Any]) -> int | None:
    """A node's id: an integer, or None where it has none."""
    value = node.get("id")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise _BadNode(f"'id' must be an integer, not {_json_type(value)}")
    return value


def load_execution_trace(
    path: str | os.PathLike[str], warnings: list[str] | None = None
) -> list[tuple[int | None, EtOp]]:
    """The ops of an execution trace in execution order, each with its record-function id.

    Read within the Kineto loader's limits (a regular file, its size, values and nesting: daydream.trace.load);
    a node with a field of the wrong type (an ``id`` that is not an integer, ``inputs`` that are neither a list
    nor an object...) is a :class:`TraceError` naming the file, the node and the field."""
    spath = os.fspath(path)
    raw = read_trace_bytes(spath)
    try:
        et = decode_json(raw, spath, _ET_DECODER.decode, warnings)
    except msgspec.ValidationError as exc:
        raise TraceError(
            f"{spath}: not a PyTorch execution trace: {exc}", path=spath, event=event_index(str(exc))
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"{spath}: not valid JSON: {exc}", path=spath, offset=byte_offset(exc)) from None
    nodes = []
    for index, node in enumerate(et.nodes):
        try:
            nodes.append((_node_id(node), index, node))
        except _BadNode as exc:
            raise TraceError(f"{spath}: nodes[{index}]: {exc}", path=spath, event=index) from None
    nodes.sort(key=lambda n: 0 if n[0] is None else n[0])  # execution order (stable: a node without an id at 0)
    ops = []
    for node_id, index, node in nodes:
        et_id = -1 if node_id is None else node_id
        try:
            name = node.get("name", "")
            if isinstance(name, (list, dict)):
                raise _BadNode(f"'name' must be a string, not {_json_type(name)}")
            name = str(name)
            rf_id = _field(node, "rf_id")
            if rf_id is None or name.startswith("[pytorch|"):
                continue
            op = _et_op(node, et_id, name)
        except _BadNode as exc:
            raise TraceError(f"{spath}: nodes[{index}] (id {et_id}): {exc}", path=spath, event=index) from None
        ops.append((rf_id if isinstance(rf_id, int) and not isinstance(rf_id, bool) else None, op))
    return ops


def attach_execution_trace(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Link the ET's ops to ``trace.cpu_ops``; results land in ``trace.et_ops`` (index -> EtOp)."""
    rf_ops = load_execution_trace(path, trace.warnings)
    trace.et_path = os.fspath(path)
    if not rf_ops:
        trace.warnings.append(f"{path}: execution trace holds no ops; ignored")
        return
    by_rf = {rf: op for rf, op in rf_ops if rf is not None}
    for i, ev in enumerate(trace.cpu_ops):
        rf = ev.args.record_function_id if ev.args is not None else None
        if rf is not None and rf in by_rf and by_rf[rf].name == ev.name:
            trace.et_ops[i] = by_rf[rf]
    if trace.et_ops:
        return
    names_in_kineto = {e.name for e in trace.cpu_ops}
    # The ET also records annotations (ProfilerStep, "## forward ##") that Kineto keeps apart from ops.
    ops = [op for _, op in rf_ops if op.name in names_in_kineto]
    if not ops:
        trace.warnings.append(f"{path}: execution trace does not match the Kineto trace's ops; ignored")
        return
    names = [e.name for e in trace.cpu_ops]
    et_names = [op.name for op in ops]
    start = _align(names, et_names)
    if start is None:
        trace.warnings.append(f"{path}: execution trace does not match the Kineto trace's ops; ignored")
        return
    j = 0
    for i in range(start, len(names)):
        if j >= len(ops):
            break
        # Greedy walk: the ET may hold ops the profiler filtered and vice versa; skip until names agree.
        k = j
        while k < len(ops) and k - j < 8 and ops[k].name != names[i]:
            k += 1
        if k < len(ops) and ops[k].name == names[i]:
            trace.et_ops[i] = ops[k]
            j = k + 1
    trace.warnings.extend([] if trace.et_ops else [f"{path}: no execution-trace op could be linked"])


def _align(names: list[str], et_names: list[str], probe: int = 32) -> int | None:
    """Index in ``names`` where the ET's op sequence begins (first window of ``probe`` names that matches)."""
    head = et_names[: min(probe, len(et_names))]
    n = len(head)
    first = head[0]
    for i, name in enumerate(names):
        if name == first and names[i : i + n] == head:
            return i
    # Weaker: the ET's first op name alone, first occurrence after which most of the probe matches in order.
    for i, name in enumerate(names):
        if name == first:
            window = names[i : i + 4 * n]
            it = iter(window)
            if sum(1 for h in head if h in it) >= 0.8 * n:
                return i
    return None
