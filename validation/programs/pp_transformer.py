"""The tensor-parallel case's encoder (validation/programs/tp_transformer.py, unsplit) trained as a 2-stage pipeline
over 2 processes (torch.distributed, gloo, on the CPU; one intra-op thread each), each recorded by daydream's recorder
from inside the program (rank<R> files): the AFTER of the pipeline-parallelism case, whose BEFORE is
`tp_transformer.py --tp 1` (the same model and batch in one process).

Stage 0 (rank 0) holds the embeddings and layers 0-1, stage 1 (rank 1) layers 2-3 and the head; the batch of 16 is
cut into `--micro-batches` micro-batches run in GPipe's order: every micro-batch forward (stage 0 sends each
activation to stage 1 as it is ready), then every one backward (stage 1 sends each activation's gradient back).
Each rank steps its own Adam over its own parameters.

    python validation/programs/pp_transformer.py --out DIR/rank0.json.gz [--micro-batches 4] [--steps 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tp_transformer import BATCH, HIDDEN, LAYERS, SEQ, VOCAB, Encoder  # noqa: E402


class Stage0(nn.Module):
    def __init__(self, model: Encoder) -> None:
        super().__init__()
        self.tokens, self.positions, self.norm = model.tokens, model.positions, model.norm
        self.layers = nn.ModuleList(model.layers[: LAYERS // 2])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.tokens(ids) + self.positions(torch.arange(ids.shape[1])))
        for layer in self.layers:
            x = layer(x)
        return x


class Stage1(nn.Module):
    def __init__(self, model: Encoder) -> None:
        super().__init__()
        self.layers = nn.ModuleList(model.layers[LAYERS // 2 :])
        self.transform, self.head_norm, self.decoder = model.transform, model.head_norm, model.decoder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.decoder(self.head_norm(F.gelu(self.transform(x))))


def train(rank: int, micro_batches: int, steps: int, out_dir: str, init: str) -> None:
    from daydream.record import record

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = Encoder(1)
    stage = Stage0(model) if rank == 0 else Stage1(model)
    del model
    opt = torch.optim.Adam(stage.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)  # the same batches on both ranks: stage 1 reads the labels
    mb = BATCH // micro_batches
    with record(out_dir, warmup=2, steps=steps):
        for _ in range(steps + 4):
            ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen).chunk(micro_batches)
            labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen).chunk(micro_batches)
            if rank == 0:
                outputs = []
                for i in range(micro_batches):
                    y = stage(ids[i])
                    dist.send(y.detach(), dst=1)
                    outputs.append(y)
                for y in outputs:
                    grad = torch.empty_like(y)
                    dist.recv(grad, src=1)
                    y.backward(grad)
            else:
                inputs, losses = [], []
                for i in range(micro_batches):
                    x = torch.empty(mb, SEQ, HIDDEN)
                    dist.recv(x, src=0)
                    x.requires_grad_()
                    logits = stage(x)
                    losses.append(F.cross_entropy(logits.flatten(0, 1), labels[i].flatten()) / micro_batches)
                    inputs.append(x)
                for x, loss in zip(inputs, losses):
                    loss.backward()
                    dist.send(x.grad, dst=0)
            opt.step()
            opt.zero_grad(set_to_none=True)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--micro-batches", type=int, default=4, help=f"micro-batches per step (divides {BATCH})")
    p.add_argument("--steps", type=int, default=3, help="steps recorded (after 2 of warm-up)")
    p.add_argument("--out", required=True, help="rank 0's trace to write (DIR/rank0.json.gz): both ranks' go to DIR")
    args = p.parse_args()
    if args.micro_batches < 1 or BATCH % args.micro_batches:
        p.error(f"--micro-batches must divide the batch of {BATCH}")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        mp.spawn(train, args=(args.micro_batches, args.steps, str(Path(args.out).parent), init), nprocs=2, join=True)


if __name__ == "__main__":  # mp.spawn re-imports this file in each worker
    main()
