"""daydream: what-if simulation of deep-learning training performance from profiler traces.

The API a notebook uses is here, at the top: ``from daydream import whatif, replay, compare, plan, Workload``.
Each name loads its module on first use (``daydream.whatif`` imports :mod:`daydream.api.whatif` when first read), so
``import daydream`` costs nothing a notebook does not use; the names are those of the modules they come from, which
keep them too (``daydream.api.whatif.whatif is daydream.whatif``).
"""

from __future__ import annotations

import importlib

from daydream._version import __version__ as __version__

TYPE_CHECKING = False  # typing's own, without importing typing (3 ms of a bare import)

# module -> the names it gives the top of the package, grouped as a notebook meets them
_EXPORTS: dict[str, tuple[str, ...]] = {
    # a run: a trace or a job folder and how to read it, then the prediction or the baseline alone
    "api.workload": ("RunOptions", "Workload"),
    "api.whatif": ("WhatIf", "whatif"),
    "api.replay": ("Replay", "replay", "replay_graph"),
    "api.job": ("JobReplay", "load_job", "replay_job"),
    # what is built from runs
    "api.compare": ("Comparison", "Scenario", "compare", "load_scenarios"),
    "api.plan": ("PlanOptions", "Plans", "plan"),
    "api.validate": ("validate",),
    "api.demo": ("bundled_example", "run_demo"),
    "api.chakra": ("export_chakra",),
    # the layers below, for a notebook that edits a graph itself
    "trace": ("load_trace",),
    "graph": ("build_graph",),
    "graph.select": ("Selection", "group_by", "last", "select"),
    "graph.edit": ("Placement", "insert_task", "remove", "scale"),
    "simulation": ("Policy", "Timeline", "breakdown", "critical_path", "parse_policy", "simulate", "totals"),
    "dsl": ("Session",),
    # what can go wrong
    "errors": ("CheckFailed", "DaydreamError", "NotApplicable", "ScriptError", "TraceError"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'daydream' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"daydream.{module}"), name)
    globals()[name] = value  # read once: later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see: the names where they come from
    from typing import Any

    from daydream.api.chakra import export_chakra
    from daydream.api.compare import Comparison, Scenario, compare, load_scenarios
    from daydream.api.demo import bundled_example, run_demo
    from daydream.api.job import JobReplay, load_job, replay_job
    from daydream.api.plan import PlanOptions, Plans, plan
    from daydream.api.replay import Replay, replay, replay_graph
    from daydream.api.validate import validate
    from daydream.api.whatif import WhatIf, whatif
    from daydream.api.workload import RunOptions, Workload
    from daydream.dsl import Session
    from daydream.errors import CheckFailed, DaydreamError, NotApplicable, ScriptError, TraceError
    from daydream.graph import build_graph
    from daydream.graph.edit import Placement, insert_task, remove, scale
    from daydream.graph.select import Selection, group_by, last, select
    from daydream.simulation import Policy, Timeline, breakdown, critical_path, parse_policy, simulate, totals
    from daydream.trace import load_trace
