"""Synthetic Kineto traces with known timing, written by the tests (both schemas)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PID, MAIN, BWD = 100, 1, 2
STREAM = 7


def make_trace(
    schema: str = "current", steps: int = 3, explicit_sync: bool = True, legacy: bool = False
) -> dict[str, Any]:
    """A training loop of ``steps`` iterations, 1000 us apart. Per step (times from the step's base):

    forward  (main thread, module Linear_0): aten::linear > aten::addmm > cudaLaunchKernel [30, 40] -> sgemm [45, 245]
             aten::relu > cudaLaunchKernel [120, 128] -> relu kernel [246, 266] (queued behind the gemm)
    backward (autograd thread): evaluate_function: AddmmBackward0 > cudaLaunchKernel [310, 318] -> sgemm [320, 420]
    optimizer: Optimizer.step#SGD.step > cudaLaunchKernel [510, 515] -> multi_tensor_apply [517, 530]
    sync:    aten::item > cudaMemcpyAsync [705, 795] -> Memcpy DtoH (Device -> Pageable) [780, 790]
             cudaStreamSynchronize [800, 850]

    ``legacy`` (with ``schema="2021"``): as PyTorch 1.8-1.10 recorded it. ProfilerStep#N and Optimizer.step#SGD.step are
    ``Operator`` events, and so are a DataLoader range enumerate(DataLoader)#... [1, 9] (aten::stack inside) and
    Optimizer.zero_grad#SGD.zero_grad [600, 650] (aten::zero_ inside); the autograd thread runs the nodes themselves,
    no evaluate_function wrapper: AddmmBackward [300, 400] > aten::mm > cudaLaunchKernel [310, 318] -> sgemm [320, 420],
    then torch::autograd::AccumulateGrad [410, 440] > aten::add_ > cudaLaunchKernel [415, 420] -> add kernel [422, 430].
    The main thread is idle from 150 (after the forward) to 500 (the optimizer step): it waits in loss.backward().
    """
    old = schema == "2021"
    if legacy and not old:
        raise ValueError("legacy traces are 2021-schema: make_trace(schema='2021', legacy=True)")
    cat_range = "Operator" if legacy else "user_annotation"
    cat_op, cat_rt, cat_k, cat_cp = (
        ("Operator", "Runtime", "Kernel", "Memcpy") if old else ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy")
    )
    ext = "external id" if old else "External id"
    dims = "Input dims" if old else "Input Dims"
    gpu_tid: Any = f"stream {STREAM}" if old else STREAM
    events: list[dict[str, Any]] = []
    corr = 0

    def x(cat: str, name: str, tid: Any, ts: float, dur: float, pid: Any = PID, **args: Any) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    def launch(
        name: str,
        tid: int,
        ts: float,
        dur: float,
        kname: str,
        kts: float,
        kdur: float,
        cat: str | None = None,
        **kargs: Any,
    ) -> None:
        nonlocal corr
        corr += 1
        x(cat_rt, name, tid, ts, dur, correlation=corr, **{ext: corr})
        x(
            cat or cat_k,
            kname,
            gpu_tid,
            kts,
            kdur,
            pid=0,
            device=0,
            stream=STREAM,
            correlation=corr,
            **{ext: corr},
            **kargs,
        )
        flow = "async" if old else "ac2g"
        events.append({"ph": "s", "cat": flow, "name": flow, "id": corr, "pid": PID, "tid": tid, "ts": ts})
        events.append(
            {"ph": "f", "cat": flow, "name": flow, "id": corr, "pid": 0, "tid": gpu_tid, "ts": kts, "bp": "e"}
        )

    for k in range(1, steps + 1):
        b = 1000.0 * k
        seq = 10 * k
        x(cat_range, f"ProfilerStep#{k}", MAIN, b, 900)
        if legacy:
            x(cat_op, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", MAIN, b + 1, 8)
            x(cat_op, "aten::stack", MAIN, b + 2, 6, **{dims: [[8], [8], [8], [8]]})
        x("python_function", "nn.Module: Linear_0", MAIN, b + 10, 95)
        x(cat_op, "aten::linear", MAIN, b + 12, 80, **{"Sequence number": seq, dims: [[4, 8], [8, 8], [8]]})
        x(cat_op, "aten::addmm", MAIN, b + 20, 62, **{dims: [[8], [4, 8], [8, 8]]})
        launch("cudaLaunchKernel", MAIN, b + 30, 10, "volta_sgemm_128x64_nn", b + 45, 200)
        x(cat_op, "aten::relu", MAIN, b + 110, 40, **{dims: [[4, 8]]})
        launch(
            "cudaLaunchKernel", MAIN, b + 120, 8, "void at::native::vectorized_elementwise_kernel<relu>", b + 246, 20
        )
        if legacy:
            x(cat_op, "AddmmBackward", BWD, b + 300, 100, **{"Sequence number": seq, "Fwd thread id": 1})
            x(cat_op, "aten::mm", BWD, b + 305, 20, **{dims: [[4, 8], [8, 8]]})
        else:
            x(
                cat_op,
                "autograd::engine::evaluate_function: AddmmBackward0",
                BWD,
                b + 300,
                100,
                **{"Sequence number": seq, "Fwd thread id": 1},
            )
        launch("cudaLaunchKernel", BWD, b + 310, 8, "volta_sgemm_64x64_nt", b + 320, 100)
        if legacy:
            x(cat_op, "torch::autograd::AccumulateGrad", BWD, b + 410, 30)
            x(cat_op, "aten::add_", BWD, b + 412, 20, **{dims: [[8, 8], [8, 8], []]})
            launch(
                "cudaLaunchKernel", BWD, b + 415, 5, "void at::native::vectorized_elementwise_kernel<add>", b + 422, 8
            )
        x(cat_range, "Optimizer.step#SGD.step", MAIN, b + 500, 100)
        launch("cudaLaunchKernel", MAIN, b + 510, 5, "void at::native::multi_tensor_apply_kernel<sgd>", b + 517, 13)
        if legacy:
            x(cat_op, "Optimizer.zero_grad#SGD.zero_grad", MAIN, b + 600, 50)
            x(cat_op, "aten::zero_", MAIN, b + 605, 10, **{dims: [[8, 8]]})
        x(cat_op, "aten::item", MAIN, b + 700, 98)
        launch(
            "cudaMemcpyAsync", MAIN, b + 705, 90, "Memcpy DtoH (Device -> Pageable)", b + 780, 10, cat=cat_cp, bytes=4
        )
        corr += 1
        x(cat_rt, "cudaStreamSynchronize", MAIN, b + 800, 50, correlation=corr, **{ext: corr})
        if explicit_sync and not old:
            x(
                "cuda_sync",
                "Stream Sync",
                STREAM,
                b + 800,
                50,
                pid=0,
                cuda_sync_kind="Stream Sync",
                stream=STREAM,
                correlation=corr,
                device=0,
            )
    events.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN, "args": {"name": "python"}})
    doc: dict[str, Any] = {"traceEvents": events}
    if not old:
        doc.update(
            schemaVersion=1,
            deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
            distributedInfo={"rank": 0, "world_size": 1},
        )
    return doc


# Per step: first task starts at +30 (the first launch), the last ends at +850 (the stream sync).
STEP_MEASURED_US = 820.0
# the steps repeat every 1000 us: a step's period after the one before it (its context), what a run pays per step
STEP_PERIOD_US = 1000.0


def write_trace(path: Path, doc: Any, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


COMM_STREAM = 20


def make_rank_trace(rank: int, world: int, steps: int = 3) -> dict[str, Any]:
    """Rank ``rank`` of a data-parallel job of ``world`` ranks, every rank different: :func:`make_trace`'s loop,
    its events ``3 * rank`` us later, its forward sgemm ``(7 * rank) % 40`` us shorter and its backward sgemm
    ``(11 * rank) % 30`` us shorter, and per step two NCCL all-reduces of the world's process group on stream 20:
    one of 4 MiB launched from the autograd thread at +430 after the backward sgemm, and one of 1 MiB launched from
    the main thread at +520 after the optimizer's kernel (each kernel as traced on a rank that waited for none)."""
    doc = make_trace(steps=steps)
    events = doc["traceEvents"]
    corr = max(e["args"].get("correlation", 0) for e in events if isinstance(e.get("args"), dict)) + 1
    added: list[dict[str, Any]] = []
    group = {
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": str(list(range(world))),
    }
    for k in range(1, steps + 1):
        b = 1000.0 * k
        for tid, at, nbytes, us in ((BWD, 430.0, 4 << 20, 60.0), (MAIN, 520.0, 1 << 20, 25.0)):
            corr += 1
            added.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": PID,
                    "tid": tid,
                    "ts": b + at,
                    "dur": 4,
                    "args": {"correlation": corr, "External id": corr},
                }
            )
            added.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                    "pid": 0,
                    "tid": COMM_STREAM,
                    "ts": b + at + 10,
                    "dur": us,
                    "args": {
                        "device": 0,
                        "stream": COMM_STREAM,
                        "correlation": corr,
                        "External id": corr,
                        "Collective name": "allreduce",
                        "In msg nelems": nbytes // 4,
                        "Out msg nelems": nbytes // 4,
                        "Group size": world,
                        "dtype": "Float",
                        **group,
                    },
                }
            )
            added.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": PID, "tid": tid, "ts": b + at})
            added.append(
                {
                    "ph": "f",
                    "cat": "ac2g",
                    "name": "ac2g",
                    "id": corr,
                    "pid": 0,
                    "tid": COMM_STREAM,
                    "ts": b + at + 10,
                    "bp": "e",
                }
            )
    for e in events:
        if e.get("name") == "volta_sgemm_128x64_nn":
            e["dur"] -= (7 * rank) % 40
        elif e.get("name") == "volta_sgemm_64x64_nt":
            e["dur"] -= (11 * rank) % 30
    events.extend(added)
    for e in events:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += 3.0 * rank
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return doc
