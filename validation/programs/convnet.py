"""A program recorded with torch.profiler alone, as a user of another project would record it: a small ConvNet (three
blocks of two 3x3 convolutions with BatchNorm and ReLU, max-pooling after each, a linear classifier; 32x32 images)
trained with SGD and momentum on the CPU. No daydream recorder: no sidecar, no module ranges.

    python validation/programs/convnet.py --out TRACE.json.gz [--batch 32] [--foreach | --fused] [--threads 2]
        [--accumulate 1] [--checkpoint]

``--checkpoint`` wraps each block in torch.utils.checkpoint (use_reentrant=False): three calls a step. One profiled
window: a step skipped, two of warm-up, three recorded (ProfilerStep#3..5).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.checkpoint import checkpoint


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))  # fmt: skip


class ConvNet(nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.checkpointed = checkpointed
        self.blocks = nn.ModuleList([block(3, 32), block(32, 64), block(64, 128)])
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(128 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = self.pool(checkpoint(b, x, use_reentrant=False) if self.checkpointed else b(x))
        return self.fc(x.flatten(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--foreach", action="store_true", help="SGD(foreach=True) (default: the for-loop)")
    p.add_argument("--fused", action="store_true", help="SGD(fused=True): torch's fused CPU kernel")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--checkpoint", action="store_true", help="checkpoint each block")
    p.add_argument("--out", required=True, help="the trace to write (.json or .json.gz)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ConvNet(args.checkpoint)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=args.foreach, fused=args.fused or None)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        for _ in range(args.accumulate):
            x = torch.randn(args.batch, 3, 32, 32)
            y = torch.randint(0, 10, (args.batch,))
            (loss_fn(model(x), y) / args.accumulate).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=1, warmup=2, active=3),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(args.out)) as prof:  # fmt: skip
        for _ in range(6):
            step()
            prof.step()


if __name__ == "__main__":
    main()
