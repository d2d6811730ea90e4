"""A GPT's memory from its configuration, without a trace: ``daydream plan``'s memory model
(daydream.graph.model_memory)
read from the forward pass a one-GPU trace of Megatron-LM's GPT would record.

:func:`gpt_graph` writes that pass for L layers of hidden size h, a heads, sequence s, vocabulary v and micro-batch b:
each op call Megatron-LM's GPT runs (as Korthikanti et al., MLSys 2023, section 4.1, count them: the unfused attention
core - QK^T by ``baddbmm``, softmax, dropout, attention over V by ``bmm`` -, fused bias-dropout-add and bias-GeLU) in
its module with its input shapes ([s, b, h], as Megatron lays them out), one ``AccumulateGrad`` per parameter with its
dims, and the optimizer's step range. :func:`gpt_memory` reads it with :func:`~daydream.graph.model_memory.model_memory`
as it reads a trace - the same counting rules, the same column/row pairs (daydream.graph.tensor_parallel), the same
blocks (the embedding, each layer, the final norm, the output layer) - and adds what Megatron does that a one-GPU trace
cannot show:

- the word embedding split over tp by vocabulary (``VocabParallelEmbedding``) and the output layer that shares it
  column-parallel, its cross entropy on v / tp logits (``vocab_parallel_cross_entropy``): the table's parameters split,
  the loss's kept logits sharded;
- mixed precision (``master_weights``): fp16 parameters, whose optimizer keeps an fp32 copy - one more state tensor a
  parameter, priced at the state's bytes - and whose gradients Megatron accumulates in fp32 (``rank_memory``'s
  ``grad_bytes``): 2 + 4 + (1 + 2) x 4 = 18 bytes a parameter with Adam.

:func:`megatron_stages` places the blocks on pipeline ranks as Megatron does: L / (pp x chunks) layers a chunk, rank r
holding chunks r, r + pp, ...; the embedding on the first rank, the final norm and output layer on the last.

What stays different from Megatron-LM's allocation, beyond what ``model_memory`` leaves out: with pp > 1 Megatron's
last rank keeps a copy of the word embedding for the output layer (its gradient and optimizer state too), not counted
here (the first rank is the fuller one); the loss's fp32 logits are priced at the activations' dtype; a fused
softmax (``FusedScaleMaskSoftmax``) is written as ``aten::_softmax``, which keeps the same output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.edit import add_task
from daydream.graph.model_memory import BlockMemory, ModelMemory, _activation_elements, model_memory

EMBEDDING, OUTPUT, FINAL_NORM = "gpt.embedding", "gpt.output_layer", "gpt.final_layernorm"
_THREAD, _BACKWARD = "cpu:1/1", "cpu:1/2"


@dataclass(frozen=True)
class GPT:
    """A GPT (Megatron-LM's: learned position embeddings, LayerNorm, GeLU MLP of ``ffn`` (4 h), the output layer tied
    to the word embedding) of ``layers`` x ``hidden`` with ``heads``, on ``micro_batch`` sequences of ``seq`` tokens of
    a vocabulary of ``vocab``."""

    layers: int
    hidden: int
    heads: int
    seq: int = 2048
    vocab: int = 51200
    micro_batch: int = 1
    ffn: int | None = None

    def layer(self, i: int) -> str:
        """The block of layer i."""
        return f"gpt.decoder.layers.{i}"


def gpt_graph(model: GPT, optimizer: str = "Adam") -> nx.DiGraph:
    """The forward pass, gradients and ``optimizer``'s step a one-GPU trace of ``model`` would record, in that order
    (module docstring)."""
    s, b, h, a, v = model.seq, model.micro_batch, model.hidden, model.heads, model.vocab
    f = model.ffn or 4 * h
    if min(s, b, h, a, v, f, model.layers) < 1 or h % a:
        raise DaydreamError(f"{model}: sizes >= 1, hidden a multiple of heads")
    d = h // a
    g = nx.DiGraph()
    g.graph.update(steps=[])

    def op(layer: str | None, name: str, *shapes: list[int], phase: str = "forward", thread: str = _THREAD) -> None:
        # one task a call, a microsecond each, one after another
        add_task(
            g,
            name,
            "cpu",
            thread,
            1.0,
            start=float(len(g)),
            phase=phase,
            op=name,
            top_op=name,
            shapes=list(shapes),
            top_op_id=len(g),
            layer=layer,
        )

    params: list[tuple[str, list[int]]] = []

    def linear(layer: str, x: list[int], out: int, bias: bool = True) -> None:
        op(layer, "aten::linear", x, [out, x[-1]], *([[out]] if bias else []))
        params.extend([(layer, [out, x[-1]]), *([(layer, [out])] if bias else [])])

    def norm(layer: str) -> None:
        op(layer, "aten::layer_norm", [s, b, h], [h], [h], [h])
        params.extend([(layer, [h]), (layer, [h])])

    # the embedding: lookups keep only indices; the dropout its mask
    op(f"{EMBEDDING}.word_embeddings", "aten::embedding", [v, h], [s, b])
    op(f"{EMBEDDING}.position_embeddings", "aten::embedding", [s, h], [s, b])
    op(EMBEDDING, "aten::add", [s, b, h], [s, b, h])
    op(f"{EMBEDDING}.embedding_dropout", "aten::dropout", [s, b, h])
    params.extend([(f"{EMBEDDING}.word_embeddings", [v, h]), (f"{EMBEDDING}.position_embeddings", [s, h])])
    for i in range(model.layers):
        layer = model.layer(i)
        attn, mlp = f"{layer}.self_attention", f"{layer}.mlp"
        norm(f"{layer}.input_layernorm")
        linear(f"{attn}.query_key_value", [s, b, h], 3 * h)
        core = f"{attn}.core_attention"
        op(core, "aten::baddbmm", [b * a, s, s], [b * a, s, d], [b * a, d, s])  # QK^T into a buffer (beta 0)
        op(core, "aten::_softmax", [b, a, s, s])
        op(core, "aten::dropout", [b, a, s, s])
        op(core, "aten::bmm", [b * a, s, s], [b * a, s, d])  # attention over V
        linear(f"{attn}.dense", [s, b, h], h)
        for name in ("aten::add", "aten::dropout", "aten::add"):  # bias-dropout-add (fused), then the residual
            op(layer, name, [s, b, h], [s, b, h])
        norm(f"{layer}.post_attention_layernorm")
        linear(f"{mlp}.dense_h_to_4h", [s, b, h], f)
        op(mlp, "aten::gelu", [s, b, f])  # bias-GeLU (fused): keeps its input
        linear(f"{mlp}.dense_4h_to_h", [s, b, f], h)
        for name in ("aten::add", "aten::dropout", "aten::add"):
            op(layer, name, [s, b, h], [s, b, h])
    norm(FINAL_NORM)
    op(
        OUTPUT, "aten::linear", [s, b, h], [v, h]
    )  # the logits by the word embedding (tied: its gradient is the table's)
    # the cross entropy in fp32, on no module: it joins the output layer's block
    op(None, "aten::to", [s, b, v])
    op(None, "aten::_log_softmax", [s * b, v])
    op(None, "aten::nll_loss_forward", [s * b, v], [s * b])
    for layer, dims in reversed(params):  # the backward reaches the parameters in reverse
        op(layer, "torch::autograd::AccumulateGrad", dims, phase="backward", thread=_BACKWARD)
    step = f"Optimizer.step#{optimizer}.step"
    add_task(g, step, "cpu", _THREAD, 1.0, start=float(len(g)), region=step)
    return g


def gpt_memory(
    model: GPT, activation_bytes: int = 2, master_weights: bool = True, optimizer: str = "Adam"
) -> ModelMemory:
    """``model``'s memory as ``daydream plan`` counts a trace's (module docstring), Megatron-LM's vocabulary-parallel
    embedding and output layer marked; ``activation_bytes``: the activations' dtype (2: fp16), which a dropout's mask
    is counted in; ``master_weights``: mixed precision's fp32 copy of the parameters, one more optimizer state a
    parameter."""
    graph = gpt_graph(model, optimizer)
    memory = model_memory(graph, activation_bytes=activation_bytes)
    loss = {n: a for n, a in graph.nodes(data=True) if a["phase"] == "forward" and a["layer"] is None}
    # the loss's kept logits, counted by the same rules on its calls alone: v / tp of them a rank
    logits = sum(_activation_elements({n: [a] for n, a in loss.items()}, activation_bytes).values())
    word = model.vocab * model.hidden

    def vocab_parallel(block: BlockMemory) -> BlockMemory:
        if block.name == EMBEDDING:
            return dataclasses.replace(block, split_parameters=block.split_parameters + word)
        if block.name == OUTPUT:
            return dataclasses.replace(block, sharded_activations=block.sharded_activations + logits)
        return block

    return dataclasses.replace(
        memory,
        blocks=tuple(vocab_parallel(b) for b in memory.blocks),
        optimizer_states=memory.optimizer_states + (1 if master_weights else 0),
    )


def megatron_stages(model: GPT, pp: int, chunks: int = 1) -> list[list[str]]:
    """Each pipeline rank's blocks as Megatron-LM places them (module docstring); ``chunks`` a rank, interleaved."""
    parts = pp * chunks
    if pp < 1 or chunks < 1 or model.layers % parts:
        raise DaydreamError(f"{model.layers} layers: not {parts} equal chunks (pp {pp} x chunks {chunks})")
    per = model.layers // parts
    stages: list[list[str]] = [[] for _ in range(pp)]
    for c in range(parts):
        stages[c % pp].extend(model.layer(i) for i in range(c * per, (c + 1) * per))
    stages[0].insert(0, EMBEDDING)
    stages[-1].extend([FINAL_NORM, OUTPUT])
    return stages
