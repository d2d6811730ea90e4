"""Simulating a task graph: the frontier scheduler, policies, the timeline and its analyses."""

from daydream.simulate.engine import simulate
from daydream.simulate.policies import EARLIEST, FIFO, Policy, parse_policy
from daydream.simulate.timeline import Timeline, breakdown, critical_path, critical_path_segments, totals

__all__ = [
    "EARLIEST",
    "FIFO",
    "Policy",
    "Timeline",
    "breakdown",
    "critical_path",
    "critical_path_segments",
    "parse_policy",
    "simulate",
    "totals",
]
