"""What encloses each CPU task: its op, the op's shapes, the layer (module path) and the phase.

One sweep per CPU thread over the thread's ranges (ops, annotations) and runtime calls, sorted by start,
with a stack of open ranges. Kernels later inherit the context of the runtime call that launched them:
the synchronization-free mapping of the Daydream paper (section 4.3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from daydream.trace.model import CPU_OP_CATS, RECORDER_RANGE_PREFIX
from daydream.trace.schema import Event

_OPTIMIZER_RE = re.compile(r"^Optimizer\.|optimizer|^## optimizer ##", re.IGNORECASE)
_DATALOADER_RE = re.compile(r"DataLoader|dataloader|data_loader|## data ##", re.IGNORECASE)
_FORWARD_RE = re.compile(r"^## forward ##$|^forward$", re.IGNORECASE)
_BACKWARD_RE = re.compile(r"^## backward ##$|^backward$|^autograd::engine::evaluate_function", re.IGNORECASE)
# The autograd engine's nodes, by name (`AddmmBackward0`, `CudnnConvolutionBackward`,
# `torch::autograd::AccumulateGrad`):
# 2021-era traces (PyTorch 1.8-1.10) record them as the engine thread's top-level ops, without the
# `evaluate_function:` wrapper of later versions. Case matters: `aten::convolution_backward` is a forward-named op.
_AUTOGRAD_NODE_RE = re.compile(r"Backward\d*$|^(?:torch::autograd::)?(?:AccumulateGrad|CopySlices)$")
# Annotations that mark steps, phases or library internals rather than a module of the model.
_NOT_A_LAYER_RE = re.compile(
    r"^ProfilerStep#|^Optimizer\.|^##.*##$|^enumerate\(DataLoader\)|^nccl:|^gloo:|^c10d::|^record_param_comms"
    r"|^\[pytorch\|profiler|^\[param\||^PyTorch Profiler|^daydream\.step"
)
_MODULE_PREFIX = "nn.Module: "
# The iterator of a DataLoader with worker processes: its `__next__` waits for a batch that the workers (processes
# the trace does not hold) made; without workers (`_SingleProcessDataLoaderIter`) the calling thread makes it itself.
_WORKER_FED_RE = re.compile(r"_MultiProcessingDataLoaderIter")


def range_phase(name: str, cat: str | None) -> str | None:
    """The phase a CPU range declares, or None when it inherits its parent's.

    Ops declare only the backward pass (autograd nodes and their wrappers); step, optimizer and DataLoader ranges that
    a trace files as ops arrive here as annotations (the loader recategorizes them: daydream.trace.model.is_annotation).
    """
    if cat == "python_function":
        # a frame of the Python stack (with_stack=True), not an annotation: `torch/optim/optimizer.py(60): _use_grad`
        # inside `Optimizer.step#SGD.step` names the file it runs in, and would take the step's place as the region
        return None
    if _BACKWARD_RE.search(name) or _AUTOGRAD_NODE_RE.search(name):
        return "backward"
    if cat not in CPU_OP_CATS:
        if _OPTIMIZER_RE.search(name):
            return "optimizer"
        if _DATALOADER_RE.search(name):
            return "dataloader"
        if _FORWARD_RE.search(name):
            return "forward"
    return None


def fed_by_workers(name: str) -> bool:
    """Whether a data-loading range waits for batches made by DataLoader worker processes."""
    return bool(_WORKER_FED_RE.search(name))


@dataclass(frozen=True, slots=True)
class LayerPart:
    """How a range changes the layer path: keep the parent's, append a part, or replace it."""

    part: str | None = None
    replace: bool = False

    def path(self, parent: str | None) -> str | None:
        if self.part is None:
            return parent
        if self.replace or not parent:
            return self.part
        return f"{parent}/{self.part}"


_KEEP = LayerPart()


def layer_part(name: str, cat: str | None) -> LayerPart:
    """How a range changes the layer path: ``nn.Module`` ranges and plain record_function ranges nest, the
    recorder's ``daydream.module:`` ranges carry the whole path, ops and framework annotations keep it."""
    if cat in CPU_OP_CATS:
        return _KEEP
    if name.startswith(RECORDER_RANGE_PREFIX):  # the recorder's range carries the whole dotted module path
        return LayerPart(name[len(RECORDER_RANGE_PREFIX) :], replace=True)
    if name.startswith(_MODULE_PREFIX):
        return LayerPart(name[len(_MODULE_PREFIX) :])
    if cat == "python_function" or _NOT_A_LAYER_RE.search(name) or _phase_marker(name):
        return _KEEP
    return LayerPart(name)


@lru_cache(maxsize=1 << 16)
def range_role(name: str, cat: str | None) -> tuple[str | None, LayerPart]:
    """(phase the range declares, how it changes the layer path): names repeat, so this is cached."""
    return range_phase(name, cat), layer_part(name, cat)


def _phase_marker(name: str) -> bool:
    return bool(_OPTIMIZER_RE.search(name) or _DATALOADER_RE.search(name) or _FORWARD_RE.search(name))


def op_shapes(ev: Event) -> Any:
    args = ev.args
    if args is None:
        return None
    dims = args.input_dims if args.input_dims is not None else args.input_dims_2021
    return dims
