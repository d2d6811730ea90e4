"""The kernel-level dependency graph."""

from daydream.graph.build import CPU_KINDS, EDGE_KINDS, GPU_KINDS, ORDER_KINDS, build_graph
from daydream.graph.edit import add_dependency, add_task
from daydream.graph.kernel_class import classify_kernel

__all__ = ["CPU_KINDS", "EDGE_KINDS", "GPU_KINDS", "ORDER_KINDS", "add_dependency", "add_task", "build_graph", "classify_kernel"]
