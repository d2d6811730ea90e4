"""What a training step keeps in device memory, read from one trace: each block's parameters and the activations its
forward pass keeps for the backward, and the optimizer's state per parameter - and from them what one rank of a
tensor-, pipeline- and data-parallel plan holds (the memory model of Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", MLSys 2023, section 4, and of ZeRO, Rajbhandari et al., SC 2020,
section 3, on the counts the trace gives instead of a formula of the architecture).

Parameters: each block's gradients in the step (their sizes, as ``daydream.graph.gradients`` reads them: recorded,
or estimated where the trace records none, ``ModelMemory.sizes`` says which) - one per parameter. Of those, the Linears
tensor parallelism splits (``daydream.graph.tensor_parallel.split_pairs``): a
column-parallel Linear's weight and bias, a row-parallel one's weight. Activations: what each forward op call reads
(a Linear its tokens x in_features, a fused attention op every input and its output, a batched product of two
activations both factors - ``baddbmm`` not the tensor it adds to -, dropout its mask, any other op its first input),
counted once per op call; none for views, copies, residual adds, factories and embedding lookups (their backward
keeps no activation, or only indices), nor for ops that keep their output (ReLU, tanh, softmax: the next op reads it,
and is counted - but a dropout, which reads it and keeps only its mask, counts it as well) - the tensors autograd
keeps for the backward, to first order. A dropout's mask is a byte an element, counted in elements of the
activations' dtype (``model_memory``'s ``activation_bytes``: 4, fp32, unless told). bench/bench_model_memory.py
measures it against what programs keep. Of those, the ones
tensor parallelism shards: the ops between a column-parallel group and its row-parallel partner (the attention core,
the MLP's activation) and the row's input; with sequence parallelism the rest as well. Of the sharded ones, the
attention core's (the ops between an attention's q, k, v projection and its output projection) beyond q, k and v -
an unfused attention's scores (softmax's output, dropout's mask and output: 5as^2b bytes in fp16, Korthikanti et al.
section 4.1), a fused one's output -, which selective recomputation (their section 5, ``Parallelism``'s
``selective_recompute``) recomputes in the backward instead of keeping. Optimizer state: by the optimizer the trace's
``Optimizer.step#NAME.step`` range names (Adam's two moments, SGD's momentum).

Bytes: ``rank_memory``'s ``dtypes`` (a parameter, a state element, an activation) and ``grad_bytes`` (a gradient, where
it is not a parameter's). PyTorch's mixed precision keeps fp32 parameters and gradients (4, 4, 2); Megatron-LM's keeps
fp16 parameters, fp32 gradients (``main_grad``) and an fp32 copy of the parameters in its optimizer - one more state
tensor a parameter: 2 + 4 + (1 + 2) x 4 = 18 bytes with Adam (``daydream.graph.gpt_memory``'s ``master_weights``).

Without a trace: daydream.graph.gpt_memory writes the trace a GPT's forward pass in Megatron-LM would record and reads
it here as any other; bench/bench_paper_memory.py checks it against the per-GPU memory Korthikanti et al. give for
GPTs of 22B to 1T parameters (Figures 1 and 7; docs/accuracy.md).

Not counted: the allocator's fragmentation and cache, temporary buffers (the activations' gradients in the backward,
one layer's recomputed scores under selective recomputation), cuBLAS and NCCL workspaces, the CUDA context (about
0.5-1 GiB) - a plan's memory is the state the plan keeps, its headroom the user's choice. Where Megatron-LM's real
allocation differs beyond those: every activation is priced at one dtype (Megatron's fp32 logits for the loss at the
activations' 2 bytes), norms' saved statistics are left out, and ``buckets`` is PyTorch DDP's copy of the gradients,
which Megatron's DDP does not keep (its buckets are views of its fp32 gradient buffer).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import msgspec
import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of
from daydream.graph.gradients import SHAPES, GradientSizes, read_gradients
from daydream.graph.pipeline import block_of
from daydream.graph.schema import CPU_KINDS
from daydream.graph.tensor_parallel import ATTENTION_OP, VIEW_OP, linear_dims, split_pairs

# ops whose backward keeps no activation (or only indices): residual adds, copies, factories, embedding lookups
_KEEPS_NOTHING = re.compile(
    r"^aten::(add|add_|sub|sub_|to|_to_copy|copy_|clone|zeros|zeros_like|ones|ones_like|full|empty|empty_like|"
    r"empty_strided|arange|fill_|zero_|lift_fresh|resolve_conj|scalar_tensor|embedding|embedding_bag|"
    r"_embedding_bag|gather|index_select)$"
)
# ops whose backward keeps their output, which the next op reads (and keeps as its input): counted there
_KEEPS_OUTPUT = re.compile(
    r"^aten::(relu|relu_|sigmoid|sigmoid_|tanh|tanh_|threshold|threshold_|hardtanh|hardtanh_|"
    r"elu|elu_|_?softmax|_?log_softmax)$"
)
_DROPOUT = re.compile(r"^aten::(native_)?dropout|^aten::feature_dropout")  # keeps its mask: a byte an element
# a batched product of two activations (linear_dims found no 2-D weight): its backward keeps both factors, not its
# output
_PRODUCT = re.compile(r"^aten::(bmm|matmul|einsum)$")
_BADDBMM = "aten::baddbmm"  # self + batch1 @ batch2: keeps batch1 and batch2 (self is only added)
_OPTIMIZER = re.compile(r"^Optimizer\.step#(\w+)\.step")
# optimizer state per parameter, in parameters' worth (torch.optim: Adam's exp_avg and exp_avg_sq; SGD's momentum
# buffer, assumed in use; Adagrad's sum; RMSprop's square average)
OPTIMIZER_STATES = {
    "Adam": 2,
    "AdamW": 2,
    "Adamax": 2,
    "NAdam": 2,
    "RAdam": 2,
    "Adadelta": 2,
    "FusedAdam": 2,
    "FusedLAMB": 2,
    "LAMB": 2,
    "Lamb": 2,
    "SGD": 1,
    "FusedSGD": 1,
    "Adagrad": 1,
    "RMSprop": 1,
    "Rprop": 2,
    "ASGD": 2,
    "SparseAdam": 2,
}
UNKNOWN_OPTIMIZER_STATES = 2  # an optimizer the table does not know: Adam's, the most common
SCHEDULES = ("1f1b", "gpipe", "interleaved")
WHOLE_MODEL = "(model)"  # the one block of a trace whose ops carry no modules


@dataclass(frozen=True)
class BlockMemory:
    """One block of the forward pass (``daydream.graph.pipeline.block_of``): elements of its parameters and of the
    activations its forward pass keeps for the traced batch, and the parts tensor parallelism splits."""

    name: str
    parameters: int
    split_parameters: int  # in the Linears tensor parallelism splits
    activations: int
    sharded_activations: int  # read by ops on tensor parallelism's sharded activations
    # of those, what the attention core keeps beyond its inputs q, k and v (the scores: softmax's output, dropout's
    # mask and output; a fused attention's output), which selective recomputation recomputes instead of keeping
    attention_core: int = 0


@dataclass(frozen=True)
class ModelMemory:
    """A model's memory as one trace's step tells it: its blocks in forward order and its optimizer."""

    blocks: tuple[BlockMemory, ...]
    optimizer: str | None  # as the trace's Optimizer.step range names it (None: no optimizer step in the trace)
    optimizer_states: int  # state tensors per parameter
    sizes: GradientSizes = GradientSizes(SHAPES)  # where the parameters' sizes came from (the gradients')

    @property
    def parameters(self) -> int:
        return sum(b.parameters for b in self.blocks)

    @property
    def activations(self) -> int:
        return sum(b.activations for b in self.blocks)


class RankMemory(msgspec.Struct, frozen=True):
    """Bytes one rank of a plan holds: a pipeline stage's parameters, gradients, optimizer state, DDP's gradient
    buckets and the activations in flight at its peak (the schedule's micro-batches awaiting their backward)."""

    stage: int
    blocks: list[str]
    parameters: float
    gradients: float
    optimizer: float
    buckets: (
        float  # DDP's flat gradient buckets (gradient_as_bucket_view=False, its default): a second copy (ZeRO: none)
    )
    activations: float
    in_flight: int  # the micro-batches (virtual ones, interleaved) whose activations the rank keeps at once

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer + self.buckets + self.activations


def _activation_elements(calls: dict[Any, list[dict[str, Any]]], activation_bytes: int = 4) -> dict[Any, int]:
    """Elements each forward op call keeps for its backward (module docstring), by call in forward order; a dropout's
    mask, a byte an element, in elements of ``activation_bytes``."""
    out: dict[Any, int] = {}
    after_output = False  # the last op before this one (views aside) keeps its output
    for key, tasks in calls.items():
        top = tasks[0].get("top_op") or tasks[0].get("op") or ""
        if VIEW_OP.match(top):
            continue
        follows_output, after_output = after_output, bool(_KEEPS_OUTPUT.match(top))
        if _KEEPS_NOTHING.match(top) or after_output:
            continue
        shaped = [t for t in tasks if isinstance(t.get("shapes"), list)]
        dims = next((d for t in shaped if (d := linear_dims(t.get("op"), t.get("shapes"))) is not None), None)
        if dims is not None:
            out[key] = dims[0] * dims[1]
            continue
        own = next((t for t in shaped if t.get("op") == top), shaped[0] if shaped else None)
        if own is None:
            continue
        tensors = [d for d in own["shapes"] if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
        if not tensors:
            continue
        sizes = [math.prod(d) for d in tensors]
        if _PRODUCT.match(top):
            out[key] = sum(sizes[:2])
        elif top == _BADDBMM:
            out[key] = sum(sizes[1:3])
        elif ATTENTION_OP.search(top):  # attention keeps its inputs (q, k, v) and its output, the size of q
            out[key] = sum(sizes) + sizes[0]
        elif _DROPOUT.match(top):
            # its mask; and after an op that keeps its output (softmax), that output: the dropout reads it and keeps
            # only the mask, so the next op's input is the dropout's output, not it
            out[key] = sizes[0] // activation_bytes + (sizes[0] if follows_output else 0)
        else:
            out[key] = sizes[0]
    return out


def activation_calls(graph: nx.DiGraph) -> list[tuple[Any, Any, int]]:
    """Each forward op call of every step that keeps activations for its backward (module docstring): its first task
    (by start), its step and the elements it keeps."""
    nodes = attrs_of(graph)
    calls: dict[Any, list[Any]] = {}
    for v in sorted(
        (v for v, a in nodes.items() if a.get("phase") == "forward" and a["kind"] in CPU_KINDS),
        key=lambda v: (float(nodes[v].get("start", 0.0)), str(v)),
    ):
        key = nodes[v].get("top_op_id")
        calls.setdefault(key if key is not None else ("task", v), []).append(v)
    elements = _activation_elements({k: [nodes[v] for v in vs] for k, vs in calls.items()})
    return [(calls[k][0], nodes[calls[k][0]].get("step"), n) for k, n in elements.items() if n > 0]


def model_memory(graph: nx.DiGraph, step: str | None = None, activation_bytes: int = 4) -> ModelMemory:
    """The blocks' parameters and activations in a step (the graph's last by default) and the optimizer's state
    (module docstring); a trace without modules is one block, WHOLE_MODEL. ``activation_bytes``: bytes per element
    of the activations, which a dropout's mask (a byte an element) is counted in. Raises DaydreamError without
    gradient sizes."""
    attrs = attrs_of(graph)
    if step is None:
        steps = graph.graph.get("steps") or []
        step = steps[-1].name if steps else None
    forward = sorted(
        (a for a in attrs.values() if a.get("step") == step and a.get("phase") == "forward" and a["kind"] in CPU_KINDS),
        key=lambda a: float(a.get("start", 0.0)),
    )
    # each op call's tasks and block; work of no block joins the block before it (the first where none did)
    calls: dict[Any, list[dict[str, Any]]] = {}
    call_block: dict[Any, str | None] = {}
    order: list[str] = []
    current: str | None = None
    for a in forward:
        name = block_of(a.get("layer"))
        if name is not None:
            current = name
            if name not in order:
                order.append(name)
        key = a.get("top_op_id")
        key = key if key is not None else ("task", id(a))
        calls.setdefault(key, []).append(a)
        call_block.setdefault(key, current)
    if not order:  # no modules (or only the root's): the model is one block
        order.append(WHOLE_MODEL)
    pairs = [p for p in split_pairs(graph) if p.step == step]
    sharded_layers = {layer for p in pairs for layer in (*p.sharded, p.row.layer)}
    # the attention core: the ops between an attention's q, k, v projection and its output projection
    attention_ops = {
        c[0].get("layer") for c in calls.values() if ATTENTION_OP.search(c[0].get("top_op") or c[0].get("op") or "")
    }
    attentions = [p for p in pairs if attention_ops.intersection(p.sharded)]
    core_layers = {layer for p in attentions for layer in p.sharded}
    acts = {name: 0 for name in order}
    sharded = {name: 0 for name in order}
    core = {name: 0 for name in order}
    for p in attentions:  # its inputs, q, k and v, are kept whether the core is recomputed or not
        name = block_of(p.row.layer)
        if name in core:
            core[name] -= sum(c.tokens * c.out_features for c in p.columns)
    for key, n in _activation_elements(calls, activation_bytes).items():
        name = call_block[key] or order[0]
        acts[name] += n
        layer = calls[key][0].get("layer")
        if layer in sharded_layers:
            sharded[name] += n
        if layer in core_layers:
            core[name] += n
    # parameters: the step's gradients, by the block of their module; the split Linears' part by their dims
    try:
        read, sizes = read_gradients(graph, 1)
    except DaydreamError as exc:
        raise DaydreamError(f"parameter sizes: {exc}") from None
    grads = [g for g in read if g.step == step]
    by_layer: dict[str | None, int] = {}
    for g in grads:
        by_layer[g.layer] = by_layer.get(g.layer, 0) + g.nbytes
    params = {name: 0 for name in order}
    split = {name: 0 for name in order}
    for layer, n in by_layer.items():
        params[block_of(layer) if block_of(layer) in params else order[0]] += n
    dims: dict[str, int] = {}
    for p in pairs:
        for c in p.columns:
            dims[c.layer] = c.in_features * c.out_features + c.out_features
        dims[p.row.layer] = p.row.in_features * p.row.out_features
    for layer, n in dims.items():
        name = block_of(layer)
        if name in split:
            split[name] += min(n, by_layer.get(layer, 0))
    optimizer = next((m.group(1) for a in attrs.values() if (m := _OPTIMIZER.match(str(a.get("region") or "")))), None)
    states = OPTIMIZER_STATES.get(optimizer, UNKNOWN_OPTIMIZER_STATES) if optimizer else 0
    blocks = tuple(BlockMemory(n, params[n], split[n], acts[n], sharded[n], max(0, core[n])) for n in order)
    return ModelMemory(blocks, optimizer, states, sizes)


def in_flight(schedule: str, pp: int, micro_batches: int, rank: int, chunks: int = 1) -> int:
    """Micro-batches (virtual ones: a chunk's) whose activations a pipeline rank keeps at its peak: GPipe all of them,
    1F1B those its warm-up runs forward before the first backward (pp - rank), the interleaved schedule its longer
    warm-up ((pp - rank - 1) x 2 + (chunks - 1) x pp, plus the one in flight), as the schedules order them
    (transforms/pipeline_parallel.whatif)."""
    if schedule not in SCHEDULES:
        raise DaydreamError(f"schedule {schedule!r}: one of {', '.join(SCHEDULES)}")
    if schedule == "gpipe":
        return micro_batches * chunks
    if schedule == "1f1b":
        return min(pp - rank, micro_batches)
    return min((pp - rank - 1) * 2 + (chunks - 1) * pp + 1, micro_batches * chunks)


@dataclass(frozen=True)
class Parallelism:
    """How a plan splits a model replica: ``tp`` tensor-parallel ranks, the replica's batch (``batch_scale`` times the
    traced one) cut into ``micro_batches`` run in ``schedule``'s order (``chunks`` a rank, interleaved), Megatron's
    sequence parallelism; ``data_parallel`` replicas, whose gradients go through DDP's buckets, or with ``zero`` 1 the
    optimizer state and with 2 the gradients too sharded over them (ZeRO, Rajbhandari et al., SC 2020: its stages 1
    and 2, as Megatron-LM's distributed optimizer keeps them); with ``selective_recompute`` the attention core
    recomputed in the backward instead of kept (Korthikanti et al., section 5: Megatron's selective recomputation)."""

    tp: int = 1
    micro_batches: int = 1
    schedule: str = "1f1b"
    chunks: int = 1
    data_parallel: int = 1
    sequence_parallel: bool = False
    batch_scale: float = 1.0  # a replica's batch over the traced one: the activations scale with it
    zero: int = 0
    selective_recompute: bool = False


def rank_memory(
    model: ModelMemory,
    stages: list[list[str]],
    split: Parallelism = Parallelism(),
    dtypes: tuple[float, float, float] = (4, 4, 4),
    grad_bytes: float | None = None,
) -> list[RankMemory]:
    """What each rank of a pipeline holds: ``stages``, each rank's blocks by name (interleaved: the blocks of all
    its chunks), split as ``split`` says (a virtual micro-batch of the interleaved schedule keeps one chunk's
    activations). ``dtypes``: bytes per element of a parameter (its gradient alike), of optimizer state and of an
    activation; ``grad_bytes``: of a gradient (and DDP's bucket), where it is not a parameter's - Megatron-LM
    accumulates fp16 or bf16 parameters' gradients in fp32 (its ``main_grad``)."""
    param_b, state_b, act_b = dtypes
    grad_b = param_b if grad_bytes is None else grad_bytes
    by_name = {b.name: b for b in model.blocks}
    missing = [n for s in stages for n in s if n not in by_name]
    if missing:
        raise DaydreamError(f"blocks {', '.join(missing)}: not among the model's ({', '.join(by_name)})")
    out = []
    tp, dp = split.tp, max(1, split.data_parallel)
    for r, names in enumerate(stages):
        held = [by_name[n] for n in names]
        params = sum(b.split_parameters / tp + (b.parameters - b.split_parameters) for b in held)
        acts = sum(
            (b.sharded_activations - (b.attention_core if split.selective_recompute else 0)) / tp
            + (b.activations - b.sharded_activations) / (tp if split.sequence_parallel else 1)
            for b in held
        )
        flying = in_flight(split.schedule, len(stages), split.micro_batches, r, split.chunks)
        out.append(
            RankMemory(
                stage=r,
                blocks=list(names),
                parameters=params * param_b,
                gradients=params * grad_b / (dp if split.zero >= 2 else 1),
                optimizer=params * model.optimizer_states * state_b / (dp if split.zero >= 1 else 1),
                buckets=params * grad_b if dp > 1 and split.zero == 0 else 0.0,
                activations=acts * act_b * split.batch_scale * flying / (split.micro_batches * split.chunks),
                in_flight=flying,
            )
        )
    return out
