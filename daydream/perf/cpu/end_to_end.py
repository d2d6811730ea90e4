"""The end-to-end estimate: Algorithm 1 of Lin et al. (HiPC 2022) over one iteration's top-level ops, from a trace
window or a dependency graph, with the traced kernel times or a kernel model's (see :mod:`daydream.perf.cpu.overheads`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import networkx as nx

from daydream.perf.cpu.graph_ops import graph_items
from daydream.perf.cpu.iterations import default_iteration
from daydream.perf.cpu.overhead_lookup import launch_us, per_op
from daydream.perf.cpu.overhead_table import Overheads
from daydream.perf.cpu.top_level_ops import Item, Kernel, top_level_items
from daydream.trace.model import Trace
from daydream.trace.steps import Step

# Algorithm 1: a kernel starts at least this long after the previous one on its stream ends.
KERNEL_GAP_US = 1.0


class E2E(msgspec.Struct, frozen=True, kw_only=True):
    """One iteration as Algorithm 1 predicts it; JSON (to_dict) in field order.

    ``predicted_us``: the paper's estimate, max(cpu_us, gpu_us) for the iteration run once from an idle CPU and
    GPU. ``period_us``: the same iteration repeated back to back, the time each repetition adds once the repeats
    settle (max of the CPU's and the GPU's advance): what a trace's iteration-to-iteration time measures when the
    GPU still runs one iteration's kernels while the CPU starts the next. ``gpu_active_us``: the kernel time placed.
    ``measured_us``: the traced period of the iteration (its window's length), where the input was a trace."""

    step: str | None = None
    predicted_us: float
    period_us: float
    measured_us: float | None = None
    cpu_us: float
    gpu_us: float
    gpu_active_us: float
    ops: int
    kernels: int

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


KernelTime = Callable[[Kernel], float]
# Repetitions of an iteration until its per-repetition advance stops changing (it settles after two or three).
MAX_REPEATS = 10


def predict_e2e(
    trace_or_graph: Trace | nx.DiGraph,
    overheads: Overheads,
    kernel_us: KernelTime | None = None,
    step: Step | None = None,
    model_waits: bool = True,
) -> E2E:
    """Algorithm 1 of the paper over one iteration's top-level ops, in order::

        cpu += T1
        op with launches: cpu += T2; per launch: per kernel k: gpu = max(gpu + 1us, cpu + T4/2) + T_k;
                          cpu += T4; between launches cpu += T5; then cpu += T3
        op without:       cpu += its CPU time (the paper's T5)
        iteration = max(cpu, gpu)

    Kernel times T_k are the traced ones, or ``kernel_us(kernel)``. Input: a trace (``step``: the window, default
    the median-period iteration, :func:`default_iteration`) or a graph from :func:`daydream.graph.build_graph`
    (after any transform; its kernel durations are the T_k). Beyond the paper, and stated here so nobody is
    surprised: ``gpu`` is kept per stream (identical on one stream); a call that waited for the device
    (synchronize, blocking copy) sets cpu = max(cpu, gpu) when ``model_waits`` (the paper's algorithm has no
    waits: ``model_waits=False``); a data-loading range adds its traced CPU time (it is not an op); a runtime call
    made outside any op is an op with one launch and no T2/T3/T5; and ``period_us`` (see :class:`E2E`).

    On a graph, ops are the runs of runtime calls under one top-level op call (:func:`graph_items`)."""
    if isinstance(trace_or_graph, nx.DiGraph):
        items = graph_items(trace_or_graph, overheads)
        measured, name = None, None
    else:
        window = step or default_iteration(trace_or_graph)
        items = [it for it in top_level_items(trace_or_graph)[0] if window.start <= it.ts < window.end]
        measured, name = window.end - window.start, window.name
    return run_algorithm(items, overheads, kernel_us, model_waits, measured, name)


@dataclass(frozen=True)
class _Planned:
    """One top-level unit with every time looked up: CPU time before its first launch, per launch (T4, whether
    it waits, its kernels as (stream, time)), CPU time between launches and after the last."""

    before_us: float
    launches: tuple[tuple[float, bool, tuple[tuple[str, float], ...]], ...]
    between_us: float
    after_us: float


def _plan(items: Sequence[Item], overheads: Overheads, kernel_us: KernelTime | None) -> list[_Planned]:
    plan = []
    t1 = overheads.t1_us
    for it in items:
        if it.kind == "dataloader":
            plan.append(_Planned(it.end - it.ts, (), 0.0, 0.0))
            continue
        if not it.launches:
            plan.append(_Planned(t1 + per_op(overheads.cpu_only, it.name), (), 0.0, 0.0))
            continue
        is_op = it.kind == "op"
        launches = tuple(
            (
                launch_us(overheads, ln.name) if ln.kernels else 0.0,
                ln.waits,
                tuple((k.stream, kernel_us(k) if kernel_us is not None else k.duration_us) for k in ln.kernels),
            )
            for ln in it.launches
        )
        if is_op:
            plan.append(
                _Planned(
                    t1 + per_op(overheads.t2, it.name),
                    launches,
                    per_op(overheads.t5, it.name),
                    per_op(overheads.t3, it.name),
                )
            )
        else:
            plan.append(_Planned(t1, launches, 0.0, 0.0))
    return plan


def _run(plan: Sequence[_Planned], cpu: float, gpu: dict[str, float], model_waits: bool) -> float:
    """One pass of Algorithm 1 from CPU time ``cpu`` and per-stream GPU ends ``gpu`` (updated in place);
    returns the CPU time at the end."""
    for p in plan:
        cpu += p.before_us
        for i, (t4, waits, kernels) in enumerate(p.launches):
            if i:
                cpu += p.between_us
            for stream, t_k in kernels:
                gpu[stream] = max(gpu.get(stream, 0.0) + KERNEL_GAP_US, cpu + t4 / 2) + t_k
            cpu += t4
            if waits and model_waits and gpu:
                cpu = max(cpu, max(gpu.values()))
        if p.launches:
            cpu += p.after_us
    return cpu


def run_algorithm(
    items: Sequence[Item],
    overheads: Overheads,
    kernel_us: KernelTime | None = None,
    model_waits: bool = True,
    measured_us: float | None = None,
    step: str | None = None,
) -> E2E:
    """Algorithm 1 over ``items`` (see :func:`predict_e2e`)."""
    plan = _plan(items, overheads, kernel_us)
    gpu: dict[str, float] = {}
    cpu = _run(plan, 0.0, gpu, model_waits)
    gpu_end = max(gpu.values(), default=0.0)
    first = (cpu, gpu_end)
    advance: tuple[float, float] | None = None
    last = first
    for _ in range(MAX_REPEATS):
        cpu = _run(plan, cpu, gpu, model_waits)
        now = (cpu, max(gpu.values(), default=0.0))
        step_advance = (now[0] - last[0], now[1] - last[1])
        last = now
        if advance is not None and all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(advance, step_advance)
        ):
            break
        advance = step_advance
    period = max(advance) if advance is not None else max(first)
    active = sum(t for p in plan for _, _, ks in p.launches for _, t in ks)
    n_kernels = sum(len(ks) for p in plan for _, _, ks in p.launches)
    n_ops = sum(1 for it in items if it.kind != "dataloader")
    return E2E(
        step=step,
        predicted_us=max(first),
        period_us=period,
        measured_us=measured_us,
        cpu_us=first[0],
        gpu_us=first[1],
        gpu_active_us=active,
        ops=n_ops,
        kernels=n_kernels,
    )
