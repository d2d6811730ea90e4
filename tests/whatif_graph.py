"""A hand-built iteration for the language tests, small enough to work every prediction out by hand.

CPU thread (launch calls, 10 us each, no gaps), kernels on stream 7 (launch lag 2, stream gap 0), an
all-reduce on stream 20, and a device sync at the end:

    cpu  L1[0,10] L2[10,20] L3[20,30] L4[30,40] L5[40,50]      S[ends when K5 ends + 3]
    s7        K1 gemm fwd 100   K2 relu fwd 20   K3 gemm bwd 200          K5 adam 30
    s20                                              K4 allreduce 50 (after K3)

K1 [12,112], K2 [112,132], K3 [132,332], K4 [332,382] (waits for K3), K5 [382,412] (waits for K4:
the optimizer reads reduced gradients), S waits for K5: [412,415]. Makespan 415 us.
"""

from __future__ import annotations

import networkx as nx

from daydream.graph import add_dependency, add_task
from daydream.graph.schema import Delays

CPU, S7, S20 = "cpu:1/1", "gpu:0/7", "gpu:0/20"
BASELINE_US = 415.0


def iteration() -> nx.DiGraph:
    g = nx.DiGraph()
    g.graph.update(measured_us=BASELINE_US, delays=Delays(2.0, 0.0), steps=[])
    launches = []
    for i in range(5):
        launches.append(
            add_task(
                g,
                "cudaLaunchKernel",
                "cpu",
                CPU,
                10,
                start=10.0 * i,
                step="s",
                phase="forward" if i < 2 else "backward" if i < 4 else "optimizer",
                layer="model.fc1" if i in (0, 2) else "model.act" if i == 1 else None,
            )
        )
    for u, v in zip(launches, launches[1:]):
        add_dependency(g, u, v, "thread")
    specs = [
        ("sm80_gemm_fwd", "gpu", S7, 100, 12, "gemm", "forward", "model.fc1", None),
        ("relu_kernel", "gpu", S7, 20, 112, "elementwise", "forward", "model.act", None),
        ("sm80_gemm_bwd", "gpu", S7, 200, 132, "gemm", "backward", "model.fc1", None),
        ("ncclAllReduce", "comm", S20, 50, 332, "comm", "backward", None, 4_000_000),
        ("multi_tensor_apply_adam", "gpu", S7, 30, 382, "optimizer", "optimizer", None, None),
    ]
    kernels = []
    for (name, kind, thread, dur, start, cls, phase, layer, nbytes), launch in zip(specs, launches):
        attrs = {"class": cls, "stream": int(thread.rsplit("/", 1)[1])}
        if nbytes is not None:
            attrs["bytes"] = nbytes
            attrs["collective"] = "allreduce"
        k = add_task(g, name, kind, thread, dur, start=float(start), step="s", phase=phase, layer=layer, **attrs)
        add_dependency(g, launch, k, "launch", lag=2)
        kernels.append(k)
    k1, k2, k3, k4, k5 = kernels
    add_dependency(g, k1, k2, "stream")
    add_dependency(g, k2, k3, "stream")
    add_dependency(g, k3, k5, "stream")
    add_dependency(g, k3, k4, "comm")
    add_dependency(g, k4, k5, "sync")
    sync = add_task(g, "cudaDeviceSynchronize", "cpu", CPU, 3, start=50.0, step="s", phase="optimizer")
    add_dependency(g, launches[-1], sync, "thread")
    add_dependency(g, k5, sync, "sync")
    return g


AUTOGRAD = "cpu:1/2"
ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def backward(optimizer: bool = False) -> tuple[nx.DiGraph, dict[str, int]]:
    """Autograd thread, calls 10 us, kernels 50 us on stream 7 (launch lag 2): a weight-grad GEMM launch L1 [0,10]
    -> K1 [12,62]; its AccumulateGrad A1 [10,20] launching an add KA1 [62,112] (512x1024 fp32 = 2 MiB); another
    GEMM L2 [20,30] -> K2 [112,162]; AccumulateGrads that launch nothing: A2 [30,40] (1024: 4 KiB), A3 [40,50]
    (3x256x256: 768 KiB). With ``optimizer``: O1 [50,60] in the Optimizer.step range launches KO [162,212]."""
    g = nx.DiGraph()
    g.graph.update(delays=Delays(2.0, 0.0))
    ids: dict[str, int] = {}
    prev = None

    def cpu(name: str, start: float, **attrs: object) -> int:
        nonlocal prev
        v = add_task(g, name, "cpu", AUTOGRAD, 10, start=start, step="s", phase="backward", **attrs)
        if prev is not None:
            add_dependency(g, prev, v, "thread")
        prev = v
        return v

    def kernel(name: str, call: int, start: float) -> int:
        k = add_task(g, name, "gpu", S7, 50, start=start, step="s", phase="backward", **{"class": "gemm"})
        add_dependency(g, call, k, "launch", lag=2)
        return k

    ids["L1"] = cpu("cudaLaunchKernel", 0, op="aten::mm", top_op="MmBackward0", top_op_id=1)
    ids["K1"] = kernel("gemm_wgrad_1", ids["L1"], 12)
    ids["A1"] = cpu(
        "cudaLaunchKernel", 10, op="aten::add_", top_op=ACC, top_op_id=2, shapes=[[512, 1024], [512, 1024], []]
    )
    ids["KA1"] = kernel("add_kernel", ids["A1"], 62)
    ids["L2"] = cpu("cudaLaunchKernel", 20, op="aten::mm", top_op="MmBackward0", top_op_id=3)
    ids["K2"] = kernel("gemm_wgrad_2", ids["L2"], 112)
    ids["A2"] = cpu(ACC, 30, op=ACC, top_op=None, top_op_id=4, shapes=[[1024]])
    ids["A3"] = cpu(ACC, 40, op=ACC, top_op=None, top_op_id=5, shapes=[[3, 256, 256]])
    chain = ["K1", "KA1", "K2"]
    if optimizer:
        region = {"region": "Optimizer.step#SGD.step"}
        ids["O1"] = cpu(
            "cudaLaunchKernel", 50, op="aten::_foreach_add_", top_op="aten::_foreach_add_", top_op_id=6, **region
        )
        ids["KO"] = kernel("multi_tensor_apply_kernel", ids["O1"], 162)
        g.nodes[ids["KO"]].update(region, phase="optimizer")
        chain.append("KO")
    for a, b in zip(chain, chain[1:]):
        add_dependency(g, ids[a], ids[b], "stream")
    return g, ids
