"""A BERT-like Transformer encoder trained on random token ids: masked-LM (default) or sequence classification.

The model `Encoder`: `embed` (`tokens`, `positions`, `norm`); `layers.N` (post-norm BERT layers: `attn` with one
fused `qkv` Linear, F.scaled_dot_product_attention and the output projection `out`, then `norm1`; `mlp` with
`fc1`, GELU `act`, `fc2` (4 x hidden), then `norm2`); `head`: for mlm `transform` Linear + GELU + `norm`, then
`decoder` over the vocabulary (its weight tied to the token embedding), cross-entropy on 15% of the positions;
for cls a `pooler` Linear + tanh on the first token and a `classifier`. Adam by default; --checkpoint checkpoints
every encoder layer.

    python examples/transformer.py                                             # tiny: 2 layers, hidden 128
    python examples/transformer.py --layers 12 --hidden 768 --heads 12 --seq 512 --vocab 30522 --batch 32 --log

With daydream: `daydream record --steps 3 -- python examples/transformer.py`, then
`daydream run TRACE transforms/amp.whatif` (mixed precision), `transforms/kernel_fusion.whatif` or
`transforms/activation_checkpointing.whatif -p 'layers="layers"'`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Integers, Masked, checkpointed, make_parser, parse_args, train  # noqa: E402


class Embeddings(nn.Module):
    def __init__(self, vocab: int, seq: int, hidden: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.tokens(ids) + self.positions(positions))


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)  # (batch, heads, seq, head_dim)
        return self.out(y.transpose(1, 2).reshape(batch, seq, hidden))


class FeedForward(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, inner)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden)
        self.mlp = FeedForward(hidden, 4 * hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


class MaskedLMHead(nn.Module):
    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.transform = nn.Linear(hidden, hidden)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(hidden)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act(self.transform(x))))  # (batch, seq, vocab)


class ClassificationHead(nn.Module):
    def __init__(self, hidden: int, classes: int) -> None:
        super().__init__()
        self.pooler = nn.Linear(hidden, hidden)
        self.act = nn.Tanh()
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.act(self.pooler(x[:, 0])))  # (batch, classes)


class Encoder(nn.Module):
    def __init__(
        self,
        vocab: int,
        seq: int,
        hidden: int,
        heads: int,
        layers: int,
        head: str = "mlm",
        classes: int = 2,
        checkpoint: bool = False,
    ) -> None:
        super().__init__()
        self.embed = Embeddings(vocab, seq, hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads) for _ in range(layers))
        self.head: nn.Module
        if head == "mlm":
            self.head = MaskedLMHead(hidden, vocab)
            self.head.decoder.weight = self.embed.tokens.weight  # tied, as in BERT
        else:
            self.head = ClassificationHead(hidden, classes)
        self.checkpoint = checkpoint

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = checkpointed(layer, x) if self.checkpoint else layer(x)
        return self.head(x)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled positions (the others are -100)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def main() -> None:
    parser = make_parser(__doc__, batch=8, optimizer="adam")
    group = parser.add_argument_group("model")
    group.add_argument("--layers", type=int, default=2, help="encoder layers (default: %(default)s; BERT-base 12)")
    group.add_argument("--hidden", type=int, default=128, help="hidden size (default: %(default)s; BERT-base 768)")
    group.add_argument("--heads", type=int, default=4, help="attention heads (default: %(default)s; BERT-base 12)")
    group.add_argument("--seq", type=int, default=64, help="sequence length (default: %(default)s; BERT 128 or 512)")
    group.add_argument("--vocab", type=int, default=1000, help="vocabulary size (default: %(default)s; BERT 30522)")
    group.add_argument(
        "--head",
        choices=("mlm", "cls"),
        default="mlm",
        help="mlm: masked-LM over the vocabulary; cls: sequence classification (default: %(default)s)",
    )
    group.add_argument("--classes", type=int, default=2, help="classes of the cls head (default: %(default)s)")
    args = parse_args(parser)
    if min(args.layers, args.hidden, args.heads, args.seq, args.vocab, args.classes) < 1:
        parser.error("--layers, --hidden, --heads, --seq, --vocab and --classes must be at least 1")
    if args.hidden % args.heads:
        parser.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads})")

    torch.manual_seed(args.seed)
    with args.device:
        model = Encoder(
            args.vocab,
            args.seq,
            args.hidden,
            args.heads,
            args.layers,
            args.head,
            args.classes,
            checkpoint=args.checkpoint,
        )
    tokens = Integers(args.vocab, (args.seq,))
    if args.head == "mlm":
        train(args, model, [tokens], Masked(args.vocab, (args.seq,)), masked_lm_loss)
    else:
        train(args, model, [tokens], Integers(args.classes), nn.CrossEntropyLoss())


if __name__ == "__main__":
    main()
