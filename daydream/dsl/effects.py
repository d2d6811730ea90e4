"""What running scripts leaves behind: each statement's Effect (summed over a loop's iterations), the warnings and
the printed lines, kept by a Recorder per session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daydream.dsl import ast
from daydream.dsl.limits import MAX_PRINTED, TooLarge
from daydream.units import ZERO_US, signed_bytes, signed_ms


@dataclass
class Effect:
    """What one statement did (summed over the iterations of a loop): over the window the graph simulates (its
    context steps too) and, apart, over the measured step(s) the step time is the period of (``step_``)."""

    file: str
    line: int
    statement: str
    kind: str
    tasks: int = 0  # tasks touched: scaled, set, removed, or the tasks inserted
    added: int = 0
    removed: int = 0
    duration_delta_us: float = 0.0  # the tasks' time, summed over threads and streams
    runs: int = 0
    factor: float = 1.0  # `scale samples by F`: the samples per step, multiplied over its runs
    step_tasks: int = 0  # of ``tasks``, those of the measured step(s)
    step_duration_delta_us: float = 0.0  # of ``duration_delta_us``, theirs
    context: bool = False  # whether the window holds context steps besides the measured ones
    tensors: int = 0  # a memory statement's tensors (scaled, or allocated)
    memory_delta_bytes: float = 0.0  # the bytes it added to them (over a stretch of their lives, where ``stretch``)
    stretch: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "statement": self.statement,
            "kind": self.kind,
            "tasks": self.tasks,
            "added": self.added,
            "removed": self.removed,
            "duration_delta_us": self.duration_delta_us,
            "runs": self.runs,
            "step_tasks": self.step_tasks,
            "step_duration_delta_us": self.step_duration_delta_us,
            "tensors": self.tensors,
            "memory_delta_bytes": self.memory_delta_bytes,
        }

    def describe(self) -> str:
        """What the statement changed in the measured step (task time summed over threads and streams: what the
        step's time is made of, not the change of the step's time), then, apart, over the whole window."""
        if self.kind == "wait":
            parts = [f"added {self.added:,} wait{'s' if self.added != 1 else ''}"]
        elif self.kind == "schedule":
            parts = ["policy set"]
        elif self.kind == "samples":
            parts = [f"samples per step x{self.factor:g}"]
        elif self.kind == "memory":
            held = " while the stretch lasts" if self.stretch else ""
            parts = [
                f"{self.tensors:,} tensor{'s' if self.tensors != 1 else ''},"
                f" {signed_bytes(self.memory_delta_bytes)}{held}"
            ]
        elif self.kind in ("scale", "set", "remove", "insert"):
            verb = {"remove": "removed ", "insert": "added "}.get(self.kind, "")
            step = _tasks_text(verb, self.step_tasks, self.step_duration_delta_us, self.kind)
            if not self.context:
                parts = [step]
            else:
                window = _tasks_text("", self.tasks, self.duration_delta_us, self.kind).replace(" of task time", "")
                parts = [f"{step} in the step ({window} with its context steps)"]
        else:
            parts = []
        if self.runs > 1:
            parts.append(f"{self.runs} runs")
        return ", ".join(parts)


def _tasks_text(verb: str, n: int, delta_us: float, kind: str) -> str:
    text = f"{verb}{n:,} task{'s' if n != 1 else ''}"
    if kind == "insert" or abs(delta_us) >= ZERO_US:
        text += f", {signed_ms(delta_us)} of task time"
    return text


class Recorder:
    """Effects by statement position and run (a statement's iterations in one run add up), warnings (each once
    per position and run), printed lines (passed on to ``on_print`` as they come)."""

    def __init__(
        self,
        source: Callable[[Any], str],
        on_print: Callable[[str], None] | None = None,
        in_library: Callable[[str], bool] = lambda _file: False,
    ) -> None:
        self.source = source  # a node's text, for an Effect's statement
        self.in_library = in_library  # whether a file is the bundled library's: its no-ops are no news
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

    def noop(self, pos: ast.Pos, message: str) -> None:
        """A statement that does nothing on this trace (a selection that holds no task): a warning where the user's
        own script says it. The library's scripts are written for every trace and skip what a trace lacks, so a
        no-op of theirs is nothing the user could act on: not said."""
        if not self.in_library(pos.file):
            self.warn(pos, message)

    def print(self, line: str) -> None:
        self.printed_chars += len(line) + 1
        if self.printed_chars > MAX_PRINTED:
            raise TooLarge(f"the scripts printed more than {MAX_PRINTED:,} characters")
        self.printed.append(line)
        if self.on_print is not None:
            self.on_print(line)
