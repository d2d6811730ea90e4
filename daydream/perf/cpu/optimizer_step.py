"""A fused optimizer step on the CPU (``torch.optim.Adam(..., fused=True)``), priced from a for-loop step's own ops.

torch's for-loop optimizers run a few element-wise ops per parameter (Adam: ``lerp_``, ``mul_``, ``addcmul_``,
``sqrt``, ``div``, ``add_``, ``addcdiv_``), each a pass over a parameter-sized tensor. Its fused CPU kernels
(``_fused_adam_``, ``_fused_adamw_``, ``_fused_adagrad_``, ``_fused_sgd_``) make one vectorised pass per parameter,
reading the parameter, its gradient and its state once and writing the parameter and state once: Adam 4 reads + 3
writes per element, Adagrad 3 + 2, SGD with momentum 3 + 2, plain SGD 2 + 1 (amsgrad: the max state, 1 + 1 more).

Price: those tensor passes over the parameters' elements, at the rate the step's own in-place ops went through
theirs (an in-place op over N elements with k same-sized tensor inputs makes k + 1 passes: k reads, one write).
The parameters' elements are the first inputs of the in-place op that runs least often over non-scalar tensors
(once per parameter: ``addcdiv_``, ``lerp_``, SGD's ``mul_`` of its momentum buffer). Element sizes cancel (one
dtype throughout, as a step has).

Uncertainty: the pass rate of in-place ops leaves out the arithmetic the fused kernel does that they did not
(Adam's ``sqrt`` and division run out of place in the for-loop); measured on this project's 2-core host against
torch 2.13's fused steps (Adam, AdamW, Adagrad, SGD; 0.2M-10M parameters): -40% to +16%, most -10% to -30%
(predicted too fast).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from daydream.errors import DaydreamError
from daydream.trace.intra_op import numel

# Tensor passes per parameter element of torch's fused CPU kernel: reads + writes (amsgrad: + 2 for max_exp_avg_sq).
FUSED_PASSES = {"Adam": 7, "AdamW": 7, "Adagrad": 5, "SGD": 5}
PLAIN_SGD_PASSES = 3  # SGD without momentum: read param and grad, write param
AMSGRAD_EXTRA_PASSES = 2
_STEP_REGION = re.compile(r"^Optimizer\.step#(\w+)\.step")


def step_optimizer(region: str | None) -> str | None:
    """The optimizer class of an ``Optimizer.step#Adam.step`` range, None for another range."""
    m = _STEP_REGION.match(region or "")
    return m.group(1) if m else None


def fused_cpu_step_us(ops: Iterable[tuple[str, Any, float]], optimizer: str) -> float:
    """Microseconds of torch's fused CPU kernel for one step whose for-loop ops are ``ops`` (name, input dims,
    duration), of optimizer class ``optimizer`` (``Adam``). Raises DaydreamError where torch has no fused CPU kernel
    for it or the ops' dims do not say the parameters."""
    if optimizer not in FUSED_PASSES:
        raise DaydreamError(
            f"torch has no fused CPU kernel for {optimizer} (fused=True: {', '.join(FUSED_PASSES)}); "
            'price its foreach path with kind = "foreach"'
        )
    passes_done = 0.0  # element passes the step's in-place ops made
    inplace_us = 0.0
    firsts: dict[str, list[int]] = {}  # in-place op name -> elements of its first input, per call
    names: set[str] = set()
    for name, shapes, duration in ops:
        names.add(name)
        if not name.endswith("_") or name.startswith("aten::_") or not isinstance(shapes, list) or not shapes:
            continue
        first = shapes[0]
        n = numel(first)
        if n <= 1:  # a step counter, a scalar, not a tensor's dims: not a pass over a parameter
            continue
        tensors = sum(1 for s in shapes if s == first)
        passes_done += n * (tensors + 1)
        inplace_us += duration
        firsts.setdefault(name, []).append(n)
    if not firsts or passes_done <= 0:
        raise DaydreamError(
            f"the {optimizer} step's ops have no in-place op over a parameter with recorded input dims "
            "(record with shapes, as daydream record does): the fused kernel's work is not known"
        )
    parameter_elements = sum(min(firsts.values(), key=lambda calls: (len(calls), sum(calls))))
    passes = FUSED_PASSES[optimizer]
    if optimizer == "SGD" and "aten::mul_" not in names:
        passes = PLAIN_SGD_PASSES
    if optimizer in ("Adam", "AdamW") and names & {"aten::maximum", "aten::maximum_"}:
        passes += AMSGRAD_EXTRA_PASSES
    return passes * parameter_elements * inplace_us / passes_done
