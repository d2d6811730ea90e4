"""Simulating a task graph: the frontier scheduler, policies, the timeline and its analyses."""

from daydream.simulation.engine import carry_arrays, simulate
from daydream.simulation.policies import EARLIEST, FIFO, Policy, parse_policy
from daydream.simulation.timeline import (
    CriticalPathTasks,
    PathTask,
    Timeline,
    breakdown,
    critical_path,
    critical_path_indices,
    critical_path_segments,
    totals,
    totals_by,
)

__all__ = [
    "EARLIEST",
    "FIFO",
    "Policy",
    "Timeline",
    "breakdown",
    "carry_arrays",
    "PathTask",
    "CriticalPathTasks",
    "critical_path",
    "critical_path_indices",
    "critical_path_segments",
    "parse_policy",
    "simulate",
    "totals",
    "totals_by",
]
