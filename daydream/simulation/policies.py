"""Schedule policies: which ready task the frontier scheduler runs next (line 9 of Algorithm 1).

A policy gives each ready task a sort key; the smallest key runs first. With only dependency
edges the choice cannot change start times; it matters where tasks share a thread without an
order edge between them (inserted work, or a transform that re-orders communication).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from daydream.errors import DaydreamError


@dataclass(frozen=True, slots=True)
class Policy:
    """``kind``: earliest (earliest possible start first, the paper's default), fifo (in the order
    tasks became ready) or priority (work-conserving: the task that can start first runs first, and among the
    tasks that can start at the same moment, typically several waiting for their thread to free, the smallest
    value of ``attribute``; a free thread never idles for a better-priority task that is not ready yet)."""

    kind: str = "earliest"
    attribute: str | None = None
    descending: bool = False

    @property
    def text(self) -> str:
        """The policy as :func:`parse_policy` reads it."""
        return self.kind if self.kind != "priority" else f"priority:{'-' if self.descending else ''}{self.attribute}"

    def priorities(self, values: Iterable[Any]) -> list[float] | None:
        """Each task's sort key, from its value of ``attribute`` (``values``, in task order; None where it has none:
        read only by a priority policy); None for the other policies."""
        if self.kind != "priority":
            return None
        sign = -1.0 if self.descending else 1.0
        return [sign * float(value) if isinstance(value, (int, float)) else math.inf for value in values]


EARLIEST = Policy()
FIFO = Policy("fifo")


def parse_policy(text: str) -> Policy:
    """``earliest``, ``fifo``, ``priority:ATTR`` or ``priority:-ATTR`` (largest first)."""
    if text in ("earliest", "earliest-start", "earliest_start"):
        return EARLIEST
    if text == "fifo":
        return FIFO
    if text.startswith("priority:") and len(text) > len("priority:"):
        attr = text[len("priority:") :]
        return Policy("priority", attr.lstrip("-"), attr.startswith("-"))
    raise DaydreamError(f"unknown schedule policy {text!r}: use earliest, fifo or priority:ATTRIBUTE")
