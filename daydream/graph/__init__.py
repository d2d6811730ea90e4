"""The kernel-level dependency graph: its vocabulary (schema), how a trace becomes one (build), and edits to it."""

from daydream._moved import keep_old_paths
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

# Where the builder's stages went when the builder became a room of its own (issue 77): old name -> new name, both
# under daydream.graph; the old names still import, with a DeprecationWarning (daydream._moved).
MOVED = {
    "build_cpu": "build.cpu",
    "build_gpu": "build.gpu",
    "build_edges": "build.edges",
    "build_delays": "build.delays",
    "build_table": "build.table",
    "cpu_sweep": "build.cpu_sweep",
}
keep_old_paths(__name__, MOVED)
