"""How much memory a command may plan to use: the bound a trace's load checks its estimate against before it builds
anything (daydream.trace.load), so that a small file of many tiny events is refused in one line instead of taking
the machine (a 7.7 MB .gz of 1 GiB of tiny events reached 5.6 GB).

The limit is ``FRACTION`` of the least of: the memory the system says is available (``MemAvailable``), the cgroup's
limit less what it holds (a container's), and the address space the process may still map (``RLIMIT_AS``, as
``prlimit --as`` or ``ulimit -v`` set it). The rest is left for what the estimate does not see (the Python
interpreter's own, a report's figures, another command on the same machine). ``DAYDREAM_MEMORY_LIMIT`` sets another
(``16G``, ``512M``, bytes; ``none``: no limit).
"""

from __future__ import annotations

import os
import re
import resource

from daydream.errors import DaydreamError

ENV = "DAYDREAM_MEMORY_LIMIT"
FRACTION = 0.75
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def memory_limit() -> int | None:
    """The bytes a command may plan to use (None: no limit: ``DAYDREAM_MEMORY_LIMIT=none``, or nothing known)."""
    given = os.environ.get(ENV)
    if given is not None and given.strip():
        if given.strip().lower() in ("none", "off", "0"):
            return None
        m = _SIZE.match(given)
        if m is None:
            raise DaydreamError(f"{ENV}={given!r}: give a size such as 16G, 512M or a number of bytes (or none)")
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    known = [x for x in (_available(), _cgroup_left(), _address_space_left()) if x is not None]
    return int(FRACTION * min(known)) if known else None


def describe_limit() -> str:
    """Where the limit comes from, for a message: how to raise it."""
    if os.environ.get(ENV, "").strip():
        return f"{ENV} sets it"
    return f"{FRACTION:.0%} of the memory available to this process; {ENV}=SIZE (16G) sets another, none removes it"


def _available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_left() -> int | None:
    """A cgroup v2 limit less its current use (None where there is none, or it is not readable)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            path = next((line.strip().split(":", 2)[2] for line in fh if line.startswith("0::")), None)
        if path is None:
            return None
        base = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
        with open(os.path.join(base, "memory.max"), encoding="utf-8") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(base, "memory.current"), encoding="utf-8") as fh:
            current = int(fh.read().strip())
        return max(0, int(limit) - current)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _address_space_left() -> int | None:
    """RLIMIT_AS less the address space the process maps already (its VmSize)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = 0
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    mapped = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - mapped)
