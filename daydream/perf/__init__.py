"""Performance models: what work nobody measured would cost, in rooms named for what they price.

====================  =================================================================================================
``kernels/``          one kernel from its op and shapes: FLOPs and bytes, the roofline calibrated on the trace, device
swaps
                      from measured kernels, this machine's microbenchmarks and the MLPs fitted to them
``collectives/``      collective communication: the nccl-tests formula and the piecewise model, fitted to benchmark
sweeps
                      and traces (the package itself), the sweeps parsed (``nccl_tests``), a job's collectives (``job``)
``cpu/``              the host: CPU overheads T1..T5, the end-to-end iteration estimate, intra-op threads, a fused
optimizer
``embeddings/``       embedding tables: a bag lookup's time, hot rows, FAE's epoch, sharding tables over ranks
``trust/``            how far to trust a number: a model's error (GMAE) and a predicted step's 90% interval
``accuracy_report``   every model's held-out error (``daydream models accuracy``)
``paths``             where the measured data lives (kernels/)
====================  =================================================================================================

The rooms read one way: ``trust`` and ``paths`` at the bottom, then ``kernels``, ``collectives`` and ``cpu``, then
``embeddings`` (its lookups and all-to-alls are priced by the two below), then ``accuracy_report``
(tests/test_layers.py holds them to it).

The submodules load on first use (scipy and scikit-learn are slow to import, and a script that prices nothing
should not pay for them): ``daydream.perf.collective_us`` imports :mod:`daydream.perf.collectives` when first read.
The modules' names from before the rooms (``daydream.perf.roofline``) still import, as the module at its new place,
with a DeprecationWarning naming it.
"""

from __future__ import annotations

import importlib
from typing import Any

from daydream._moved import keep_old_paths
from daydream.perf.trust.accuracy import Accuracy, gmae

_EXPORTS = {
    "kernels.devices": ("Device", "device_names", "device_of_graph", "get_device", "peak_flops"),
    "kernels.costs": ("Cost", "elementwise_cost", "gemm_cost", "op_cost"),
    "kernels.roofline": ("Calibration", "calibrate", "device_speedup", "dtype_speedup", "predict_us", "roofline_us"),
    "embeddings.embedding_bag": ("embedding_bag_us",),
    "collectives": (
        "PiecewiseModel",
        "bus_factor",
        "collective_us",
        "fit_collective_model",
        "fit_from_trace",
        "links",
        "resolve_link",
    ),
    "collectives.nccl_tests": ("load_sweep", "parse_nccl_tests", "parse_param_comms"),
    "cpu.overhead_table": ("Overheads", "extract_overheads"),
    "cpu.overhead_lookup": ("launch_us", "op_overhead_us"),
    "cpu.end_to_end": ("predict_e2e",),
    "kernels.mlp": ("KernelModel", "fit_table"),
    "kernels.microbench": ("run_microbenchmarks",),
    "accuracy_report": ("model_accuracy",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["Accuracy", "gmae", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'daydream.perf' has no attribute {name!r}")
    return getattr(importlib.import_module(f"daydream.perf.{module}"), name)


# Where each module of daydream.perf went when the modules were grouped into rooms (issue 77): old name -> new name,
# both under daydream.perf. An import of the old name gets the module at its new place (one module object, so a
# class keeps one identity and pickles by its new path) with a DeprecationWarning.
MOVED = {
    "costs": "kernels.costs",
    "roofline": "kernels.roofline",
    "device_model": "kernels.device_model",
    "kernel_data": "kernels.kernel_data",
    "mlp": "kernels.mlp",
    "microbench": "kernels.microbench",
    "devices": "kernels.devices",
    "nccl_tests": "collectives.nccl_tests",
    "job_collectives": "collectives.job",
    "overheads": "cpu.overheads",
    "overhead_table": "cpu.overhead_table",
    "overhead_lookup": "cpu.overhead_lookup",
    "host": "cpu.host",
    "top_level_ops": "cpu.top_level_ops",
    "graph_ops": "cpu.graph_ops",
    "sample_stats": "cpu.sample_stats",
    "optimizer_step": "cpu.optimizer_step",
    "e2e": "cpu.end_to_end",
    "e2e_check": "cpu.end_to_end_check",
    "iterations": "cpu.iterations",
    "embedding": "embeddings.embedding_bag",
    "hot_rows": "embeddings.hot_rows",
    "fae": "embeddings.fae",
    "sharding": "embeddings.sharding",
    "accuracy": "trust.accuracy",
    "uncertainty": "trust.uncertainty",
    "models": "accuracy_report",
}


keep_old_paths(__name__, MOVED)
