"""Where a model's layers are cut into pipeline stages (GPipe, Huang et al. 2019; PipeDream's 1F1B, Narayanan et al.
2019): the forward pass's blocks, in order, with the time each takes forward and backward, cut into contiguous stages
of balanced time.

A block is a module of the repeated list a model is made of (``Encoder.layers.3``: the path up to the first numbered
module), or, outside it, a top-level child (``Encoder.embed``, ``Encoder.head``); work of the root module or of none
(the loss) joins the block that ran before it in its pass. Its time is the time of its work (kernels and tensor
parallelism's collectives on a GPU trace; CPU ops on a CPU recording) in the forward and in
the backward pass, and the CPU time each micro-batch repeats whatever its size (the calls that issue the work on a GPU
trace; the framework time after each op on a CPU recording). The cut minimises the slowest stage's time (the classic
linear partition, by dynamic programming), or follows the blocks a user names. What crosses a cut is the activation
the next stage's first op reads: a Linear's tokens x in_features, else its first input's elements, from the recorded
shapes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of
from daydream.graph.gradients import tensor_elements
from daydream.graph.schema import CPU_KINDS
from daydream.graph.tensor_parallel import linear_dims

_NUMBERED = re.compile(r"^(.*?\.\d+)(\.|$)")
# how transforms/tensor_parallel.whatif names its collectives, which block the compute stream: a stage's work (a data
# parallel all-reduce, on a stream of its own, is not)
TENSOR_PARALLEL_COLLECTIVE = "(tensor parallel)"


@dataclass
class Block:
    """One block of the forward pass in one step: its module path, its work's time and task count forward and
    backward (us), and the elements of the activation its first forward op reads (None without shapes)."""

    name: str
    forward_us: float = 0.0
    backward_us: float = 0.0
    forward_tasks: int = 0
    backward_tasks: int = 0
    # the CPU time each micro-batch repeats: on a GPU trace the calls that issue its work, on a CPU recording the
    # framework time after its ops
    cpu_forward_us: float = 0.0
    cpu_backward_us: float = 0.0
    input_elements: int | None = None
    first_start: float = math.inf

    def add(self, phase: str, us: float, work: bool) -> None:
        if not work:
            if phase == "forward":
                self.cpu_forward_us += us
            else:
                self.cpu_backward_us += us
        elif phase == "forward":
            self.forward_us += us
            self.forward_tasks += 1
        else:
            self.backward_us += us
            self.backward_tasks += 1


@dataclass(frozen=True)
class Stage:
    """A pipeline stage: its blocks (module paths) and their summed times and task counts; ``send_elements``: the
    elements of the activation it sends the next stage (None: the last stage, or no shapes)."""

    blocks: tuple[str, ...]
    forward_us: float
    backward_us: float
    forward_tasks: int
    backward_tasks: int
    send_elements: int | None
    cpu_forward_us: float = 0.0  # the CPU time each micro-batch repeats (Block's)
    cpu_backward_us: float = 0.0


def block_of(layer: str | None) -> str | None:
    """The block a module belongs to: the path up to its first numbered module, else its first two components; the
    model's root module itself (one component) and no module: None (its ops join the block that ran before them)."""
    if not layer or "." not in layer:
        return None
    found = _NUMBERED.match(layer)
    if found:
        return found.group(1)
    return ".".join(layer.split(".")[:2])


def _activation_elements(op: str | None, shapes: Any) -> int | None:
    """Elements of the activation an op reads: a Linear's tokens x in_features, else its first input's."""
    dims = linear_dims(op, shapes)
    return dims[0] * dims[1] if dims is not None else tensor_elements(shapes)


def blocks(graph: nx.DiGraph, step: str | None = None) -> list[Block]:
    """The blocks of a step's forward pass (the graph's last step by default), in the order they first run. Work of
    the root module or of none (the loss, a final activation) joins the block that ran before it in its pass (the
    first block where none did)."""
    attrs = attrs_of(graph)
    on_gpu = any(a["kind"] == "gpu" for a in attrs.values())
    if step is None:
        steps = graph.graph.get("steps") or []
        step = steps[-1].name if steps else None
    tasks = sorted(
        (a for a in attrs.values() if a.get("step") == step and a.get("phase") in ("forward", "backward")),
        key=lambda a: float(a.get("start", 0.0)),
    )
    found: dict[str, Block] = {}
    current: dict[str, Block | None] = {"forward": None, "backward": None}
    pending: list[tuple[str, float, bool]] = []  # work before any block of its pass
    for a in tasks:
        phase = a["phase"]
        name = block_of(a.get("layer"))
        if name is not None:
            b = found.get(name)
            if b is None:
                if phase != "forward":
                    continue  # a block that ran no forward op in this step (a step's tail): its backward alone
                b = found[name] = Block(name, first_start=float(a.get("start", 0.0)))
            if phase == "forward" and a["kind"] in CPU_KINDS and b.input_elements is None:
                b.input_elements = _activation_elements(a.get("op"), a.get("shapes"))
            current[phase] = b
        # a stage's work: kernels and tensor parallelism's collectives; a CPU recording's ops (not a data-parallel
        # all-reduce on a thread of its own). On a GPU trace the CPU calls that issue the work (with the framework
        # time after each) are the stage's CPU time.
        tensor_parallel = a["name"].endswith(TENSOR_PARALLEL_COLLECTIVE)
        if on_gpu:
            work = a["kind"] == "gpu" or (a["kind"] == "comm" and tensor_parallel)
            if not work and a["kind"] not in CPU_KINDS:
                continue
        else:
            work = a["kind"] in CPU_KINDS and (a.get("collective") is None or tensor_parallel)
            if not work:
                continue
        # a CPU op's framework time after it (its gap) comes with every micro-batch: per-call time, not per sample
        gap = float(a.get("gap") or 0.0) if a["kind"] in CPU_KINDS else 0.0
        entries = (
            [(phase, float(a["duration"]) + gap, False)]
            if on_gpu and not work
            else [(phase, float(a["duration"]), True)]
        )
        if not on_gpu and gap:
            entries.append((phase, gap, False))
        b = current[phase]
        for entry in entries:
            if b is None:
                pending.append(entry)
            else:
                b.add(*entry)
    ordered = sorted(found.values(), key=lambda b: b.first_start)
    if ordered:
        for phase, us, work in pending:  # the first block's forward; the loss's backward, before any block's
            (ordered[0] if phase == "forward" else ordered[-1]).add(phase, us, work)
    return ordered


def cut_stages(found: list[Block], stages: int, starts: list[str] | None = None) -> list[Stage]:
    """``found`` cut into ``stages`` contiguous stages: at the blocks named in ``starts`` (each stage's first block
    after the first stage), else balanced (the slowest stage's forward + backward time the least possible)."""
    n = len(found)
    if stages < 1 or stages > n:
        raise DaydreamError(f"{stages} pipeline stages for {n} blocks: each stage needs at least one block")
    if starts:
        names = [b.name for b in found]
        missing = [s for s in starts if s not in names]
        if missing or len(starts) != stages - 1:
            raise DaydreamError(
                f"cut: {stages - 1} block names where stages 2.. begin, from {', '.join(names)}; got {starts}"
            )
        bounds = [0, *sorted(names.index(s) for s in starts), n]
    else:
        bounds = _balanced([b.forward_us + b.backward_us + b.cpu_forward_us + b.cpu_backward_us for b in found], stages)
    out = []
    for i in range(stages):
        part = found[bounds[i] : bounds[i + 1]]
        if not part:
            raise DaydreamError("cut: two stages begin at the same block")
        after = found[bounds[i + 1]].input_elements if bounds[i + 1] < n else None
        out.append(
            Stage(
                tuple(b.name for b in part),
                sum(b.forward_us for b in part),
                sum(b.backward_us for b in part),
                sum(b.forward_tasks for b in part),
                sum(b.backward_tasks for b in part),
                after,
                sum(b.cpu_forward_us for b in part),
                sum(b.cpu_backward_us for b in part),
            )
        )
    return out


def _balanced(times: list[float], stages: int) -> list[int]:
    """Boundaries [0, ..., n] of the contiguous partition of ``times`` into ``stages`` parts whose largest sum is least
    (ties: the earliest cuts)."""
    n = len(times)
    prefix = [0.0]
    for t in times:
        prefix.append(prefix[-1] + t)
    # best[k][i]: the least largest part of times[:i] in k parts; at[k][i]: where its last part begins
    best = [[math.inf] * (n + 1) for _ in range(stages + 1)]
    at = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i], at[k][i] = cost, j
    bounds = [n]
    for k in range(stages, 0, -1):
        bounds.append(at[k][bounds[-1]])
    return bounds[::-1]
