"""Performance models: what work nobody measured would cost (kernels, collectives, CPU overheads).

The submodules load on first use (scipy and scikit-learn are slow to import, and a script that prices nothing
should not pay for them): ``daydream.perf.collective_us`` imports :mod:`daydream.perf.collectives` when first read.
"""

from __future__ import annotations

import importlib
from typing import Any

from daydream.perf.accuracy import Accuracy, gmae

_EXPORTS = {
    "devices": ("Device", "device_names", "device_of_graph", "get_device", "peak_flops"),
    "costs": ("Cost", "elementwise_cost", "gemm_cost", "op_cost"),
    "roofline": ("Calibration", "calibrate", "device_speedup", "dtype_speedup", "predict_us", "roofline_us"),
    "embedding": ("embedding_bag_us",),
    "collectives": (
        "PiecewiseModel",
        "bus_factor",
        "collective_us",
        "fit_collective_model",
        "fit_from_trace",
        "links",
        "resolve_link",
    ),
    "nccl_tests": ("load_sweep", "parse_nccl_tests", "parse_param_comms"),
    "overhead_table": ("Overheads", "extract_overheads"),
    "overhead_lookup": ("launch_us", "op_overhead_us"),
    "e2e": ("predict_e2e",),
    "mlp": ("KernelModel", "fit_table"),
    "microbench": ("run_microbenchmarks",),
    "models": ("model_accuracy",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["Accuracy", "gmae", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'daydream.perf' has no attribute {name!r}")
    return getattr(importlib.import_module(f"daydream.perf.{module}"), name)
