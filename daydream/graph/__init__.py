"""The kernel-level dependency graph: its vocabulary (schema), how a trace becomes one (build), and edits to it."""

from daydream.graph.build import build_graph
from daydream.graph.edit import add_dependency, add_task
from daydream.graph.kernel_class import classify_kernel
from daydream.graph.schema import CPU_KINDS, EDGE_KINDS, GPU_KINDS, ORDER_KINDS, Edge, Task

__all__ = [
    "CPU_KINDS",
    "EDGE_KINDS",
    "GPU_KINDS",
    "ORDER_KINDS",
    "Edge",
    "Task",
    "add_dependency",
    "add_task",
    "build_graph",
    "classify_kernel",
]
