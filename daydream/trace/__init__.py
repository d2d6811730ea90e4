"""Loading profiler traces."""

from daydream.trace.load import find_execution_trace, load_trace
from daydream.trace.model import Trace
from daydream.trace.steps import Step, profiler_steps, select_steps

__all__ = ["Step", "Trace", "find_execution_trace", "load_trace", "profiler_steps", "select_steps"]
