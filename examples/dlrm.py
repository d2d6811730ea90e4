"""A mini-DLRM (Naumov et al., 2019) trained for click prediction on random dense features and embedding bags.

The model `DLRM`: `bottom`, an MLP (Linear + ReLU) from the dense features to the embedding dimension;
`embeddings.N`, one nn.EmbeddingBag(mode="sum") per table, fed offsets-based bags (1D indices + one offset per
sample); `interaction`, the pairwise dot products of the bottom output and the pooled embeddings (strictly lower
triangle) next to the bottom output; `top`, an MLP down to one logit; BCE-with-logits loss. Plain SGD (no
momentum, as DLRM) by default; --checkpoint checkpoints the bottom and the top MLP. Bags hold --pooling indices
on average (1 to 2 x pooling - 1; exactly --pooling with --cuda-graphs, which needs static shapes), rows uniform
or Zipf-like (--zipf). --tables-on-cpu keeps the tables (lookups and their backward) on the CPU and the rest on
the device: the pooled embeddings go to the device each step, their gradient comes back (hybrid CPU-GPU training).

    python examples/dlrm.py                                  # tiny: 8 tables of 10,000 rows
    python examples/dlrm.py --tables 26 --rows 1000000 --dim 128 --bottom 512,256 --top 1024,1024,512,256 \\
        --pooling 20 --zipf 1.05 --batch 2048 --sparse --log   # MLPerf-like sizes

With daydream: `daydream record --steps 3 -- python examples/dlrm.py --zipf 1.05`, then
`daydream run TRACE transforms/ddp.whatif -p ranks=8` (data parallel), or record once more with --tables-on-cpu
and compare the two traces' breakdowns.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    Bags,
    Binary,
    Normal,
    checkpointed,
    make_parser,
    parse_args,
    to_device,
    train,
    zipf_rows,
)  # noqa: E402


def mlp(sizes: list[int], last_relu: bool) -> nn.Sequential:
    """Linear layers between consecutive `sizes`, a ReLU after each (after the last one only with `last_relu`)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DotInteraction(nn.Module):
    """Pairwise dot products (strictly lower triangle) of the bottom output and the pooled embeddings."""

    def __init__(self, features: int) -> None:
        super().__init__()
        rows, cols = torch.tril_indices(features, features, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        features = torch.cat([dense.unsqueeze(1), pooled.to(dense.dtype)], dim=1)  # (batch, 1 + tables, dim)
        dots = torch.bmm(features, features.transpose(1, 2))
        return torch.cat([dense, dots[:, self.rows, self.cols]], dim=1)


class DLRM(nn.Module):
    def __init__(
        self,
        dense: int,
        tables: int,
        rows: int,
        dim: int,
        bottom: list[int],
        top: list[int],
        sparse: bool = False,
        tables_device: torch.device | None = None,
        checkpoint: bool = False,
    ) -> None:
        super().__init__()
        self.bottom = mlp([dense, *bottom, dim], last_relu=True)
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum", sparse=sparse, device=tables_device) for _ in range(tables)
        )
        for table in self.embeddings:
            nn.init.uniform_(table.weight, -(rows**-0.5), rows**-0.5)
        self.interaction = DotInteraction(tables + 1)
        self.top = mlp([dim + (tables + 1) * tables // 2, *top, 1], last_relu=False)
        self.checkpoint = checkpoint

    def forward(self, dense: torch.Tensor, bags: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        x = checkpointed(self.bottom, dense) if self.checkpoint else self.bottom(dense)
        pooled = torch.stack([table(indices, offsets) for table, (indices, offsets) in zip(self.embeddings, bags)], 1)
        z = self.interaction(x, pooled.to(x.device, non_blocking=True))  # a copy only with the tables on the CPU
        logits = checkpointed(self.top, z) if self.checkpoint else self.top(z)
        return logits.squeeze(1)


def sizes(text: str) -> list[int]:
    """A comma-separated list of layer widths ("512,256"; "" for none)."""
    values = [int(part) for part in text.split(",") if part.strip()]
    if any(v < 1 for v in values):
        raise ValueError(text)
    return values


def save_indices(path: str, bags: Bags, inputs: int, seed: int) -> None:
    """`inputs` samples' bags of every table, drawn as `Bags.make` draws them (bag sizes 1 .. 2 x pooling - 1, Zipf
    rows), as nn.EmbeddingBag's (indices, offsets) per table in an .npz: `N` the flat indices, `N.offsets` the starts.
    """
    import numpy as np

    gen = torch.Generator().manual_seed(seed)
    arrays = {}
    for t in range(bags.tables):
        if bags.fixed or bags.pooling == 1:
            lengths = torch.full((inputs,), bags.pooling, dtype=torch.int64)
        else:
            lengths = torch.randint(1, 2 * bags.pooling, (inputs,), generator=gen)
        starts = torch.cumsum(lengths, 0) - lengths
        arrays[str(t)] = zipf_rows(int(lengths.sum()), bags.rows, bags.zipf, gen).to(torch.int32).numpy()
        arrays[f"{t}.offsets"] = starts.numpy()
    np.savez(path, **arrays)


def main() -> None:
    parser = make_parser(__doc__, batch=128, optimizer="sgd")
    group = parser.add_argument_group("model")
    group.add_argument("--tables", type=int, default=8, help="embedding tables (default: %(default)s; Criteo 26)")
    group.add_argument("--rows", type=int, default=10_000, help="rows of every table (default: %(default)s)")
    group.add_argument("--dim", type=int, default=16, help="embedding dimension (default: %(default)s)")
    group.add_argument("--pooling", type=int, default=8, help="indices per bag, on average (default: %(default)s)")
    group.add_argument(
        "--zipf",
        type=float,
        default=0.0,
        metavar="A",
        help=(
            "row popularity P(row k) ~ (k + 1) ** -A, row 0 the hottest; 0: uniform "
            "(default: %(default)s; 1.05 is a skewed real-world-like choice)"
        ),
    )
    group.add_argument("--dense", type=int, default=13, help="dense features (default: %(default)s, as Criteo)")
    group.add_argument(
        "--bottom", type=sizes, default=[64, 32], help="hidden widths of the bottom MLP, before --dim (default: 64,32)"
    )
    group.add_argument(
        "--top", type=sizes, default=[64, 32], help="hidden widths of the top MLP, before 1 (default: 64,32)"
    )
    group.add_argument(
        "--tables-on-cpu",
        action="store_true",
        help="embedding tables on the CPU, the rest on the device (hybrid training)",
    )
    group.add_argument(
        "--sparse",
        action="store_true",
        help="sparse embedding gradients (EmbeddingBag(sparse=True)); needs --optimizer sgd",
    )
    group.add_argument(
        "--save-indices",
        metavar="FILE.npz",
        default=None,
        help=(
            "write the sparse features of --inputs inputs (the bags the training draws, same sizes and rows) as "
            "an .npz for `daydream embeddings profile` (table N: flat indices, N.offsets: each bag's start), and exit"
        ),
    )
    group.add_argument("--inputs", type=int, default=1_000_000, help="inputs for --save-indices (default: %(default)s)")
    args = parse_args(parser)
    if min(args.tables, args.rows, args.dim, args.pooling, args.dense) < 1:
        parser.error("--tables, --rows, --dim, --pooling and --dense must be at least 1")
    if args.zipf < 0:
        parser.error("--zipf must be >= 0")
    if args.sparse and args.optimizer != "sgd":
        parser.error(
            f"--sparse needs --optimizer sgd (torch.optim.Adam does not take sparse gradients; got {args.optimizer})"
        )
    if args.cuda_graphs and args.tables_on_cpu:
        parser.error("--cuda-graphs with --tables-on-cpu: CPU lookups cannot be captured in a CUDA graph")
    if args.cuda_graphs and args.sparse:
        parser.error("--cuda-graphs with --sparse: sparse gradients have data-dependent sizes and cannot be captured")

    if args.save_indices:
        if args.inputs < 1:
            parser.error("--inputs must be at least 1")
        save_indices(args.save_indices, Bags(args.tables, args.rows, args.pooling, args.zipf), args.inputs, args.seed)
        return
    torch.manual_seed(args.seed)
    tables_device = torch.device("cpu") if args.tables_on_cpu else args.device
    with args.device:
        model = DLRM(
            args.dense,
            args.tables,
            args.rows,
            args.dim,
            args.bottom,
            args.top,
            sparse=args.sparse,
            tables_device=tables_device,
            checkpoint=args.checkpoint,
        )

    def place(batch: tuple) -> tuple:
        (dense, bags), clicks = batch
        return (to_device(dense, args.device), to_device(bags, tables_device)), to_device(clicks, args.device)

    inputs = [Normal((args.dense,)), Bags(args.tables, args.rows, args.pooling, args.zipf, fixed=args.cuda_graphs)]
    train(args, model, inputs, Binary(), nn.BCEWithLogitsLoss(), place=place, momentum=0.0)


if __name__ == "__main__":
    main()
