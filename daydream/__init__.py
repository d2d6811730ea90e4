"""daydream: what-if simulation of deep-learning training performance from profiler traces."""

from daydream._version import __version__ as __version__
from daydream.errors import DaydreamError, TraceError
from daydream.graph import build_graph
from daydream.simulation import Policy, Timeline, breakdown, critical_path, simulate, totals
from daydream.trace import load_trace

__all__ = [
    "DaydreamError", "Policy", "Timeline", "TraceError", "breakdown", "build_graph", "critical_path",
    "load_trace", "simulate", "totals",
]  # fmt: skip
