"""CPU overheads T1..T5 of Lin et al. (HiPC 2022) and their single-GPU end-to-end iteration estimate: the names of
the modules that do each part, in one place.

=========================================  ============================================================================
:mod:`daydream.perf.cpu.sample_stats`      a sample set as one value (``Stat``, ``summarize``, ``without_outliers``)
:mod:`daydream.perf.cpu.top_level_ops`     what a trace holds per top-level op (``Item``, ``Launch``, ``Kernel``)
:mod:`daydream.perf.cpu.graph_ops`         the same units read back from a dependency graph (``graph_items``)
:mod:`daydream.perf.cpu.overhead_table`    the overhead table (``Overheads``, ``extract_overheads``)
:mod:`daydream.perf.cpu.overhead_lookup`   what an op or a call costs by the table (``launch_us``, ``op_overhead_us``)
:mod:`daydream.perf.cpu.iterations`        the iterations estimated (``whole_iterations``, ``default_iteration``)
:mod:`daydream.perf.cpu.end_to_end`        Algorithm 1 (``predict_e2e``, ``run_algorithm``, ``E2E``)
:mod:`daydream.perf.cpu.end_to_end_check`  its error on a trace's own iterations (``check_iterations``, ``accuracy``)
=========================================  ============================================================================

The host side of an iteration is cut into five kinds of time (notes, section 3):

====  =================================================================  ==========================
T1    gap between two consecutive top-level ops                          one value for the trace
T2    op start -> start of its first launch                              per op name
T3    end of its last launch -> op end                                   per op name
T4    the runtime call itself (cudaLaunchKernel, cudaMemcpyAsync, ...)   per runtime function
T5    between consecutive launches of one op                             per op name
====  =================================================================  ==========================

The paper also calls T5 the whole CPU time of an op that launches nothing; that is kept apart here
(:attr:`Overheads.cpu_only`) because one op name is often seen both ways (``aten::to`` copies or does nothing)
and the two times differ by an order of magnitude.

Ops are the trace's CPU ops with no enclosing CPU op on their thread; annotations (``ProfilerStep#N``,
``Optimizer.step#...``, ``## forward ##``, module ranges) are not ops, and data-loading ranges and everything in
them are data loading, not op overhead. A *launch* is an outermost runtime call that issued GPU work (kernel, copy,
fill) or waited for the device (stream/device/event synchronize, a synchronous copy, a copy to or from pageable
memory, a copy that returned only after it finished: what waits is :mod:`daydream.trace.runtime_calls`'s to say, the
table the graph builder reads too); calls that do neither (``cudaStreamIsCapturing``, ``cudaOccupancy...``) are
simply CPU time inside T2/T3/T5. A call that waited is a boundary between T2/T3/T5 intervals but gives no T4 sample:
its duration is mostly the wait.

The ops are swept from the trace, not from a dependency graph (:func:`graph_items`), although the graph builder
sweeps the same nesting: the graph keeps no op's start and end, so T2 and T3 cannot be measured on it (they would
fall into T1, one value for every op), nor can the profiler correction count the CPU events inside an interval.

Profiler-overhead correction (paper, section III-C): the profiler's own cost is inside every measured interval, so
``cpu_event_us`` (2 us) is subtracted per CPU event (op or runtime call) that starts inside the interval and
``gpu_event_us`` (4 us) per GPU event a runtime call issued; a sample never goes below 0. Both constants are
platform dependent (the paper's 2 us is empirical for its hosts, 4 us comes from the PyTorch source of its day):
pass the values measured on your machine. Each sample set loses its outliers outside
[Q1 - 1.5 IQR, Q3 + 1.5 IQR]; the mean of the rest is the value used, stored with its count and the raw median.

:func:`predict_e2e` is the paper's Algorithm 1 over one iteration's ops (from a trace window or a dependency graph),
with the traced kernel times or a kernel model's. Traced iterations are periods (iteration start to the next
start) during which the GPU may still run the previous iteration, so besides the paper's single pass from an idle
machine it reports the period of the iteration repeated back to back; :func:`check_iterations` / :func:`accuracy`
compare that with the trace, each iteration predicted from overheads of the other half of the iterations.
"""

from __future__ import annotations

from daydream.perf.cpu.end_to_end import E2E, KERNEL_GAP_US, MAX_REPEATS, KernelTime, predict_e2e, run_algorithm
from daydream.perf.cpu.end_to_end_check import IterationCheck, accuracy, check_iterations
from daydream.perf.cpu.graph_ops import graph_items
from daydream.perf.cpu.iterations import default_iteration, whole_iterations
from daydream.perf.cpu.overhead_lookup import DEFAULT_LAUNCH_US, launch_us, op_overhead_us
from daydream.perf.cpu.overhead_table import (
    DEFAULT_CPU_EVENT_US,
    DEFAULT_GPU_EVENT_US,
    Overheads,
    extract_overheads,
    overheads_of,
)
from daydream.perf.cpu.sample_stats import NO_SAMPLES, Stat, summarize, without_outliers
from daydream.perf.cpu.top_level_ops import Item, Kernel, Launch, top_level_items

__all__ = [
    "DEFAULT_CPU_EVENT_US",
    "DEFAULT_GPU_EVENT_US",
    "DEFAULT_LAUNCH_US",
    "E2E",
    "KERNEL_GAP_US",
    "MAX_REPEATS",
    "NO_SAMPLES",
    "IterationCheck",
    "Item",
    "Kernel",
    "KernelTime",
    "Launch",
    "Overheads",
    "Stat",
    "accuracy",
    "check_iterations",
    "default_iteration",
    "extract_overheads",
    "graph_items",
    "launch_us",
    "op_overhead_us",
    "overheads_of",
    "predict_e2e",
    "run_algorithm",
    "summarize",
    "top_level_items",
    "whole_iterations",
    "without_outliers",
]
