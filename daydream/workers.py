"""Where work fans out: a Ray cluster (optional dependency) for ``--ray ADDRESS``; a thread reading ahead
(:func:`read_ahead`); how many local worker processes are worth starting (:func:`processes_for`). Local worker
processes are ``concurrent.futures`` with the ``spawn`` context, used directly where they are needed."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from queue import Full, Queue
from types import ModuleType
from typing import Any, TypeVar

from daydream.errors import DaydreamError

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count(jobs: object, items: int | None = None, local: bool = True) -> int:
    """The workers to start for ``jobs`` asked (``--jobs N``, the API's ``jobs=N``): the one check of every
    command's and function's count. A whole number >= 1, else a DaydreamError (0, a negative, a fraction, a
    boolean); at most ``items`` (the pieces of work); and, for processes on this machine (``local``; not a Ray
    cluster's), at most one per core: more only contend for the cores, each holding its own copy of what it works on
    (100,000 asked of 40 ranks on 2 cores started 86 processes holding 4.6 GB). A count capped so is said, once, as
    a warning (the command line prints it as a line on stderr)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DaydreamError(f"--jobs {jobs!r}: give a whole number of worker processes, at least 1")
    count = jobs
    if local and count > cores():
        count = cores()
        warnings.warn(
            f"--jobs {jobs:,}: this machine has {count} core{'s' * (count != 1)}; starting at most {count} "
            "worker process" + "es" * (count != 1),
            stacklevel=2,
        )
    return count if items is None else max(1, min(count, items))


def processes_for(items: int, per_process: int) -> int:
    """Local worker processes worth starting for ``items`` pieces of work: one for each ``per_process`` of them (a
    process pays about a second to start and import what it runs), at most one per core, at least one."""
    return max(1, min(cores(), items // per_process))


def connect_ray(address: str, cpus: int) -> ModuleType:
    """The ``ray`` module, connected to the cluster at ``address`` (``ray://host:10001``, ``auto``) or to a Ray
    started on this machine with ``cpus`` CPUs (``local``). The workers read inputs at the same paths as this
    process: they must be on storage the cluster shares."""
    try:
        import ray
    except ImportError:
        raise DaydreamError("--ray needs Ray: pip install 'ray[default]' (local worker processes: --jobs N)") from None
    if not ray.is_initialized():
        try:
            ray.init(
                address=None if address == "local" else address,
                ignore_reinit_error=True,
                log_to_driver=False,
                include_dashboard=False,
                num_cpus=cpus if address == "local" else None,
            )
        except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError... by what went wrong
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DaydreamError(f"--ray {address}: no Ray cluster reached ({why})") from None
    return ray


def read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced by a thread of their own up to ``depth`` ahead of the consumer: reading and gunzip
    release the GIL, so a file is read while the text already read is decoded. An exception in the producer is
    raised to the consumer where it would have been; a consumer that stops early (or is closed) stops the producer
    and waits for it, so the file is closed when this returns."""
    queue: Queue[tuple[bool, Any]] = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _put_unless_stopped(queue, stop, (True, item)):
                    break
        except BaseException as exc:  # handed over to be raised in the consumer
            _put_unless_stopped(queue, stop, (False, exc))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        _put_unless_stopped(queue, stop, (False, None))

    thread = threading.Thread(target=produce, name="daydream-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            ok, value = queue.get()
            if ok:
                yield value
            elif value is None:
                return
            else:
                raise value
    finally:
        stop.set()
        thread.join()


def _put_unless_stopped(queue: Queue[tuple[bool, Any]], stop: threading.Event, item: tuple[bool, Any]) -> bool:
    """Put ``item`` once there is room, unless the consumer stops first; whether it was put."""
    while not stop.is_set():
        try:
            queue.put(item, timeout=0.05)
            return True
        except Full:
            continue
    return False
