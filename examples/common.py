"""What the example scripts share: the training options, random data, activation checkpointing and the training loop.

Each script (mlp.py, cnn.py, transformer.py, dlrm.py) builds its model and says what its data looks like; the
options below and the loop that trains on the data are implemented once here:

    --steps N            training steps (default 20)
    --batch B            samples per step
    --device D           auto (CUDA when present, the default), cpu or cuda
    --amp M              off, bf16 or fp16: torch.autocast on the device (fp16 with a GradScaler on CUDA)
    --optimizer O        sgd, adam (for-loop: torch.optim.Adam(foreach=False)), adam-foreach, adam-fused
    --compile            torch.compile the model (--compile-mode: torch.compile's mode, default "default")
    --checkpoint         activation checkpointing of the model's repeated blocks (torch.utils.checkpoint)
    --workers N          DataLoader worker processes
    --transform-us U     CPU time each sample's __getitem__ burns, in microseconds
    --accumulate K       gradient accumulation: K micro-batches of B samples per optimizer step
    --threads T          intra-op CPU threads (torch.set_num_threads)
    --cuda-graphs        capture the whole training step in one CUDA graph and replay it
    --seed S             seed of the model's initialization and of the data
    --log                print step times (and the last loss) at the end

With --workers 0 and --transform-us 0 (the default) one batch is made before training and reused at every step;
otherwise every step takes a fresh batch from a torch.utils.data.DataLoader over an in-memory random Dataset.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset

OPTIMIZERS = ("sgd", "adam", "adam-foreach", "adam-fused")
AMP_DTYPES: dict[str, torch.dtype | None] = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
WARMUP_LOG = 3  # steps left out of the --log statistics (allocator, autotuning, lazy initialization)
GRAPH_WARMUP = 3  # eager steps on a side stream before a CUDA graph capture (torch docs: whole network capture)

Batch = Any  # (inputs: tuple, target: Tensor); an input is a tensor or a list of (indices, offsets) pairs
Criterion = Callable[[Any, torch.Tensor], torch.Tensor]


# ----------------------------------------------------------------------------------------------------------------
# options


def make_parser(doc: str | None, *, batch: int, optimizer: str = "adam") -> argparse.ArgumentParser:
    """The parser with the shared options; the script adds its model's options and calls `parse_args`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group("training (examples/common.py)")
    group.add_argument("--steps", type=int, default=20, help="training steps (default: %(default)s)")
    group.add_argument("--batch", type=int, default=batch, help="samples per step (default: %(default)s)")
    group.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: cuda when available, else cpu (default: %(default)s)",
    )
    group.add_argument(
        "--amp",
        choices=tuple(AMP_DTYPES),
        default="off",
        help="mixed precision with torch.autocast; fp16 uses a GradScaler on CUDA (default: %(default)s)",
    )
    group.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default=optimizer,
        help=(
            "sgd (momentum 0.9, DLRM's: none); adam: torch.optim.Adam(foreach=False), one kernel per op and "
            "parameter; adam-foreach: foreach=True; adam-fused: fused=True (default: %(default)s)"
        ),
    )
    group.add_argument("--compile", action="store_true", help="torch.compile the model")
    group.add_argument(
        "--compile-mode",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        default="default",
        help="torch.compile's mode, with --compile (reduce-overhead: CUDA graphs of the compiled code; default: "
        "%(default)s)",
    )
    group.add_argument(
        "--checkpoint",
        action="store_true",
        help="activation checkpointing (torch.utils.checkpoint, use_reentrant=False) of the model's repeated blocks",
    )
    group.add_argument(
        "--workers",
        type=int,
        default=0,
        help=(
            "DataLoader worker processes (default: %(default)s; with --transform-us 0 too: one "
            "batch made once and reused, no DataLoader)"
        ),
    )
    group.add_argument(
        "--transform-us",
        type=float,
        default=0.0,
        metavar="U",
        help="microseconds of CPU work per sample in the Dataset's __getitem__ (default: %(default)s)",
    )
    group.add_argument(
        "--accumulate",
        type=int,
        default=1,
        metavar="K",
        help=(
            "gradient accumulation: K micro-batches of --batch samples, each a forward and backward pass, per "
            "optimizer step (default: %(default)s)"
        ),
    )
    group.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="T",
        help="intra-op CPU threads, torch.set_num_threads(T) (default: torch's, one per core)",
    )
    group.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="capture the whole training step in a CUDA graph and replay it (CUDA only)",
    )
    group.add_argument("--seed", type=int, default=0, help="seed of the weights and the data (default: %(default)s)")
    group.add_argument(
        "--log",
        action="store_true",
        help=f"print step times at the end (mean/min/max over the steps after the first {WARMUP_LOG})",
    )
    group.add_argument("--log-steps", action="store_true", help="with --log, also print every step's time")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the options; `args.device` becomes a torch.device. Bad combinations exit through parser.error."""
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    if args.workers < 0:
        parser.error("--workers must be >= 0")
    if args.transform_us < 0:
        parser.error("--transform-us must be >= 0")
    if args.accumulate < 1:
        parser.error("--accumulate must be at least 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        parser.error("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
    args.device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and cuda) else "cpu")
    if args.compile_mode != "default" and not args.compile:
        parser.error(f"--compile-mode {args.compile_mode} without --compile")
    if args.cuda_graphs:
        if args.accumulate > 1:
            parser.error("--cuda-graphs and --accumulate: the captured step is one forward and backward pass")
        if args.device.type != "cuda":
            parser.error("--cuda-graphs needs a CUDA device, and this run is on the CPU (--device cpu, or no GPU)")
        if args.compile:
            parser.error(
                "--cuda-graphs and --compile: choose one (torch.compile(mode='reduce-overhead') makes CUDA graphs"
                " itself)"
            )
        if args.amp == "fp16":
            parser.error(
                "--cuda-graphs with --amp fp16: the GradScaler's inf check syncs with the host and cannot be "
                "captured; use --amp bf16"
            )
    if args.optimizer == "adam-fused":
        probe = torch.zeros(1, device=args.device, requires_grad=True)
        try:
            torch.optim.Adam([probe], fused=True)
        except RuntimeError as err:
            parser.error(
                f"--optimizer adam-fused: torch {torch.__version__} has no fused Adam on {args.device.type} ({err})"
            )
    return args


def make_optimizer(args: argparse.Namespace, params: Any, momentum: float = 0.9) -> torch.optim.Optimizer:
    """The --optimizer (`momentum` for SGD); Adam capturable (step counts on the device) under --cuda-graphs."""
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=momentum)
    extra = {"capturable": True} if args.cuda_graphs else {}
    if args.optimizer == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=False, **extra)
    if args.optimizer == "adam-foreach":
        return torch.optim.Adam(params, lr=1e-3, foreach=True, **extra)
    return torch.optim.Adam(params, lr=1e-3, fused=True, **extra)


def checkpointed(function: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor:
    """Run `function(*args)` under activation checkpointing: its activations are recomputed in the backward pass.

    use_reentrant=False as the torch docs recommend. The models have no dropout, so there is no RNG state to
    replay (preserve_rng_state=False, which also keeps the step capturable in a CUDA graph).
    """
    return checkpoint(function, *args, use_reentrant=False, preserve_rng_state=False)


# ----------------------------------------------------------------------------------------------------------------
# random data: a Dataset of samples described by fields


@dataclass(frozen=True)
class Normal:
    """Floats from N(0, 1) of one sample's `shape` (features, an image)."""

    shape: tuple[int, ...]

    def make(self, gen: torch.Generator) -> torch.Tensor:
        return torch.randn(self.shape, generator=gen)


@dataclass(frozen=True)
class Integers:
    """Integers in [0, high) of one sample's `shape` (token ids; a class label with shape ())."""

    high: int
    shape: tuple[int, ...] = ()

    def make(self, gen: torch.Generator) -> torch.Tensor:
        return torch.randint(0, self.high, self.shape, generator=gen)


@dataclass(frozen=True)
class Masked:
    """Masked-LM labels: a token id in [0, high) at a `fraction` of the positions, -100 (ignored) elsewhere."""

    high: int
    shape: tuple[int, ...]
    fraction: float = 0.15

    def make(self, gen: torch.Generator) -> torch.Tensor:
        labels = torch.randint(0, self.high, self.shape, generator=gen)
        return labels.masked_fill_(torch.rand(self.shape, generator=gen) >= self.fraction, -100)


@dataclass(frozen=True)
class Binary:
    """A 0./1. float label (click or not) for a BCE loss."""

    def make(self, gen: torch.Generator) -> torch.Tensor:
        return torch.randint(0, 2, (), generator=gen).float()


@dataclass(frozen=True)
class Bags:
    """One bag of embedding-row indices per table: `pooling` indices on average (1 .. 2 x pooling - 1, uniform),
    exactly `pooling` with `fixed` (static shapes). Rows uniform over [0, rows) with zipf 0, else Zipf-like:
    P(row k) ~ (k + 1) ** -zipf, row 0 the hottest. A batch collates into one (indices, offsets) pair per table."""

    tables: int
    rows: int
    pooling: int
    zipf: float = 0.0
    fixed: bool = False

    def make(self, gen: torch.Generator) -> list[torch.Tensor]:
        if self.fixed or self.pooling == 1:
            lengths = [self.pooling] * self.tables
        else:
            lengths = torch.randint(1, 2 * self.pooling, (self.tables,), generator=gen).tolist()
        return [zipf_rows(n, self.rows, self.zipf, gen) for n in lengths]


def zipf_rows(n: int, rows: int, a: float, gen: torch.Generator) -> torch.Tensor:
    """`n` row indices in [0, rows): uniform for a = 0, else P(k) ~ (k + 1) ** -a (inverse CDF of the continuous
    power law on [1, rows + 1), floored)."""
    if a == 0:
        return torch.randint(0, rows, (n,), generator=gen)
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    if abs(a - 1.0) < 1e-9:
        return (torch.exp(u * math.log(rows + 1)).floor().long() - 1).clamp_(0, rows - 1)  # a = 1: log-uniform
    x = (u * ((rows + 1) ** (1 - a) - 1) + 1) ** (1 / (1 - a))  # x ** (1 - a) uniform from 1 to (rows + 1) ** (1 - a)
    return (x.floor().long() - 1).clamp_(0, rows - 1)


Field = Normal | Integers | Masked | Binary | Bags


def burn(iterations: int) -> int:
    """Deterministic CPU work standing for a sample's decoding and augmentation: a linear congruential generator."""
    x = 1
    for _ in range(iterations):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def burn_rate() -> float:
    """Iterations of `burn` per microsecond on this machine (best of a few short runs)."""
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        burn(20_000)
        best = min(best, time.perf_counter() - start)
    return 20_000 / (best * 1e6)


class RandomDataset(Dataset):
    """`length` random samples: (inputs, target), each made from its field and the sample's index (deterministic,
    the same in any worker), after burning `transform_us` microseconds of CPU (calibrated when created)."""

    def __init__(
        self, inputs: Sequence[Field], target: Field, length: int, transform_us: float = 0.0, seed: int = 0
    ) -> None:
        self.inputs = tuple(inputs)
        self.target = target
        self.length = length
        self.seed = seed
        self.burn_iterations = round(transform_us * burn_rate()) if transform_us > 0 else 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[tuple[Any, ...], torch.Tensor]:
        if self.burn_iterations:
            burn(self.burn_iterations)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return tuple(field.make(gen) for field in self.inputs), self.target.make(gen)


def collate(samples: list[tuple[tuple[Any, ...], torch.Tensor]]) -> Batch:
    """Stack the samples' tensors; bags become EmbeddingBag inputs, one (indices, offsets) pair per table."""
    columns = list(zip(*(inputs for inputs, _ in samples)))
    inputs = tuple(_collate_column(list(column)) for column in columns)
    return inputs, torch.stack([target for _, target in samples])


def _collate_column(column: list[Any]) -> Any:
    if not isinstance(column[0], list):
        return torch.stack(column)
    pairs = []
    for bags in zip(*column):  # one table: the samples' bags
        lengths = torch.tensor([len(bag) for bag in bags])
        pairs.append((torch.cat(bags), torch.cumsum(lengths, 0) - lengths))
    return pairs


def to_device(batch: Any, device: torch.device) -> Any:
    """The batch's tensors moved to `device` (asynchronous from pinned memory)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(item, device) for item in batch)
    return batch


def copy_into(static: Any, batch: Any) -> None:
    """Copy a batch into the CUDA graph's static input tensors."""
    if isinstance(static, torch.Tensor):
        static.copy_(batch, non_blocking=True)
    else:
        for dst, src in zip(static, batch, strict=True):
            copy_into(dst, src)


def batches(
    args: argparse.Namespace, dataset: RandomDataset, count: int, place: Callable[[Batch], Batch]
) -> Iterator[Batch]:
    """`count` batches, placed: from a DataLoader (--workers / --transform-us), else one batch made once and reused."""
    if args.workers == 0 and args.transform_us == 0:
        batch = place(collate([dataset[i] for i in range(args.batch)]))
        for _ in range(count):
            yield batch
        return
    loader = DataLoader(
        dataset,
        batch_size=args.batch,
        num_workers=args.workers,
        collate_fn=collate,
        drop_last=True,
        pin_memory=args.device.type == "cuda",
    )
    for batch in loader:
        yield place(batch)


# ----------------------------------------------------------------------------------------------------------------
# the training loop


def train(
    args: argparse.Namespace,
    model: nn.Module,
    inputs: Sequence[Field],
    target: Field,
    criterion: Criterion,
    *,
    place: Callable[[Batch], Batch] | None = None,
    on_step: Callable[[], None] | None = None,
    momentum: float = 0.9,
) -> list[float]:
    """Train `model` (already on its device) for args.steps steps on random batches of `inputs` and `target`.

    A step: opt.zero_grad(set_to_none=True); loss = criterion(model(*inputs), target); loss.backward(); opt.step(),
    under torch.autocast with --amp (and a GradScaler for fp16 on CUDA), or one replay of the captured step with
    --cuda-graphs. `place` puts a batch on the device (default: every tensor on args.device). `on_step` runs after
    each step (a profiler's step()). `momentum`: SGD's. Returns the steps' wall-clock times in seconds (measured
    with --log only: the GPU is synchronized after each step then).
    """
    place = place or (lambda batch: to_device(batch, args.device))
    extra = 1 if args.cuda_graphs else 0  # the batch the graph is captured on
    count = args.steps * args.accumulate + extra
    dataset = RandomDataset(inputs, target, count * args.batch, args.transform_us, args.seed)
    # Under --cuda-graphs the batches stay on the host and are copied into the graph's static inputs.
    data = batches(args, dataset, count, (lambda batch: batch) if args.cuda_graphs else place)
    opt = make_optimizer(args, model.parameters(), momentum)
    # compiled at its first call (a warm-up step under `daydream record`), and again where a later call differs
    step_model: Callable[..., Any] = torch.compile(model, mode=args.compile_mode) if args.compile else model
    cuda = args.device.type == "cuda"
    dtype = AMP_DTYPES[args.amp]
    # Autocast's weight cast cache would hold tensors made outside the graph's memory pool: off when capturing.
    autocast = torch.autocast(
        args.device.type, dtype=dtype, enabled=dtype is not None, cache_enabled=not args.cuda_graphs
    )
    scaler = torch.amp.GradScaler("cuda") if args.amp == "fp16" and cuda else None
    model.train()

    def compute_loss(batch: Batch) -> torch.Tensor:
        batch_inputs, batch_target = batch
        with autocast:
            return criterion(step_model(*batch_inputs), batch_target)

    graph = None
    if args.cuda_graphs:  # whole network capture (torch docs, "CUDA Graphs"): warm up on a side stream, capture
        first = next(data)
        static = place(first)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP):
                opt.zero_grad(set_to_none=True)
                loss = compute_loss(static)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # the captured backward allocates the gradients in the graph's pool
        with torch.cuda.graph(graph):
            static_loss = compute_loss(static)
            static_loss.backward()
            opt.step()

    times: list[float] = []
    loss = None
    for _ in range(args.steps):
        start = time.perf_counter()
        batch = next(data)
        if graph is not None:
            if batch is not first:  # a fresh batch from the DataLoader (else the batch made once, already there)
                copy_into(static, batch)
            graph.replay()
            loss = static_loss
            # A replay runs the captured optimizer step without calling opt.step(): under `daydream record`, say
            # where the step ends (the recorder counts optimizer steps otherwise).
            recorder = sys.modules.get("daydream.record")
            if recorder is not None:
                recorder.step()
        else:
            opt.zero_grad(set_to_none=True)
            for micro in range(args.accumulate):  # gradients add up over the micro-batches
                if micro:
                    batch = next(data)
                loss = compute_loss(batch)
                if args.accumulate > 1:
                    loss = loss / args.accumulate
                (loss if scaler is None else scaler.scale(loss)).backward()
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()
        if on_step is not None:
            on_step()
        if args.log:
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    if cuda:
        torch.cuda.synchronize()
    if args.log:
        report(args, model, times, loss)
    return times


def report(args: argparse.Namespace, model: nn.Module, times: list[float], loss: torch.Tensor | None) -> None:
    """Print the step-time statistics of --log."""
    if args.log_steps:
        for i, t in enumerate(times, 1):
            print(f"step {i}: {t * 1e3:.3f} ms")
    kept = times[WARMUP_LOG:] if len(times) > WARMUP_LOG else times
    first = len(times) - len(kept) + 1
    ms = [t * 1e3 for t in kept]
    params = sum(p.numel() for p in model.parameters())
    print(
        f"{type(model).__name__}: {params / 1e6:.2f} M parameters, batch {args.batch}, {args.device.type}, "
        f"amp {args.amp}, {args.optimizer}"
        + (f", compiled ({args.compile_mode})" if args.compile else "")
        + (", checkpointed" if args.checkpoint else "")
        + (", CUDA graph" if args.cuda_graphs else "")
    )
    print(
        f"step time over steps {first}-{len(times)}: mean {sum(ms) / len(ms):.3f} ms, min {min(ms):.3f} ms, "
        f"max {max(ms):.3f} ms ({args.batch / (sum(kept) / len(kept)):.1f} samples/s)"
    )
    if loss is not None:
        print(f"last loss {loss.item():.4f}")
