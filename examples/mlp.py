"""A small MLP trained on random data: the bundled example trace is recorded from this script.

Run it plainly (``python examples/mlp.py --steps 20``) or under a profiler. CUDA is used when present.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width: int = 512, depth: int = 4, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def train(steps: int, batch: int = 64, width: int = 512, on_step=None) -> None:  # type: ignore[no-untyped-def]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = MLP(width).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.randn(batch, width, device=device)
    target = torch.randint(0, 10, (batch,), device=device)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(data), target)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    train(args.steps, args.batch)
