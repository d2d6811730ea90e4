"""Kernel microbenchmarks (``daydream calibrate``): measure GEMM and element-wise tables with torch on this machine.

Following Lin et al. (HiPC 2022): each shape gets warm-up runs (5) and timed runs (30), and the table stores the
**median**. The median, not the mean, because the timing noise is one-sided and bursty: a run hit by a context switch,
a page fault or another process on the machine takes 2-10x longer, never shorter, and a single such run moves the mean
by more than the whole effect we model, while the median ignores it as long as fewer than half the runs are hit.

Robustness on a shared machine: the timed runs of a shape are split into ``passes`` blocks, and each pass visits all
shapes in a fresh random order, so a disturbance lasting a few seconds lands on one block of many shapes instead of
on all the runs of one shape. Shapes whose pass medians still disagree by more than ``RETRY_SPREAD`` get up to
``MAX_RETRIES`` extra passes. Outputs (``out=``) are preallocated: on CPU an allocating op would also time malloc and
page faults of fresh pages, which a GPU kernel's duration never contains.

Shapes are sampled log-uniformly (seeded, so two runs with one seed measure the same shapes, which is how the noise
floor is measured: :func:`table_noise`) inside per-device ranges capped so that one run stays well under 50 ms.
Each table is ``<kernel>.csv`` plus a sidecar ``<kernel>.meta.json`` (device name, torch version, threads, date,
settings); both are written atomically (a temp file in the same directory, then ``os.replace``).
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from daydream._gc import paused_gc
from daydream.errors import DaydreamError
from daydream.files import write_atomically
from daydream.perf.kernels.costs import elementwise_cost, gemm_cost
from daydream.perf.trust.accuracy import Accuracy, gmae
from daydream.stats import quantile
from daydream.trace.sizes import dtype_bytes

KERNELS = ("gemm", "elementwise")
ELEMENTWISE_OPS = ("add", "mul", "relu", "gelu", "sigmoid", "tanh")
DTYPE_BYTES = {d: dtype_bytes(d) for d in ("float64", "float32", "float16", "bfloat16")}  # the dtypes it measures
# CPU: half precision matmul on CPUs without AVX512-BF16/AMX runs ~60x slower than fp32 through a fallback path
# (measured
# 1.3 GFLOP/s vs 81 on the EPYC this was written on), which is no kernel anyone trains with; fp64 is a real CPU dtype.
DEFAULT_DTYPES = {"cpu": ("float32", "float64"), "cuda": ("float32", "float16", "bfloat16")}
# FLOP per element as counted by the authors of Lin et al. (HiPC 2022) (owensgroup/ml_perf_model, see
# perf-models-lin.md); add/mul
# read two inputs, the rest one, and all write one output.
ELEMENTWISE_FLOPS = {"add": 1, "mul": 1, "relu": 1, "gelu": 175, "sigmoid": 4, "tanh": 180}
ELEMENTWISE_INPUTS = {"add": 2, "mul": 2, "relu": 1, "gelu": 1, "sigmoid": 1, "tanh": 1}

RETRY_SPREAD = 0.10  # relative disagreement between pass medians that triggers another pass
MAX_RETRIES = 2
CUDA_SLEEP_CYCLES_PER_RUN = 100_000  # ~50-70 us of GPU clock per queued run: more than one launch costs the host

Progress = Callable[[str, int, int], None]  # (kernel, shape-passes done, shape-passes planned: shapes x passes)


@dataclass(frozen=True)
class ShapeRanges:
    """Where shapes are sampled for one device: log-uniform in each range, rejected above the caps."""

    gemm_batch: tuple[int, int]
    gemm_dim: tuple[int, int]
    gemm_max_flops: float  # keeps one run << 50 ms
    gemm_max_bytes: float
    bmm_fraction: float  # share of GEMM shapes with batch > 1 (torch.bmm); the rest are torch.mm with batch 1
    numel: tuple[int, int]


RANGES = {
    # CPU, one thread: ~80 GFLOP/s fp32, ~10 GB/s -> 4e8 FLOP is ~5 ms fp32 (~10 ms fp64), 2^23 elements fp64 add ~15
    # ms.
    "cpu": ShapeRanges((2, 64), (4, 4096), 4e8, 6.4e7, 0.3, (16, 2**23)),
    # One data-centre GPU: 2e11 FLOP is ~4 ms at fp32 without TF32 (~50 TFLOP/s) and far less on tensor cores.
    "cuda": ShapeRanges((2, 256), (16, 16384), 2e11, 2e9, 0.3, (256, 2**28)),
}


@dataclass(frozen=True)
class BenchSettings:
    """How much to measure: ``FULL`` builds the bundled tables, ``QUICK`` checks the harness in seconds."""

    n_shapes: int
    repeats: int
    warmup: int
    passes: int

    def as_kwargs(self) -> dict[str, int]:
        return asdict(self)


# 1000 shapes per table: on the CPU GEMM table the MLP's held-out error kept falling with more shapes (measured with a
# 3-network average: 9.6% at 240 training shapes, 8.0% at 480, 6.8% at 960), and 1000 shapes still measure in ~2 min.
FULL = BenchSettings(n_shapes=1000, repeats=30, warmup=5, passes=3)
QUICK = BenchSettings(n_shapes=8, repeats=3, warmup=1, passes=1)


@dataclass(frozen=True)
class Shape:
    """One row to measure: ``params`` are the table's feature columns (op, sizes, dtype)."""

    kernel: str
    params: dict[str, Any]


@dataclass
class Measurement:
    shape: Shape
    times_us: list[float] = field(default_factory=list)
    pass_medians: list[float] = field(default_factory=list)


# ---- shape sampling and costs (no torch needed) ----


def _log_uniform_int(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def gemm_costs(batch: int, m: int, n: int, k: int, dtype: str) -> tuple[float, float]:
    """FLOPs (a multiply-add is 2) and bytes moved at least once (A, B read, C written) of a [batched] GEMM."""
    cost = gemm_cost(m, n, k, dtype, batch=batch)
    return cost.flops, cost.bytes


def elementwise_costs(op: str, numel: int, dtype: str) -> tuple[float, float]:
    """FLOPs and bytes of an element-wise op: each input read once, the output written once."""
    cost = elementwise_cost(numel, dtype, ELEMENTWISE_FLOPS[op], reads=ELEMENTWISE_INPUTS[op], writes=1)
    return cost.flops, cost.bytes


def sample_shapes(
    kernel: str, n: int, device: str = "cpu", dtypes: Sequence[str] | None = None, seed: int = 0
) -> list[Shape]:
    """``n`` distinct shapes for ``kernel`` on ``device``, log-uniform over the device's ranges; same seed, same
    shapes."""
    if kernel not in KERNELS:
        raise DaydreamError(f"unknown kernel table {kernel!r}; known: {', '.join(KERNELS)}")
    ranges = RANGES[_device_kind(device)]
    dtypes = tuple(dtypes or DEFAULT_DTYPES[_device_kind(device)])
    for d in dtypes:
        if d not in DTYPE_BYTES:
            raise DaydreamError(f"unknown dtype {d!r}; known: {', '.join(DTYPE_BYTES)}")
    rng = random.Random(f"{kernel}-{seed}")
    shapes: list[Shape] = []
    seen: set[tuple[Any, ...]] = set()
    attempts = 0
    while len(shapes) < n:
        attempts += 1
        if attempts > 1000 * n + 1000:
            raise DaydreamError(f"could not sample {n} distinct {kernel} shapes in the {device} ranges")
        dtype = rng.choice(dtypes)
        if kernel == "gemm":
            batch = _log_uniform_int(rng, *ranges.gemm_batch) if rng.random() < ranges.bmm_fraction else 1
            m, nn, k = (_log_uniform_int(rng, *ranges.gemm_dim) for _ in range(3))
            flops, nbytes = gemm_costs(batch, m, nn, k, dtype)
            # Scale flops by the dtype's width so fp64 (half the fp32 rate) stays inside the same time budget.
            if flops * DTYPE_BYTES[dtype] / 4 > ranges.gemm_max_flops or nbytes > ranges.gemm_max_bytes:
                continue
            params: dict[str, Any] = {
                "op": "bmm" if batch > 1 else "mm",
                "batch": batch,
                "m": m,
                "n": nn,
                "k": k,
                "dtype": dtype,
            }
        else:
            op = rng.choice(ELEMENTWISE_OPS)
            numel = _log_uniform_int(rng, *ranges.numel)
            flops, nbytes = elementwise_costs(op, numel, dtype)
            params = {"op": op, "numel": numel, "dtype": dtype}
        key = tuple(params.values())
        if key in seen:
            continue
        seen.add(key)
        params.update(flops=flops, bytes=nbytes)
        shapes.append(Shape(kernel, params))
    return shapes


# ---- measuring (torch, imported lazily) ----


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise DaydreamError("daydream calibrate needs torch: pip install 'daydream-whatif[calibrate]'") from None
    return torch


def _device_kind(device: str) -> str:
    kind = device.split(":")[0]
    if kind not in RANGES:
        raise DaydreamError(f"unknown device {device!r}: use cpu or cuda")
    return kind


def _make_runner(torch: Any, shape: Shape, device: str, generator: Any) -> Callable[[], Any]:
    """Allocate the shape's inputs and output once; return a zero-argument call that runs the op into the output."""
    p = shape.params
    dtype = getattr(torch, p["dtype"])

    def rand(*size: int) -> Any:
        return torch.randn(*size, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)

    if shape.kernel == "gemm":
        if p["batch"] == 1:
            a, b, out = rand(p["m"], p["k"]), rand(p["k"], p["n"]), rand(p["m"], p["n"])
            return lambda: torch.mm(a, b, out=out)
        a, b, out = rand(p["batch"], p["m"], p["k"]), rand(p["batch"], p["k"], p["n"]), rand(p["batch"], p["m"], p["n"])
        return lambda: torch.bmm(a, b, out=out)
    x, out = rand(p["numel"]), rand(p["numel"])
    op = p["op"]
    if op in ("add", "mul"):
        y = rand(p["numel"])
        fn = torch.add if op == "add" else torch.mul
        return lambda: fn(x, y, out=out)
    unary = {
        "relu": torch.ops.aten.relu.out,
        "gelu": torch.ops.aten.gelu.out,
        "sigmoid": torch.ops.aten.sigmoid.out,
        "tanh": torch.ops.aten.tanh.out,
    }[op]
    return lambda: unary(x, out=out)


def _time_runs(torch: Any, run: Callable[[], Any], device: str, warmup: int, runs: int) -> list[float]:
    """Per-run durations in microseconds: CUDA events on a GPU (host clocks would time the launch, not the kernel),
    ``perf_counter_ns`` around the call on a CPU."""
    for _ in range(warmup):
        run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
        # Keep the GPU busy while the host enqueues the runs: otherwise a kernel shorter than its launch (~5 us) would
        # be timed with the idle wait for the next launch inside its start/end events.
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(CUDA_SLEEP_CYCLES_PER_RUN * runs)
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1000.0 for start, end in events]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        run()
        times.append((time.perf_counter_ns() - t0) / 1000.0)
    return times


def _measure_pass(
    torch: Any,
    items: list[Measurement],
    order: list[int],
    device: str,
    warmup: int,
    runs: int,
    seed: int,
    on_done: Callable[[], None],
) -> None:
    for i in order:
        m = items[i]
        generator = torch.Generator().manual_seed(seed + i)
        run = _make_runner(torch, m.shape, device, generator)
        times = _time_runs(torch, run, device, warmup, runs)
        m.times_us.extend(times)
        m.pass_medians.append(statistics.median(times))
        del run
        on_done()


def measure(
    shapes: Sequence[Shape],
    device: str = "cpu",
    repeats: int = 30,
    warmup: int = 5,
    passes: int = 3,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[Measurement]:
    """Time every shape: ``repeats`` runs split over ``passes`` shuffled passes, then extra passes for unstable
    shapes."""
    torch = _torch()
    if repeats < 1 or warmup < 0 or passes < 1:
        raise DaydreamError("repeats and passes must be at least 1, warmup at least 0")
    passes = min(passes, repeats)
    items = [Measurement(s) for s in shapes]
    rng = random.Random(seed)
    kernel = shapes[0].kernel if shapes else ""
    done = 0

    planned = len(items) * passes  # retries come on top, unannounced: they are few and short

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(kernel, done, planned)

    per_pass = [repeats // passes + (1 if p < repeats % passes else 0) for p in range(passes)]
    with paused_gc(), torch.no_grad():
        for runs in per_pass:
            order = list(range(len(items)))
            rng.shuffle(order)
            _measure_pass(torch, items, order, device, warmup, runs, seed, tick)
        for _ in range(MAX_RETRIES if passes > 1 else 0):
            unstable = [i for i, m in enumerate(items) if _spread(m.pass_medians) > RETRY_SPREAD]
            if not unstable:
                break
            rng.shuffle(unstable)
            _measure_pass(torch, items, unstable, device, warmup, per_pass[0], seed, lambda: None)
    return items


def _spread(values: Sequence[float]) -> float:
    return max(values) / min(values) - 1.0 if values and min(values) > 0 else 0.0


def measurement_row(m: Measurement) -> dict[str, Any]:
    """The CSV row of one measured shape: its parameters, then median (the model target), quartiles, minimum, run
    count."""
    times = sorted(m.times_us)
    return {
        **m.shape.params,
        "median_us": round(statistics.median(times), 4),
        "p25_us": round(quantile(times, 0.25), 4),
        "p75_us": round(quantile(times, 0.75), 4),
        "min_us": round(times[0], 4),
        "runs": len(times),
    }


# ---- tables on disk ----


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) atomically, creating the folder (see ``write_atomically``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data.encode("utf-8") if isinstance(data, str) else data)


def rows_to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a measured table, numbers as numbers (ints stay ints)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8", newline="") as f:
            raw = list(csv.DictReader(f))
    except OSError as e:
        raise DaydreamError(f"cannot read kernel table {path}: {e.strerror or e}") from None
    if not raw:
        raise DaydreamError(f"kernel table {path} has no rows")
    return [{k: _number(v) for k, v in r.items()} for r in raw]


def _number(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def device_name(device: str) -> str:
    """What the table was measured on, in words: the GPU's name, or the CPU model from /proc/cpuinfo."""
    if device.startswith("cuda"):
        torch = _torch()
        return str(torch.cuda.get_device_name(torch.device(device)))
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def table_metadata(
    kernel: str, device: str, threads: int, settings: BenchSettings, seed: int, n_rows: int
) -> dict[str, Any]:
    torch = _torch()
    return {
        "kernel": kernel,
        "device": device,
        "device_name": device_name(device),
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "threads": threads,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "statistic": "median",
        "timer": "torch.cuda.Event" if device.startswith("cuda") else "time.perf_counter_ns",
        "seed": seed,
        "rows": n_rows,
        **settings.as_kwargs(),
    }


def run_microbenchmarks(
    out_dir: str | Path,
    kernels: Iterable[str] = KERNELS,
    device: str = "cpu",
    settings: BenchSettings = FULL,
    seed: int = 0,
    progress: Progress | None = None,
    threads: int | None = None,
    dtypes: Sequence[str] | None = None,
) -> list[Path]:
    """Measure each kernel table on ``device`` and write ``out_dir/<kernel>.csv`` (+ ``.meta.json``); returns the CSVs.

    ``settings``: how much to measure (``FULL``: the bundled tables; ``QUICK``: a seconds-long run for checks).
    ``threads``: torch intra-op threads on CPU (default: torch's current setting); fixed for the whole run and
    recorded in the metadata, then restored."""
    torch = _torch()
    kind = _device_kind(device)
    if kind == "cuda" and not torch.cuda.is_available():
        raise DaydreamError("no CUDA device is visible to torch: use --device cpu")
    kernels = list(kernels)
    for k in kernels:
        if k not in KERNELS:
            raise DaydreamError(f"unknown kernel table {k!r}; known: {', '.join(KERNELS)}")
    out = Path(out_dir)
    previous_threads = torch.get_num_threads()
    threads = threads or previous_threads
    written = []
    torch.set_num_threads(threads)
    try:
        for kernel in kernels:
            shapes = sample_shapes(kernel, settings.n_shapes, device, dtypes, seed)
            rows = [
                measurement_row(m)
                for m in measure(shapes, device, settings.repeats, settings.warmup, settings.passes, seed, progress)
            ]
            csv_path = out / f"{kernel}.csv"
            meta = table_metadata(kernel, device, threads, settings, seed, len(rows))
            write_atomic(csv_path.with_suffix(".meta.json"), json.dumps(meta, indent=2) + "\n")
            write_atomic(csv_path, rows_to_csv(rows))
            written.append(csv_path)
    finally:
        torch.set_num_threads(previous_threads)
    return written


# ---- noise floor ----

FEATURE_COLUMNS = {"gemm": ("op", "batch", "m", "n", "k", "dtype"), "elementwise": ("op", "numel", "dtype")}


def table_kernel(rows: Sequence[Mapping[str, Any]]) -> str:
    """Which kernel a table holds, from its columns."""
    cols = set(rows[0])
    for kernel, feats in FEATURE_COLUMNS.items():
        if set(feats) <= cols:
            return kernel
    raise DaydreamError(f"kernel table with unknown columns: {', '.join(sorted(cols))}")


def table_noise(first: str | Path, second: str | Path) -> Accuracy:
    """The noise floor: GMAE between two measurements of the same shapes (two runs with one seed).

    No model fitted to one measurement can be expected to predict the other better than this."""
    a, b = read_table(first), read_table(second)
    kernel = table_kernel(a)
    feats = FEATURE_COLUMNS[kernel]
    by_shape = {tuple(r[c] for c in feats): r["median_us"] for r in a}
    pairs = [(by_shape[key], r["median_us"]) for r in b if (key := tuple(r[c] for c in feats)) in by_shape]
    if not pairs:
        raise DaydreamError(f"{first} and {second} share no shapes")
    return Accuracy(
        f"{kernel}-noise",
        gmae([p for p, _ in pairs], [o for _, o in pairs]),
        len(pairs),
        f"{Path(first).name} vs {Path(second).name}",
    )
