"""A transformer encoder trained with Megatron-LM's tensor parallelism over `--tp` processes (torch.distributed, gloo,
on the CPU), each recorded by daydream's recorder from inside the program (rank<R> files): the AFTER of the tensor
parallelism case. `--tp 1` is the same model in one process, unsplit: its BEFORE.

The model is examples/transformer.py's post-norm encoder (4 layers, hidden 256, 4 heads, 64 tokens, an MLM head over
1,000 tokens, Adam) written as Megatron writes it (Shoeybi et al., 2019, figure 3): per layer, the fused `qkv`
Linear and `fc1` are column-parallel (each rank holds out_features / tp of them: heads / tp, 4 x hidden / tp), `out`
and `fc2` row-parallel (in_features / tp), their outputs summed by an all-reduce (`g`) and the input gradients of
`qkv` and `fc1` all-reduced in the backward pass (`f`). Embeddings, norms and the head are whole on every rank. Each
rank trains on the same batch (TP ranks share it) with one intra-op thread, so two ranks use the two cores.

    python validation/programs/tp_transformer.py --tp 2 --out DIR/rank0.json.gz [--steps 6]
    python validation/programs/tp_transformer.py --tp 1 --dp 2 --out DIR/rank0.json.gz   # data parallel (DDP)

`--dp 2` trains the unsplit model with PyTorch's DistributedDataParallel over 2 gloo processes instead, each rank on
its own batch of the same size (weak scaling), its gradients' buckets all-reduced during the backward pass: the AFTER
of the data-parallel case.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # daydream, from the checkout (spawned workers too)
VOCAB, SEQ, HIDDEN, HEADS, LAYERS, BATCH = 1000, 64, 256, 4, 4, 16
_SPLIT = {"tp": 1}  # the tensor-parallel ranks of this process's model (pp_transformer.py runs it unsplit on 2 ranks)


def _tp() -> int:
    return _SPLIT["tp"]


class _CopyToParallel(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        if _tp() > 1:
            grad = grad.contiguous()
            dist.all_reduce(grad)
        return grad


class _ReduceFromParallel(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        if _tp() > 1:
            x = x.contiguous()
            dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        return grad


class SelfAttention(nn.Module):
    def __init__(self, tp: int) -> None:
        super().__init__()
        self.heads = HEADS // tp
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN // tp)  # column-parallel
        # row-parallel; each rank adds its own bias before the sum (Megatron adds one after it): the same work, and
        # this model is only timed
        self.out = nn.Linear(HIDDEN // tp, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        x = _CopyToParallel.apply(x)
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, HIDDEN // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return _ReduceFromParallel.apply(self.out(y.transpose(1, 2).reshape(batch, seq, -1)))


class FeedForward(nn.Module):
    def __init__(self, tp: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN // tp)  # column-parallel
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * HIDDEN // tp, HIDDEN)  # row-parallel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ReduceFromParallel.apply(self.fc2(self.act(self.fc1(_CopyToParallel.apply(x)))))


class EncoderLayer(nn.Module):
    def __init__(self, tp: int) -> None:
        super().__init__()
        self.attn = SelfAttention(tp)
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.mlp = FeedForward(tp)
        self.norm2 = nn.LayerNorm(HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


class Encoder(nn.Module):
    def __init__(self, tp: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, HIDDEN)
        self.positions = nn.Embedding(SEQ, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList(EncoderLayer(tp) for _ in range(LAYERS))
        self.transform = nn.Linear(HIDDEN, HIDDEN)
        self.head_norm = nn.LayerNorm(HIDDEN)
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.tokens(ids) + self.positions(torch.arange(ids.shape[1])))
        for layer in self.layers:
            x = layer(x)
        return self.decoder(self.head_norm(F.gelu(self.transform(x))))


def train(rank: int, tp: int, steps: int, out_dir: str, init: str, dp: int = 1) -> None:
    from daydream.record import record

    torch.set_num_threads(1)
    _SPLIT["tp"] = tp
    if tp > 1 or dp > 1:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=max(tp, dp))
    torch.manual_seed(rank if dp == 1 else 0)  # data-parallel replicas start alike, as DDP makes them
    model: nn.Module = Encoder(tp)
    if dp > 1:
        model = nn.parallel.DistributedDataParallel(model)  # its buckets' all-reduces overlap the backward pass
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    # the same batches on every tensor-parallel rank; a data-parallel rank its own
    gen = torch.Generator().manual_seed(rank if dp > 1 else 0)
    with record(out_dir, warmup=2, steps=steps):
        for _ in range(steps + 4):
            ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
            labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
            loss = F.cross_entropy(model(ids).flatten(0, 1), labels.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    if tp > 1 or dp > 1:
        dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (1: the unsplit model in one process)")
    p.add_argument("--dp", type=int, default=1, help="data-parallel ranks of the unsplit model (DDP; with --tp 1)")
    p.add_argument("--steps", type=int, default=3, help="steps recorded (after 2 of warm-up)")
    p.add_argument("--out", required=True, help="rank 0's trace to write (DIR/rank0.json.gz): every rank's goes to DIR")
    args = p.parse_args()
    if args.tp < 1 or HEADS % args.tp:
        p.error(f"--tp must divide the {HEADS} heads")
    if args.dp < 1 or (args.dp > 1 and args.tp > 1):
        p.error("--dp: a whole number >= 1, with --tp 1")
    out_dir = str(Path(args.out).parent)
    if args.tp == 1 and args.dp == 1:
        train(0, 1, args.steps, out_dir, "")
        return
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        ranks = max(args.tp, args.dp)
        mp.spawn(train, args=(args.tp, args.steps, out_dir, init, args.dp), nprocs=ranks, join=True)


if __name__ == "__main__":
    main()
