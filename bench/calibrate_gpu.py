"""Measure a GPU's kernels for the device model: GEMMs in FP32, TF32, FP16 and BF16, convolutions, element-wise,
layer norm and softmax, and scaled dot-product attention (flash and memory-efficient back ends, forward and
backward), each shape the median of several runs timed with CUDA events after warm-up.

    python bench/calibrate_gpu.py shapes --neusight ../shared/calibration/neusight --out SHAPES.json
    python bench/calibrate_gpu.py measure --shapes SHAPES.json --out DIR --budget 200 [--device cuda]
        [--sections gemm ...] [--timing events|calls|both]

`shapes` (here, no GPU) picks the shapes: the NeuSight data set's (Lee et al., ASPLOS 2025) GEMMs of its H100 test
set, its convolutions, element-wise, layer-norm and softmax rows, so that every row measured here pairs with the same
op and dims measured on the data set's GPUs; ResNet-50's convolutions at the validation corpus's sizes; small GEMMs
drawn log-uniform (the data set has few under 10 us); an attention grid. `measure` (on the GPU) times them in a
shuffled order, section by section, each within its share of ``--budget`` seconds, and writes one CSV per section in
the data set's layout (OPName, its dims, Device, Latency in ms) plus DType, the quartiles and the runs, and
``meta.json`` with the GPU, driver, CUDA and torch versions (validation/record_gpu.sh runs it on a lent GPU).

``--timing calls`` times each run as the NeuSight data set's latencies were taken: the host's clock around the
PyTorch call and a synchronize after it (after a synchronize before it), so that a run holds the call's host and
launch time as the data set's do; ``--timing both`` times every GEMM both ways, events into gemm.csv and calls into
gemm_calls.csv, the same shapes side by side, so that one data set's timings can be set against the other's (the
refit of docs/perf.md, "Refitting on several data sets", waits on it).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daydream.perf.kernels.microbench import _time_runs, rows_to_csv, write_atomic  # noqa: E402

# the budget's shares: GEMMs carry most of a training step's time and four dtypes
SHARES = {"gemm": 0.40, "conv": 0.20, "vector": 0.20, "sdpa": 0.20}
GEMM_DTYPES = ("fp32", "tf32", "fp16", "bf16")
CONV_DTYPES = ("fp32", "tf32", "bf16")
VECTOR_DTYPES = ("fp32", "bf16")
BINARY = ("add", "mul", "div", "pow")
UNARY = ("addu", "mulu", "divu", "powu", "relu", "gelu", "tanh")
# the H100's FP32 rate without tensor cores is ~50 TFLOP/s: 1e12 FLOP is ~20 ms a run, the longest worth the time
MAX_GEMM_FLOPS = 1e12
TARGET_US = 3000.0  # timed runs per shape: about this much GPU time, between MIN_RUNS and MAX_RUNS runs
MIN_RUNS, MAX_RUNS, WARMUP = 5, 40, 2
# ResNet-50 (torchvision's layout) at the corpus's 96x96 images: (C, F, R, input side, stride, pad) per distinct conv
RESNET50 = [(3, 64, 7, 96, 2, 3)]
for _blocks, _width, _side, _first_stride in ((3, 64, 24, 1), (4, 128, 24, 2), (6, 256, 12, 2), (3, 512, 6, 2)):
    _in = 64 if _width == 64 else _width * 2
    RESNET50 += [
        (_in, _width, 1, _side, 1, 0),
        (_width, _width, 3, _side, _first_stride, 1),
        (_width, _width * 4, 1, _side // _first_stride, 1, 0),
        (_in, _width * 4, 1, _side, _first_stride, 0),
        (_width * 4, _width, 1, _side // _first_stride, 1, 0),
        (_width, _width, 3, _side // _first_stride, 1, 1),
    ]


def pick_shapes(neusight: Path, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The shapes to measure, section by section, shuffled (a budget cut keeps a random sample of each)."""
    from daydream.perf.kernels.kernel_data import read_measurements

    rng = random.Random(seed)
    gemm: set[tuple[str, tuple[int, ...]]] = set()
    conv: set[tuple[int, ...]] = set()
    vector: set[tuple[str, tuple[int, ...]]] = set()
    for m in read_measurements(neusight):
        if m.kernel_class == "gemm" and "H100" in m.device and m.flops() <= MAX_GEMM_FLOPS:
            gemm.add((m.op, m.dims))
        elif m.kernel_class == "conv":
            conv.add(m.dims)
        elif m.kernel_class in ("elementwise", "norm"):
            vector.add((m.op, m.dims))
    small = set()
    while len(small) < 400:  # 16..2048 log-uniform: launch-bound and small-tile GEMMs
        b = 1 if rng.random() < 0.7 else int(math.exp(rng.uniform(math.log(2), math.log(64))))
        m_, n, k = (int(math.exp(rng.uniform(math.log(16), math.log(2048)))) for _ in range(3))
        small.add(("linear" if b == 1 else "bmm", (b, m_, n, k)))
    gemms = sorted(gemm)
    rng.shuffle(gemms)
    smalls = sorted(small)
    rng.shuffle(smalls)
    # interleave: one small for every two of the data set's, so a budget cut keeps both kinds
    mixed: list[tuple[str, tuple[int, ...]]] = []
    while gemms or smalls:
        mixed += [gemms.pop() for _ in range(2) if gemms] + ([smalls.pop()] if smalls else [])
    convs = [(dims, "neusight") for dims in sorted(conv)]
    rng.shuffle(convs)
    resnet = [((b, *c), "resnet50") for b in (64, 128) for c in RESNET50]
    convs = resnet + convs  # the corpus's convolutions first: they price the swap pair's ResNet
    vectors = sorted(vector)
    rng.shuffle(vectors)
    attention = [
        {"batch": b, "heads": h, "seq": s, "head_dim": d, "causal": c}
        for b in (1, 4, 16)
        for h in (8, 16, 32)
        for s in (128, 256, 512, 1024, 2048, 4096, 8192)
        for d in (64, 128)
        for c in (False, True)
        if b * h * s * s * d <= 2**37  # ~1.4e11 FLOP forward: a few ms on an H100
    ]
    rng.shuffle(attention)
    return {
        "gemm": [{"op": op, "dims": list(d)} for op, d in mixed],
        "conv": [{"op": "conv", "dims": list(d), "source": src} for d, src in convs],
        "vector": [{"op": op, "dims": list(d)} for op, d in vectors],
        "sdpa": attention,
    }


def _dtype(torch: Any, name: str) -> Any:
    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _set_tf32(torch: Any, on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def _runner(torch: Any, section: str, shape: dict[str, Any], dtype: str, device: str) -> Callable[[], Any]:
    """Allocate the inputs once; return the call to time."""
    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    _set_tf32(torch, dtype == "tf32")

    def rand(*size: int, grad: bool = False) -> Any:
        return torch.randn(*size, device=device, dtype=dt, requires_grad=grad)

    d = shape.get("dims", [])
    op = shape.get("op")
    if section == "gemm":
        b, m, n, k = d
        if op == "linear":  # B x M x K by a weight N x K: one (B*M) x K x N product
            x, w = rand(b, m, k), rand(n, k)
            return lambda: F.linear(x, w)
        x, y = rand(b, m, k), rand(b, k, n)
        return lambda: torch.bmm(x, y)
    if section == "conv":
        b, c, f, r, s, stride, pad = d
        x, w = rand(b, c, s, s), rand(f, c, r, r)
        return lambda: F.conv2d(x, w, stride=stride, padding=pad)
    if section == "vector":
        b, h = d
        x = rand(b, h)
        if op in BINARY:
            y = rand(b, h).abs() + 0.5 if op in ("div", "pow") else rand(b, h)
            fn = {"add": torch.add, "mul": torch.mul, "div": torch.div, "pow": torch.pow}[op]
            return lambda: fn(x, y)
        if op in ("addu", "mulu", "divu", "powu"):
            scalar = {"add": torch.add, "mul": torch.mul, "div": torch.div, "pow": torch.pow}[_OPS[op]]
            return lambda: scalar(x, 1.5)
        if op == "ln":
            weight, bias = rand(h), rand(h)
            return lambda: F.layer_norm(x, (h,), weight, bias)
        if op == "softmax":
            return lambda: torch.softmax(x, dim=-1)
        fn = {"relu": torch.relu, "gelu": F.gelu, "tanh": torch.tanh}[op]  # type: ignore[assignment]
        return lambda: fn(x)
    raise ValueError(section)


_OPS = {"addu": "add", "mulu": "mul", "divu": "div", "powu": "pow"}


def _attention(
    torch: Any, shape: dict[str, Any], backend: str, dtype: str, device: str
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Forward and backward calls of one attention shape on one back end (raises where the back end refuses it)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    dt = _dtype(torch, dtype)
    b, h, s, d = shape["batch"], shape["heads"], shape["seq"], shape["head_dim"]
    q, k, v = (torch.randn(b, h, s, d, device=device, dtype=dt, requires_grad=True) for _ in range(3))
    which = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def forward() -> Any:
        with sdpa_kernel([which]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=shape["causal"])

    out = forward()
    grad = torch.randn_like(out)

    def backward() -> Any:
        return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

    return forward, backward


def _time(torch: Any, run: Callable[[], Any], device: str, timer: str = "events") -> list[float]:
    """Warm up, probe one run, then time enough runs to fill about TARGET_US of GPU time: with CUDA events back to
    back (``timer`` "events"), or each call on the host's clock (:func:`_time_calls`)."""
    time_runs = _time_runs if timer == "events" else _time_calls
    probe = time_runs(torch, run, device, WARMUP, 1)[0]
    runs = max(MIN_RUNS, min(MAX_RUNS, int(TARGET_US / max(probe, 1.0))))
    return time_runs(torch, run, device, 0, runs)


def _time_calls(torch: Any, run: Callable[[], Any], device: str, warmup: int, runs: int) -> list[float]:
    """Per-run durations in microseconds as the NeuSight data set took them: ``perf_counter_ns`` around the PyTorch
    call and the synchronize after it, the device idle when each starts."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter_ns()
        run()
        sync()
        times.append((time.perf_counter_ns() - t0) / 1000.0)
    return times


def _summary(times: list[float]) -> dict[str, Any]:
    t = sorted(times)
    q = statistics.quantiles(t, n=4) if len(t) > 1 else [t[0]] * 3
    return {
        "Latency": statistics.median(t) / 1e3,
        "P25": q[0] / 1e3,
        "P75": q[2] / 1e3,
        "Min": t[0] / 1e3,
        "Runs": len(t),
    }


DIM_COLUMNS = {
    "gemm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"),
    "vector": ("B", "H"),
}


def measure(
    shapes: dict[str, list[dict[str, Any]]], out: Path, budget: float, device: str, timing: str = "events"
) -> dict[str, int]:
    """Time the sections of ``shapes`` within ``budget`` seconds and write their CSVs into ``out``; ``timing``:
    "events", "calls" (every section timed as calls) or "both" (GEMMs both ways: gemm.csv and gemm_calls.csv)."""
    import torch

    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    counts: dict[str, int] = {}
    errors: dict[str, str] = {}
    out.mkdir(parents=True, exist_ok=True)
    carry = 0.0  # time a section left unused goes to the next ones
    order = [s for s in SHARES if s in shapes]
    for i, section in enumerate(order):
        share = budget * SHARES[section] / sum(SHARES[s] for s in order) + carry  # of the sections measured
        start = time.monotonic()
        rows: list[dict[str, Any]] = []
        call_rows: list[dict[str, Any]] = []  # --timing both: the GEMMs timed as calls
        timer = "calls" if timing == "calls" else "events"
        for shape in shapes[section]:
            if time.monotonic() - start > share:
                break
            try:
                if section == "sdpa":
                    for backend in ("flash", "efficient"):
                        for dtype in ("bf16", "fp16"):
                            try:
                                fwd, bwd = _attention(torch, shape, backend, dtype, device)
                            except RuntimeError as e:  # a back end that refuses the shape or device
                                errors[f"sdpa {backend}"] = str(e).splitlines()[0][:200]
                                continue
                            for direction, run in (("forward", fwd), ("backward", bwd)):
                                rows.append(
                                    {
                                        "OPName": "sdpa",
                                        "Backend": backend,
                                        "Direction": direction,
                                        **{k.title().replace("_", ""): v for k, v in shape.items()},
                                        "DType": dtype,
                                        "Device": name,
                                        **_summary(_time(torch, run, device, timer)),
                                    }
                                )
                            del fwd, bwd
                    continue
                dtypes = {"gemm": GEMM_DTYPES, "conv": CONV_DTYPES, "vector": VECTOR_DTYPES}[section]
                for dtype in dtypes:
                    run = _runner(torch, section, shape, dtype, device)
                    with torch.no_grad():
                        times = _time(torch, run, device, timer)
                        calls = _time(torch, run, device, "calls") if timing == "both" and section == "gemm" else []
                    row = {"OPName": shape["op"], **dict(zip(DIM_COLUMNS[section], shape["dims"], strict=True))}
                    if "source" in shape:
                        row["Source"] = shape["source"]
                    rows.append({**row, "DType": dtype, "Device": name, **_summary(times)})
                    if calls:
                        call_rows.append({**row, "DType": dtype, "Device": name, **_summary(calls)})
                    del run
            except torch.OutOfMemoryError as e:
                errors[f"{section} out of memory"] = str(e).splitlines()[0][:200]
                torch.cuda.empty_cache()
            finally:
                _set_tf32(torch, False)
        counts[section] = len(rows)
        if rows:
            write_atomic(out / f"{section}.csv", rows_to_csv(rows))
        if call_rows:
            write_atomic(out / f"{section}_calls.csv", rows_to_csv(call_rows))
            counts[f"{section}_calls"] = len(call_rows)
        carry = max(0.0, share - (time.monotonic() - start))
        print(f"{section}: {len(rows)} rows in {time.monotonic() - start:.1f} s", flush=True)
        if i == len(order) - 1:
            break
    meta = {
        **machine(device),
        "budget_s": budget,
        "rows": counts,
        "errors": errors,
        "timer": (
            "time.perf_counter_ns around the call (the CPU)"
            if not device.startswith("cuda")
            else "time.perf_counter_ns around the call and a synchronize (as the NeuSight data set)"
            if timing == "calls"
            else "torch.cuda.Event, back to back" + (" (and gemm_calls.csv as calls)" if timing == "both" else "")
        ),
        "timing": timing,
        "statistic": "median",
        "warmup": WARMUP,
        "runs": [MIN_RUNS, MAX_RUNS],
        "target_us_per_shape": TARGET_US,
        "tf32": "fp32 rows: allow_tf32 off (matmul and cuDNN); tf32 rows: on",
        "cudnn_benchmark": False,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_atomic(out / "meta.json", json.dumps(meta, indent=2) + "\n")
    return counts


def machine(device: str) -> dict[str, Any]:
    import platform

    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(device)
        facts |= {
            "gpu": p.name,
            "sms": p.multi_processor_count,
            "memory_gib": round(p.total_memory / 2**30, 1),
            "l2_mb": round(getattr(p, "L2_cache_size", 0) / 1e6, 1),
            "cudnn": torch.backends.cudnn.version(),
        }
        try:
            smi = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
            facts["nvidia_smi"] = smi
        except (OSError, subprocess.TimeoutExpired):
            pass
    return facts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("shapes", help="pick the shapes (no GPU needed)")
    s.add_argument("--neusight", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("measure", help="time the shapes on this machine's GPU")
    m.add_argument("--shapes", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--budget", type=float, default=200.0, help="seconds in all (default: %(default)s)")
    m.add_argument("--device", default="cuda")
    m.add_argument("--limit", type=int, help="at most this many shapes a section (a check on the CPU)")
    m.add_argument("--sections", nargs="+", choices=list(SHARES), help="only these sections (default: all)")
    m.add_argument(
        "--timing",
        choices=("events", "calls", "both"),
        default="events",
        help="CUDA events back to back, host time of each call (the NeuSight data set's), or GEMMs both ways",
    )
    args = p.parse_args(argv)
    if args.verb == "shapes":
        shapes = pick_shapes(args.neusight)
        write_atomic(args.out, json.dumps(shapes, separators=(",", ":")))
        print({k: len(v) for k, v in shapes.items()})
        return 0
    shapes = json.loads(args.shapes.read_text())
    if args.limit is not None:
        shapes = {k: v[: args.limit] for k, v in shapes.items()}
    if args.sections:
        shapes = {k: v for k, v in shapes.items() if k in args.sections}
    print(measure(shapes, args.out, args.budget, args.device, args.timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
