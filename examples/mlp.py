"""A small MLP trained on random data: the bundled example trace is recorded from this script.

The model: `body`, `depth` x (Linear(width, width) + ReLU), then `head`, Linear(width, classes); cross-entropy
on random features and labels; Adam by default. --checkpoint checkpoints each Linear + ReLU pair of `body`.

    python examples/mlp.py                       # 20 steps, CUDA when present
    python examples/mlp.py --width 4096 --depth 8 --batch 512 --log

With daydream: `daydream record --steps 3 -- python examples/mlp.py`, then try the fused optimizer on the trace
(`daydream run TRACE transforms/fused_optimizer.whatif`): the default for-loop Adam launches a few kernels per
parameter.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Integers, Normal, checkpointed, make_parser, parse_args  # noqa: E402
from common import train as train_loop  # noqa: E402  (`train` below is this script's entry point)


class MLP(nn.Module):
    def __init__(self, width: int = 512, depth: int = 4, classes: int = 10, checkpoint: bool = False) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint:
            for i in range(0, len(self.body), 2):
                x = checkpointed(_layer, self.body[i], self.body[i + 1], x)
        else:
            x = self.body(x)
        return self.head(x)


def _layer(linear: nn.Module, act: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return act(linear(x))


def build_parser() -> argparse.ArgumentParser:
    parser = make_parser(__doc__, batch=64, optimizer="adam")
    group = parser.add_argument_group("model")
    group.add_argument("--width", type=int, default=512, help="features of every layer (default: %(default)s)")
    group.add_argument("--depth", type=int, default=4, help="Linear + ReLU layers in `body` (default: %(default)s)")
    group.add_argument("--classes", type=int, default=10, help="outputs of `head` (default: %(default)s)")
    return parser


def run(args: argparse.Namespace, on_step: Callable[[], None] | None = None) -> list[float]:
    torch.manual_seed(args.seed)
    with args.device:
        model = MLP(args.width, args.depth, args.classes, checkpoint=args.checkpoint)
    return train_loop(
        args, model, [Normal((args.width,))], Integers(args.classes), nn.CrossEntropyLoss(), on_step=on_step
    )


def train_mlp(argv: Sequence[str] = (), on_step: Callable[[], None] | None = None) -> list[float]:
    """Train with these command-line options (examples/record_bundled.py runs it under the profiler)."""
    parser = build_parser()
    args = parse_args(parser, list(argv))
    if min(args.width, args.depth, args.classes) < 1:
        parser.error("--width, --depth and --classes must be at least 1")
    return run(args, on_step)


def train(steps: int, batch: int = 64, width: int = 512, on_step: Callable[[], None] | None = None) -> None:
    """The entry point examples/record_bundled.py calls: `steps` steps of the default model."""
    train_mlp(["--steps", str(steps), "--batch", str(batch), "--width", str(width)], on_step)


def main() -> None:
    train_mlp(sys.argv[1:])


if __name__ == "__main__":
    main()
