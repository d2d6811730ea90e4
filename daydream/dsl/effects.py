"""What running scripts leaves behind: each statement's Effect (summed over a loop's iterations), the warnings and
the printed lines, kept by a Recorder per session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daydream.dsl import ast
from daydream.dsl.limits import MAX_PRINTED, TooLarge


@dataclass
class Effect:
    """What one statement did (summed over the iterations of a loop)."""

    file: str
    line: int
    statement: str
    kind: str
    tasks: int = 0  # tasks touched: scaled, set, removed, or the tasks inserted
    added: int = 0
    removed: int = 0
    duration_delta_us: float = 0.0
    runs: int = 0
    factor: float = 1.0  # `scale samples by F`: the samples per step, multiplied over its runs

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "line": self.line, "statement": self.statement, "kind": self.kind, "tasks": self.tasks,
            "added": self.added, "removed": self.removed, "duration_delta_us": self.duration_delta_us, "runs": self.runs,
        }  # fmt: skip

    def describe(self) -> str:
        parts = []
        if self.kind in ("scale", "set"):
            parts.append(f"{self.tasks:,} task{'s' if self.tasks != 1 else ''}")
            if self.duration_delta_us:
                parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "remove":
            parts.append(f"removed {self.removed:,} task{'s' if self.removed != 1 else ''}")
            if self.duration_delta_us:
                parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "insert":
            parts.append(f"added {self.added:,} task{'s' if self.added != 1 else ''}")
            parts.append(f"{self.duration_delta_us / 1e3:+,.3f} ms of task time")
        elif self.kind == "wait":
            parts.append(f"added {self.added:,} wait{'s' if self.added != 1 else ''}")
        elif self.kind == "schedule":
            parts.append("policy set")
        elif self.kind == "samples":
            parts.append(f"samples per step x{self.factor:g}")
        if self.runs > 1:
            parts.append(f"{self.runs} runs")
        return ", ".join(parts)


class Recorder:
    """Effects by statement position and run (a statement's iterations in one run add up), warnings (each once
    per position and run), printed lines (passed on to ``on_print`` as they come)."""

    def __init__(self, source: Callable[[Any], str], on_print: Callable[[str], None] | None = None) -> None:
        self.source = source  # a node's text, for an Effect's statement
        self.effects: dict[tuple[str, int, int], Effect] = {}
        self.warnings: list[str] = []
        self.printed: list[str] = []
        self.on_print = on_print
        self.run = 0  # scripts run so far: the run a statement's effect and warnings belong to
        self._warned: set[tuple[str, int, int]] = set()
        self.printed_chars = 0  # what print statements printed, against MAX_PRINTED

    def start_run(self) -> set[tuple[str, int, int]]:
        """Begin the next run; returns the keys of the effects before it (see ``since``)."""
        self.run += 1
        return set(self.effects)

    def since(self, before: set[tuple[str, int, int]]) -> list[Effect]:
        return [e for k, e in self.effects.items() if k not in before]

    def effect(self, s: Any, kind: str) -> Effect:
        """The effect of statement ``s`` in this run, counting one more run of it."""
        key = (s.pos.file, s.pos.start, self.run)
        e = self.effects.get(key)
        if e is None:
            e = self.effects[key] = Effect(s.pos.file, s.pos.line, self.source(s), kind)
        e.runs += 1
        return e

    def warn(self, pos: ast.Pos, message: str) -> None:
        key = (pos.file, pos.start, self.run)
        if key not in self._warned:
            self._warned.add(key)
            self.warnings.append(f"{pos.file}:{pos.line}: {message}")

    def print(self, line: str) -> None:
        self.printed_chars += len(line) + 1
        if self.printed_chars > MAX_PRINTED:
            raise TooLarge(f"the scripts printed more than {MAX_PRINTED:,} characters")
        self.printed.append(line)
        if self.on_print is not None:
            self.on_print(line)
