"""What CUDA / HIP runtime and driver calls do to the host thread: the one table of their semantics.

The graph builder (daydream.graph.build) and the CPU-overhead model (daydream.perf.cpu.overheads) both read a call's
role here, so a call that waits is a wait in both.

=================  =====================================================================================
role               calls
=================  =====================================================================================
``device``         waits for all work issued to every stream of the device: ``cudaDeviceSynchronize``,
                   ``cuCtxSynchronize``, ``cudaFree`` / ``cuMemFree`` (they synchronize the device)
``stream``         waits for one stream or event: ``cudaStreamSynchronize``, ``cudaEventSynchronize``,
                   ``cudaStreamQuery_blocking`` (a query that spins until the stream drains)
``copy``           issues a copy and returns when it ends: ``cudaMemcpy``, ``cudaMemcpy2D/3D``,
                   ``hipMemcpyWithStream``, ``cuMemcpyDtoH``...; so do copies between the device and pageable
                   host memory (see :func:`copy_waits`)
``wait_event``     makes a stream wait for an event: ``cudaStreamWaitEvent`` (no host wait)
``event_record``   records an event on a stream: ``cudaEventRecord`` (no host wait)
=================  =====================================================================================

Every HIP form (``hip...``) has the role of its CUDA form.

Beside the roles, a call that issues work may wait for room in its device's launch queue (:class:`LaunchQueue`): a
GPU-bound program's CPU runs ahead until CUDA's queue of issued work is full, and each launch then returns only when
a queued task ends and frees a slot.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache

_DEVICE = re.compile(r"DeviceSynchronize|CtxSynchronize|^(cuda|hip)Free$|^cuMemFree")
_STREAM = re.compile(r"StreamSynchronize|EventSynchronize|StreamQuery_blocking")
_COPY = re.compile(r"^(cuda|hip)Memcpy(2D|3D)?(WithStream)?$|^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$")
_WAIT_EVENT = re.compile(r"StreamWaitEvent")
_EVENT_RECORD = re.compile(r"EventRecord")

ROLES = ("device", "stream", "copy", "wait_event", "event_record")


@lru_cache(maxsize=4096)
def call_role(name: str) -> str | None:
    """What a runtime call does to its thread and streams (see the module table), or None for a call that only
    issues work or queries (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ``cudaEventQuery``)."""
    if _DEVICE.search(name):
        return "device"
    if _STREAM.search(name):
        return "stream"
    if _COPY.search(name):
        return "copy"
    if _WAIT_EVENT.search(name):
        return "wait_event"
    if _EVENT_RECORD.search(name):
        return "event_record"
    return None


def host_waits(name: str) -> bool:
    """Whether the call returns only after device work has finished (a synchronize or a synchronous copy)."""
    return call_role(name) in ("device", "stream", "copy")


def copy_waits(call: str, copy: str, call_ts: float, call_end: float, copy_ts: float, copy_end: float) -> bool:
    """Whether the call that issued a copy returned only when the copy ended.

    A synchronous copy call does. So does a copy to or from pageable host memory (``Memcpy DtoH (Device ->
    Pageable)``, ``Memcpy HtoD (Pageable -> Device)``): CUDA cannot return before the data is in the caller's
    buffer, and from pageable memory it drains the stream first, then stages the data while the transfer runs,
    returning just before the transfer's end. Any other copy call that the trace shows returning after its copy
    ended waited too."""
    if call_role(call) == "copy" or "Pageable" in copy:
        return True
    return call_ts <= copy_ts and copy_end <= call_end


# A call that issues work and took this long may have waited for room in its device's launch queue: a launch takes
# microseconds.
QUEUE_WAIT_MIN_US = 50.0
# ... where at least this many tasks of the device were issued and not finished when it began (CUDA's queue holds
# about a thousand launches; one that filled shows hundreds pending: 460-580 on an H200 with torch 2.11) ...
QUEUE_MIN_PENDING = 64
# ... and it returned within this long after one of them ended: the slot it freed let the launch in.
QUEUE_RELEASE_US = 50.0
_ENQUEUES = re.compile(r"Launch|Async")  # calls that put work in a device's queue


def may_wait_for_queue(name: str, dur: float) -> bool:
    """Whether a call issues work (a launch, an async copy or fill) and took long enough to have waited for room in
    the launch queue (:class:`LaunchQueue` says whether it did)."""
    return dur >= QUEUE_WAIT_MIN_US and call_role(name) is None and _ENQUEUES.search(name) is not None


class LaunchQueue:
    """One device's issued work (when each task was issued, when it ended): which task's end let a call that waited
    for room in the queue return. The graph builder (a ``sync`` edge from that task) and the CPU-overhead model (the
    call waited) both ask here."""

    __slots__ = ("by_end", "ends", "issued", "issued_sorted")

    def __init__(self, issued: list[float], ends: list[float]) -> None:
        self.issued = issued
        self.issued_sorted = sorted(issued)
        self.by_end = sorted(range(len(ends)), key=ends.__getitem__)
        self.ends = [ends[i] for i in self.by_end]

    def freed_by(self, start: float, end: float) -> int | None:
        """The task (its index in the lists given) whose end let a call from ``start`` to ``end`` return; None where
        the call did not wait for the queue: fewer than QUEUE_MIN_PENDING tasks pending when it began, or no task
        issued before it ended within QUEUE_RELEASE_US before it returned."""
        if bisect.bisect_left(self.issued_sorted, start) - bisect.bisect_right(self.ends, start) < QUEUE_MIN_PENDING:
            return None
        i = bisect.bisect_right(self.ends, end) - 1
        if (
            i >= 0
            and start < self.ends[i]
            and end - self.ends[i] <= QUEUE_RELEASE_US
            and self.issued[self.by_end[i]] < start
        ):
            return self.by_end[i]
        return None
