"""What a recording knows beyond the Kineto trace: modules and their parameters, optimizers, DDP's gradient buckets,
world size and rank, the device, and (when asked) embedding-bag index statistics. Written as a JSON sidecar next to
the trace, as a :class:`daydream.trace.recording.Recording` (the schema both sides share); :func:`read_recording`
(same module) reads it back.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import weakref
from typing import Any

import torch
from torch import nn

from daydream.record.host_bench import measure_thread_speedup
from daydream.record.modules import WRAPPER_TYPES, ModuleNames

# Fractions of an embedding table's rows (the hottest first) at which the share of lookups they take is reported.
HOT_FRACTIONS = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.2, 0.5)


def plain(value: Any) -> Any:
    """A JSON-safe copy: tensors and numbers as floats / ints, tuples as lists, anything else as its repr."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, torch.Tensor):
        return plain(value.item()) if value.numel() == 1 else repr(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return repr(value)


def _cuda_in_use() -> bool:
    """The program has used CUDA (without initializing it here)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def device_info() -> dict[str, Any]:
    if _cuda_in_use():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return {
            "type": "cuda",
            "name": props.name,
            "index": index,
            "count": torch.cuda.device_count(),
            "memory_bytes": props.total_memory,
            "sms": props.multi_processor_count,
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
        }
    return {"type": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}


def reset_device_memory_peak() -> None:
    """Start the caching allocator's peak over again (the recorded steps' own peak is read at their end); nothing
    where the program has not used CUDA."""
    if _cuda_in_use():
        torch.cuda.reset_peak_memory_stats()


def device_memory_peak() -> dict[str, Any] | None:
    """The caching allocator's peak since :func:`reset_device_memory_peak`, on the current device:
    ``torch.cuda.max_memory_allocated()`` (bytes in tensors) and ``max_memory_reserved()`` (bytes the allocator held
    from the driver); None where the program has not used CUDA. The profiler's ``[memory]`` events give the first
    too, event by event, only when recorded with --profile-memory; this costs nothing and is always kept."""
    if not _cuda_in_use():
        return None
    index = torch.cuda.current_device()
    return {
        "device": f"cuda:{index}",
        "max_allocated": torch.cuda.max_memory_allocated(index),
        "max_reserved": torch.cuda.max_memory_reserved(index),
    }


def host_info() -> dict[str, Any]:
    """The host's intra-op threads, the cores this process may run on and the measured speedup of threaded work on
    1, 2, 4, ... of them (the threads model reads all three; measuring takes a few tenths of a second)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    speedup = [list(point) for point in measure_thread_speedup(cores)]
    return {"threads": torch.get_num_threads(), "cores": cores, "thread_speedup": speedup}


def distributed_info() -> dict[str, Any]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": str(dist.get_backend())}
    return {"rank": 0, "world_size": 1, "backend": None}


def environment() -> dict[str, Any]:
    # str(): torch.__version__ is a TorchVersion, a str subclass that msgspec does not encode
    return {"torch": str(torch.__version__), "python": sys.version.split()[0], "platform": platform.platform()}


def modules(names: ModuleNames) -> list[dict[str, Any]]:
    """Every module of every root that ran, with its own parameters (not its children's)."""
    out = []
    for name, ref in names.roots.items():
        root = ref()
        if root is None:
            continue
        for module in root.modules():
            path = names.paths.get(module)
            if path is None or type(module).__name__ in WRAPPER_TYPES:
                continue
            params = [
                {
                    "name": pname,
                    "shape": list(p.shape),
                    "dtype": str(p.dtype).removeprefix("torch."),
                    "bytes": p.numel() * p.element_size(),
                    "requires_grad": p.requires_grad,
                }
                for pname, p in module.named_parameters(recurse=False)
            ]
            out.append({"path": path, "type": type(module).__name__, "root": name, "parameters": params})
    return out


def ddp_buckets(names: ModuleNames) -> list[dict[str, Any]]:
    """DDP's gradient buckets as it rebuilt them after the first backward pass (the order gradients became ready),
    with parameter paths; from ``DistributedDataParallel._get_ddp_logging_data()``."""
    out = []
    for name, ref in names.roots.items():
        ddp = ref()
        if ddp is None or type(ddp).__name__ != "DistributedDataParallel":
            continue
        try:
            data = ddp._get_ddp_logging_data()
        except Exception:  # a private API: its absence costs only the bucket list
            continue
        params = [p for p in ddp.module.parameters() if p.requires_grad]
        paths = {id(p): f"{owner}.{pname}" for owner, pname, p in names.parameters([name])}
        indices = str(data.get("rebuilt_per_bucket_param_indices") or "")
        buckets = []
        for group in (g.strip() for g in indices.split(",")):
            members = [params[int(i)] for i in group.split() if int(i) < len(params)]
            if members:
                buckets.append(
                    {
                        "bytes": sum(p.numel() * p.element_size() for p in members),
                        "parameters": [paths.get(id(p), "?") for p in members],
                    }
                )
        out.append(
            {
                "module": name,
                "bucket_cap_bytes": data.get("bucket_cap_bytes"),
                "buckets": buckets,
                "find_unused_parameters": bool(data.get("find_unused_parameters")),
                "gradient_as_bucket_view": bool(data.get("gradient_as_bucket_view")),
            }
        )
    return out


def optimizer_info(opt: torch.optim.Optimizer) -> dict[str, Any]:
    params = [p for g in opt.param_groups for p in g["params"]]
    defaults = {k: v for k, v in opt.defaults.items() if k != "params"}
    return {
        "type": type(opt).__name__,
        "defaults": plain(defaults),
        "param_groups": len(opt.param_groups),
        "parameters": len(params),
        "bytes": sum(p.numel() * p.element_size() for p in params),
    }


class EmbeddingStats:
    """Counts how often each row of each ``nn.Embedding`` / ``nn.EmbeddingBag`` is looked up, on the table's device
    (one bincount per lookup, no synchronization until :meth:`summary`)."""

    def __init__(self, names: ModuleNames) -> None:
        self.names = names
        self.counts: weakref.WeakKeyDictionary[nn.Module, dict[str, Any]] = weakref.WeakKeyDictionary()
        self.active = False
        self.sampled_steps = 0
        self._handle = nn.modules.module.register_module_forward_pre_hook(self._pre)

    def close(self) -> None:
        self._handle.remove()

    def _pre(self, module: nn.Module, args: Any) -> None:
        if not self.active or not isinstance(module, (nn.Embedding, nn.EmbeddingBag)) or not args:
            return
        indices = args[0]
        if not isinstance(indices, torch.Tensor):
            return
        rows = module.num_embeddings
        with torch.no_grad():
            flat = indices.reshape(-1).long()
            entry = self.counts.get(module)
            if entry is None:
                entry = {
                    "counts": torch.zeros(rows, dtype=torch.int64, device=flat.device),
                    "lookups": 0,
                    "bags": 0,
                    "calls": 0,
                    "unique": torch.zeros((), dtype=torch.int64, device=flat.device),
                }
                self.counts[module] = entry
            per_call = torch.bincount(flat, minlength=rows)
            entry["counts"] += per_call
            entry["unique"] += (per_call > 0).sum()
        entry["lookups"] += flat.numel()
        offsets = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
        entry["bags"] += offsets.numel() if offsets is not None else (indices.shape[0] if indices.dim() > 1 else 1)
        entry["calls"] += 1

    def summary(self) -> list[dict[str, Any]]:
        out = []
        steps = max(self.sampled_steps, 1)
        for module, entry in list(self.counts.items()):
            counts = entry["counts"].cpu()
            total = int(counts.sum())
            ordered = torch.sort(counts, descending=True).values.cumsum(0)
            rows = counts.numel()
            hot = {
                f"{f:g}": (float(ordered[max(math.ceil(f * rows), 1) - 1]) / total if total else 0.0)
                for f in HOT_FRACTIONS
            }
            out.append(
                {
                    "module": self.names.paths.get(module, type(module).__name__),
                    "type": type(module).__name__,
                    "rows": rows,
                    "dim": module.embedding_dim,
                    "mode": getattr(module, "mode", None),
                    "device": str(module.weight.device),
                    "dtype": str(module.weight.dtype).removeprefix("torch."),
                    "steps_sampled": self.sampled_steps,
                    "lookups_per_step": entry["lookups"] / steps,
                    "bags_per_step": entry["bags"] / steps,
                    "pooling": entry["lookups"] / entry["bags"] if entry["bags"] else None,
                    "unique_rows_per_call": int(entry["unique"]) / max(entry["calls"], 1),
                    "rows_touched": int((counts > 0).sum()),
                    "hot_share": hot,
                }
            )
        return out
