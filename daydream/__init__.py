"""daydream: what-if simulation of deep-learning training performance from profiler traces."""

from daydream.errors import DaydreamError, TraceError
from daydream.graph import build_graph
from daydream.simulate import Policy, Timeline, breakdown, critical_path, simulate, totals
from daydream.trace import load_trace

__version__ = "0.1.0"

__all__ = [
    "DaydreamError", "Policy", "Timeline", "TraceError", "breakdown", "build_graph", "critical_path",
    "load_trace", "simulate", "totals",
]  # fmt: skip
