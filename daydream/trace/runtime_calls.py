"""What CUDA / HIP runtime and driver calls do to the host thread: the one table of their semantics.

The graph builder (daydream.graph.build) and the CPU-overhead model (daydream.perf.overheads) both read a call's
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
"""

from __future__ import annotations

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
