"""Where a model splits for tensor parallelism as Megatron-LM splits a transformer (Shoeybi et al., 2019, section 3).

Megatron splits pairs of Linear layers: the first (or a run of them reading the same input: q, k and v; a gated MLP's
gate and up projections) is *column-parallel* - each rank computes out_features / tp of its outputs -, the ops after
it run on those sharded activations (the attention core on heads / tp, the activation function), and the next Linear,
which reads them, is *row-parallel* - in_features / tp; the ranks' partial outputs are summed by an all-reduce. In the
backward pass the column-parallel group's input gradient is all-reduced. Everything else (embeddings, norms, residual
adds, the loss, an output layer with no row-parallel partner) is replicated: each rank runs it whole.

The pairs are found in the trace's forward pass, from the module (``layer``) and input shapes of each op call, in time
order. A Linear call (``aten::linear``, or ``addmm`` / ``mm`` / ``matmul`` by a 2-D weight) opens a column group in
its parent module; while the group is open:

- a Linear of the same parent is the row-parallel one if an attention op ran since the group opened (``o_proj`` after
  the attention core), or if it reads what a column produced (its in_features is a column's out_features: ``fc2``
  after ``fc1``), unless only views ran since the last column and it reads the group's input (``k_proj`` right after
  ``q_proj``: another column); else one reading the group's input is another column (``up_proj`` after ``gate_proj``
  and its activation); any other is the row-parallel one;
- any other op of the parent's modules runs on the sharded activations (its module is recorded as sharded);
- a normalization op, or an op outside the parent's modules (a residual add in the block, the loss), closes the group
  unsplit: a Linear followed by a norm before its partner (BERT's head transform) is not split.

Needs the ops' modules (``layer``: traces from ``daydream record``, or recorded with module ranges) and input shapes
(``record_shapes=True``); without them there is nothing to split and the list is empty.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.graph.adjacency import attrs_of
from daydream.graph.schema import CPU_KINDS

# ops that only re-describe a tensor: between two columns they do not make the second read something else (and
# keep nothing for the backward: daydream.graph.model_memory)
VIEW_OP = re.compile(
    r"^aten::(view|reshape|_reshape_alias|_unsafe_view|permute|transpose|t|unbind|split|split_with_sizes|chunk|"
    r"expand|select|slice|unsqueeze|squeeze|flatten|unflatten|as_strided|alias|detach|narrow|contiguous)$"
)
ATTENTION_OP = re.compile(r"attention|^aten::(bmm|baddbmm|_?softmax|matmul|einsum)$|flash|sdpa|efficient_attn", re.I)
_NORM = re.compile(r"norm", re.I)
_LINEAR_OPS = {"aten::linear", "aten::addmm", "aten::mm", "aten::matmul"}


@dataclass(frozen=True)
class Linear:
    """One Linear call of the forward pass: its module, the rows it multiplies (tokens: every input dim but the last),
    and its input and output features."""

    layer: str
    tokens: int
    in_features: int
    out_features: int


@dataclass(frozen=True)
class SplitPair:
    """A column-parallel group and its row-parallel partner in one step, and the modules whose ops ran between them
    on the sharded activations."""

    step: str | None
    columns: tuple[Linear, ...]
    row: Linear
    sharded: tuple[str, ...]
    replicated: tuple[str, ...]  # modules of the ops since the step's previous pair's row (norms, residual adds)


def linear_dims(op: str | None, shapes: Any) -> tuple[int, int, int] | None:
    """(tokens, in_features, out_features) of a Linear-like op from its input dims: ``aten::linear`` (input, weight
    [out, in]), ``aten::addmm`` (bias, input, weight.t() [in, out]), ``aten::mm`` / ``aten::matmul`` by a 2-D
    weight [in, out]. None for anything else (a batched matmul of two activations, no shapes)."""
    if op not in _LINEAR_OPS or not isinstance(shapes, list):
        return None
    dims = [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else None for d in shapes]
    try:
        if op == "aten::linear":
            x, w = dims[0], dims[1]
            if x and w and len(w) == 2 and x[-1] == w[1]:
                return math.prod(x[:-1]), w[1], w[0]
        else:
            x, w = (dims[1], dims[2]) if op == "aten::addmm" else (dims[0], dims[1])
            if x and w and len(w) == 2 and x[-1] == w[0]:
                return math.prod(x[:-1]), w[0], w[1]
    except IndexError:
        return None
    return None


@dataclass
class _Call:
    op: str
    layer: str | None
    step: str | None
    linear: Linear | None


def _forward_calls(graph: nx.DiGraph) -> list[_Call]:
    """The forward pass's op calls (outermost ops, by ``top_op_id``) in time order, each with its Linear dims where
    it is one."""
    calls: dict[Any, tuple[float, _Call]] = {}
    for _, a in attrs_of(graph).items():
        if a.get("phase") != "forward" or a.get("kind") not in CPU_KINDS:
            continue
        key = a.get("top_op_id")
        op = a.get("top_op") or a.get("op")
        if key is None or not op:
            continue
        start = float(a.get("start", 0.0))
        found = calls.get(key)
        if found is None:
            found = calls[key] = (start, _Call(op, a.get("layer"), a.get("step"), None))
        elif start < found[0]:
            calls[key] = found = (start, found[1])
        call = found[1]
        if call.linear is None and call.layer is not None:
            dims = linear_dims(a.get("op"), a.get("shapes"))
            if dims is not None and (a.get("op") == op or op in _LINEAR_OPS):
                call.linear = Linear(call.layer, *dims)
    return [c for _, c in sorted(calls.values(), key=lambda sc: sc[0])]


def linear_calls(graph: nx.DiGraph) -> list[tuple[str | None, Linear]]:
    """Every Linear call of the forward pass with its dims, by step, in time order."""
    return [(c.step, c.linear) for c in _forward_calls(graph) if c.linear is not None]


def _parent(layer: str) -> str:
    return layer.rpartition(".")[0]


def _within(layer: str | None, parent: str) -> bool:
    return layer is not None and (layer == parent or layer.startswith(parent + "."))


def split_pairs(graph: nx.DiGraph) -> list[SplitPair]:
    """The column/row-parallel pairs of every step's forward pass, in time order (module docstring)."""
    pairs: list[SplitPair] = []
    columns: list[Linear] = []
    parent, step = "", None
    attention = views_only = False
    sharded: list[str] = []
    since_row: list[str] = []  # modules of the ops since the step's last row-parallel Linear (None: none yet)
    since_step: str | None = None
    last_row_seen = False
    replicated: list[str] = []
    for call in _forward_calls(graph):
        lin = call.linear
        if call.step != since_step:
            since_step, since_row = call.step, []
            last_row_seen = False
        if columns and (
            call.step != step or (lin is None and (not _within(call.layer, parent) or _NORM.search(call.op)))
        ):
            columns = []  # closed unsplit
        if lin is not None:
            if columns and _parent(lin.layer) == parent:
                reads_group = lin.in_features == columns[0].in_features
                if not attention and views_only and reads_group:
                    columns.append(lin)
                elif attention or lin.in_features in {c.out_features for c in columns} or not reads_group:
                    pairs.append(
                        SplitPair(
                            step, tuple(columns), lin, tuple(dict.fromkeys(sharded)), tuple(dict.fromkeys(replicated))
                        )
                    )
                    columns, since_row, last_row_seen = [], [], True
                else:
                    columns.append(lin)
                    views_only = True
                continue
            columns, parent, step = [lin], _parent(lin.layer), call.step
            attention, views_only, sharded = False, True, []
            replicated = since_row if last_row_seen else []
            continue
        if columns:
            if not VIEW_OP.match(call.op):
                views_only = False
                attention = attention or bool(ATTENTION_OP.search(call.op))
            if call.layer is not None:
                sharded.append(call.layer)
        elif call.layer is not None:
            since_row.append(call.layer)
    return pairs
