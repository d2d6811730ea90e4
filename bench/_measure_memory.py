"""Run a training program unchanged and measure what its steps keep (bench_model_memory.py runs it under `daydream
record`): the bytes autograd saves for the backward pass (distinct storages, parameters left out), the parameters' and
the optimizer state's bytes, written to OUT.json after every optimizer step.

    python bench/_measure_memory.py OUT.json PROGRAM.py ARGS...
"""

from __future__ import annotations

import json
import runpy
import sys
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

out, program, *args = sys.argv[1:]
saved: dict[int, int] = {}  # this step's saved storages: data pointer -> bytes
steps: list[dict[str, Any]] = []


def pack(t: torch.Tensor) -> torch.Tensor:
    s = t.untyped_storage()
    saved[s.data_ptr()] = s.nbytes()
    return t


def stepped(opt: torch.optim.Optimizer, *_: Any) -> None:
    params = [p for g in opt.param_groups for p in g["params"]]
    owned = {p.untyped_storage().data_ptr() for p in params}
    state = sum(
        v.numel() * v.element_size()
        for st in opt.state.values()
        for v in st.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    )  # (Adam's step counter is a 0-dim tensor)
    steps.append(
        {
            "saved_bytes": sum(n for ptr, n in saved.items() if ptr not in owned),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
            "optimizer_bytes": state,
            "optimizer": type(opt).__name__,
        }
    )
    saved.clear()
    with open(out, "w") as f:
        json.dump(steps, f)


register_optimizer_step_post_hook(stepped)
sys.argv = [program, *args]
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    runpy.run_path(program, run_name="__main__")
