"""What a script may make the interpreter do: the size of what it reads and makes, and the work it may do.

A script is data. Each limit below turns input that would otherwise take unbounded time or memory (or crash the
interpreter: a recursion too deep, a number too long to print) into a ScriptError at the line that hit it. The
values are documented in docs/language.md ("Limits"); each is checked where the thing it bounds is made, before the
work is done.
"""

from __future__ import annotations

import math
from typing import Any

from daydream.errors import DaydreamError

# ---- reading scripts -----------------------------------------------------------------------------------------

# A script file (the one run and each include; a REPL input, a -p value: as many characters). 20 times the largest
# bundled script; lark parses the densest script of this size (`[1,1,1,...]`) in a few seconds.
MAX_SCRIPT_BYTES = 256 * 1024
MAX_NESTING = 100  # brackets ( [ { open at once; and the depth of the syntax tree: blocks, and operators chained
MAX_NUMBER_LITERAL = 100  # characters of one number literal (10**100 has 101: whole numbers stay far below 2**1000)
MAX_STRING_LITERAL = 100_000  # characters of one string literal ("..." or a """...""" block)
MAX_INCLUDE_DEPTH = 16  # scripts including scripts including scripts...
MAX_SHOWN_LINE = 200  # characters of a source line an error message shows (around the column it points at)
MAX_MESSAGE = 1_000  # characters of an error message's text (a quoted name, a value), before the source line

# ---- values a script makes -----------------------------------------------------------------------------------

MAX_INT_BITS = 1_000  # a whole number: at most 1,000 bits (about 1e301), so every one converts to a float
MAX_STRING = 1_000_000  # characters of a string made by + or *
MAX_LIST = 10_000_000  # a list's size: its items, those of the lists in it, and the characters of its strings
# the values a run's names hold, together, in estimated bytes (Scope): 4,500 names bound to 1 MB strings each held
# 4.5 GB; each value is at most MAX_STRING or MAX_LIST, this bounds how many of them are kept
MAX_VALUE_BYTES = 1024**3
MAX_TIME_US = 1e15  # a duration, gap or launch time set or inserted (microseconds: about 31 years)
MAX_PATTERN = 10_000  # characters of a regular expression
MAX_PRINTED = 10_000_000  # characters printed by one session's print statements

# ---- work ------------------------------------------------------------------------------------------------------

# A run may do a budget of units of work; a unit is at most about a microsecond of the interpreter's time, whatever the
# work (bench/bench_budget.py measures each kind on a 130k-task graph and fails past MAX_US_PER_UNIT). Each task or
# list item a statement or an expression goes over costs 1 (a scale factor on a task, an item of a list made, a task
# of a selection read, a loop iteration); a where-clause costs task_cost units per task it tests (1, plus 1 per
# TERMS_PER_UNIT more operations, plus REGEX_COST per regular expression), and SELECT_COST for the select itself; each
# statement
# executed or checked costs STATEMENT_COST (a few microseconds); simulating the changed graph for `predicted`
# SIMULATION_COST per task; an insert INSERT_COST, and an insert or a wait 1 per task the repair of the graph's order
# goes over (an insert between two tasks already split many times moves the whole stretch); a string made by + or *
# a unit per STRING_BULK characters (C copies them).
#
# The default budget is a minute of work (BUDGET_FLOOR) on the graphs people trace, and BUDGET_PASSES units per task
# of a larger graph (at most 400 s on 1M tasks, where the heaviest bundled scripts take about a minute): every bundled
# script fits it on every shared trace and on the 1M-event tiling (bench_budget.py's second table), and a runaway
# loop stops within a minute on a graph of up to 150k tasks. --budget N (Python API: budget=N) sets another.
BUDGET_FLOOR = 60_000_000
BUDGET_PASSES = 400
STATEMENT_COST = 10
SIMULATION_COST = 10
BULK = 8  # work done in bulk by Python itself (set operations, joining strings): 1 unit per BULK items
INSERT_COST = 200  # an insert's fixed work (its task and launch call, their edges, the cycle check): ~200 us
STRING_BULK = 1024  # a string made by + or *: 1 unit per STRING_BULK characters
TERMS_PER_UNIT = 3
REGEX_COST = 1
SELECT_COST = 30  # a select's fixed work (an index lookup, the selection made): ~30 us however few tasks it finds


def default_budget(tasks: int) -> int:
    """The budget of a run on a graph of ``tasks`` tasks when none is given."""
    return max(BUDGET_FLOOR, BUDGET_PASSES * tasks)


class OverBudget(DaydreamError):
    """The work budget ran out; the executor turns it into a ScriptError at the statement that was running."""


class Budget:
    """Units of work left to a run: ``charge(n)`` spends n units and raises OverBudget past ``limit``."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int | None = None, tasks: int = 0) -> None:
        if limit is None:
            limit = default_budget(tasks)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise DaydreamError(f"the work budget is a whole number of units >= 1, not {limit!r}")
        self.limit = limit
        self.used = 0

    def reset(self) -> None:
        self.used = 0

    def charge(self, units: int) -> None:
        self.used += units
        if self.used > self.limit:
            raise OverBudget(self.message())

    def message(self) -> str:
        return (
            f"work budget exceeded: the run did more than {self.limit:,} units of work (a unit is at most about a"
            f" microsecond: a statement is {STATEMENT_COST} units, each task, list item or loop iteration 1, a"
            f" where-clause more per task; by default a run may do {BUDGET_FLOOR:,} units, or {BUDGET_PASSES:,} per"
            " task of a larger graph); a script that needs more can be given a larger budget with --budget N (Python"
            " API: budget=N)"
        )


# the budgets of the DSL function calls running now, innermost last (daydream.dsl.evaluate pushes the script's
# around each call): where a function's work depends on its arguments' values (a search over plans), it charges that
# work as it does it, with charge_work
RUNNING: list[Budget] = []


def charge_work(units: int) -> None:
    """Charge ``units`` of work done by the DSL function running now to its script's budget (OverBudget past it);
    nothing where no script called it (the Python API, a command's own use)."""
    if RUNNING:
        RUNNING[-1].charge(units)


# ---- checks on values --------------------------------------------------------------------------------------------


class TooLarge(DaydreamError):
    """A value over one of the limits above (the message says which)."""


def check_int(value: int) -> int:
    if value.bit_length() > MAX_INT_BITS:
        raise TooLarge(f"a whole number of more than {MAX_INT_BITS:,} bits (about 1e301): too large")
    return value


def check_string_length(n: int) -> None:
    if n > MAX_STRING:
        raise TooLarge(f"a string of {n:,} characters: strings hold at most {MAX_STRING:,}")


def check_list_size(n: int) -> None:
    if n > MAX_LIST:
        raise TooLarge(
            f"a list of size {n:,}: a list holds at most {MAX_LIST:,} (its items, those of the lists in it, "
            "and the characters of its strings)"
        )


def value_size(value: Any, cap: int = MAX_LIST) -> int:
    """The size of a value as MAX_LIST counts it (1 for a number, boolean, none or selection, a string's length, a
    list's items' sizes plus one per item); raises TooLarge past ``cap`` or for lists nested deeper than
    MAX_NESTING. Iterative: a deep value cannot exhaust the stack."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, list):
        return 1
    size = 0
    stack: list[tuple[list[Any], int]] = [(value, 1)]
    while stack:
        items, depth = stack.pop()
        if depth > MAX_NESTING:
            raise TooLarge(f"lists nested more than {MAX_NESTING} deep")
        size += len(items)
        for x in items:
            if isinstance(x, list):
                stack.append((x, depth + 1))
            elif isinstance(x, str):
                size += len(x)
        if size > cap:
            raise TooLarge(
                f"a list of size over {cap:,}: a list holds at most {cap:,} (its items, those of the lists in "
                "it, and the characters of its strings)"
            )
    return size


# estimated bytes of what a value holds (value_bytes): a character 1 (ASCII strings), a list item a pointer and the
# number it usually is, a selection's task an entry of its set
ITEM_BYTES = 32
TASK_BYTES = 16


def value_bytes(value: Any) -> int:
    """About how many bytes ``value`` holds: its characters, its items (value_size's count, weighted), a
    selection's tasks."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, list):
        length = getattr(value, "__len__", None)
        return TASK_BYTES * length() if length is not None else ITEM_BYTES  # a selection, tensors; a number
    total, stack = 0, [value]  # iterative, as value_size: the lists were bounded in depth and size when made
    while stack:
        items = stack.pop()
        total += ITEM_BYTES * len(items)
        for x in items:
            kind = type(x)
            if kind in _SCALARS:  # the usual item: nothing more than its ITEM_BYTES
                continue
            if kind is list:
                stack.append(x)
            elif kind is str:
                total += len(x)
            elif hasattr(x, "__len__"):
                total += TASK_BYTES * len(x)
    return total


_SCALARS = frozenset({int, float, bool, type(None)})


class Scope(dict[str, Any]):
    """A run's names and their values, with the bytes they hold (``held``) kept within MAX_VALUE_BYTES: binding a
    value that would pass it raises TooLarge (the statement's error, at its line and column). A value bound to
    several names counts once per name (an over-estimate, never an under-one)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        self._sizes: dict[str, int] = {}

    def __setitem__(self, name: str, value: Any) -> None:
        size = value_bytes(value)
        held = self.held - self._sizes.get(name, 0) + size
        if held > MAX_VALUE_BYTES:
            raise TooLarge(
                f"the script's values would hold about {held / 2**20:,.0f} MiB (binding {name!r}, about "
                f"{size / 2**20:,.1f} MiB): a run's names hold at most {MAX_VALUE_BYTES / 2**20:,.0f} MiB in all"
            )
        super().__setitem__(name, value)
        self._sizes[name] = size
        self.held = held

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self.held -= self._sizes.pop(name, 0)

    def pop(self, name: str, *default: Any) -> Any:  # type: ignore[override]
        self.held -= self._sizes.pop(name, 0)
        return super().pop(name, *default)


def finite(value: Any) -> bool:
    """Whether a number is finite (an int always is; None and non-numbers count as finite: nothing to refuse)."""
    return not isinstance(value, float) or math.isfinite(value)
