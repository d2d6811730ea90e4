"""A program recorded with torch.profiler alone, as a user of another project would record it: an LSTM language model
(embedding 2000 x 128, two LSTM layers of 256, LayerNorm, a linear head over the vocabulary; 48 tokens) trained with
AdamW on the CPU. No daydream recorder: no sidecar (the thread count is not recorded), no module ranges.

    python validation/programs/lstm.py --out TRACE.json.gz [--batch 32] [--foreach | --fused] [--threads 2] [--accumulate 1]

One profiled window: a step skipped, two of warm-up, three recorded (ProfilerStep#3..5).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

VOCAB, EMBED, HIDDEN, TOKENS = 2000, 128, 256, 48


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.rnn = nn.LSTM(EMBED, HIDDEN, num_layers=2, batch_first=True)
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        return self.head(self.norm(h))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--foreach", action="store_true", help="AdamW(foreach=True) (default: the for-loop)")
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True): torch's fused CPU kernel")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--out", required=True, help="the trace to write (.json or .json.gz)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = LanguageModel()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=args.foreach, fused=args.fused or None)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        for _ in range(args.accumulate):
            x = torch.randint(0, VOCAB, (args.batch, TOKENS))
            y = torch.randint(0, VOCAB, (args.batch, TOKENS))
            loss = loss_fn(model(x).reshape(-1, VOCAB), y.reshape(-1)) / args.accumulate
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=1, warmup=2, active=3),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(args.out)) as prof:  # fmt: skip
        for _ in range(6):
            step()
            prof.step()


if __name__ == "__main__":
    main()
