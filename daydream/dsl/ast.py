"""The syntax tree of a .whatif script: plain frozen dataclasses, each with the position it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Pos:
    """Where a node starts: file, 1-based line and column, and the character offsets of its text."""

    file: str
    line: int
    column: int
    start: int = 0
    end: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


# ---- expressions -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any  # float | int | str | bool | None; quantities already in microseconds or bytes
    pos: Pos
    text: str = ""


@dataclass(frozen=True, slots=True)
class Name:
    id: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class ListExpr:
    items: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Select:
    kind: str | None
    where: Expr | None
    pos: Pos
    kind_pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-", "+", "not"
    operand: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # or and | & + - * / % ** == != < <= > >= ~ !~ in "not in"
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Project:
    """``obj.attr``: a task attribute's values over a selection."""

    obj: Expr
    attr: str
    pos: Pos
    attr_pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Index:
    obj: Expr
    index: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Expr], ...]
    pos: Pos


Expr = Literal | Name | ListExpr | Select | Unary | Binary | Project | Index | Call


# ---- statements --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Docstring:
    text: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    default: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    value: Expr | Insert  # `let x = insert ...` binds the inserted task (a one-task selection)
    pos: Pos


@dataclass(frozen=True, slots=True)
class Scale:
    """``scale TARGET by FACTOR``: a selection's durations, the samples a step processes (``samples``), or tensors'
    bytes (``tensors(...)``), these over a stretch of their lives where ``after TASK`` / ``until TASK`` say."""

    target: Expr
    factor: Expr
    pos: Pos
    after: Expr | None = None
    until: Expr | None = None


@dataclass(frozen=True, slots=True)
class Alloc:
    """``alloc BYTES [as CATEGORY] [after TASK] [until TASK]``: a tensor the change adds to the step's memory."""

    nbytes: Expr
    category: Expr | None
    after: Expr | None
    until: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class SetAttr:
    target: Project
    value: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Remove:
    target: Expr
    with_launches: bool
    pos: Pos


@dataclass(frozen=True, slots=True)
class Insert:
    kind: str
    name: Expr  # a string literal, or an expression giving a string (`k.name[0]`)
    side: str  # "before" | "after"
    anchor: Expr
    duration: Expr | None
    on: Expr | None
    launch: Expr | None
    attrs: tuple[tuple[str, Expr], ...]
    pos: Pos
    kind_pos: Pos | None = None
    queued: bool = False  # no fixed place in its thread's order: the schedule policy picks it among the waiting


@dataclass(frozen=True, slots=True)
class Schedule:
    policy: str
    priority: Expr | None
    pos: Pos
    policy_pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """``wait WAITERS for SOURCES``: each task of ``waiters`` waits for every task of ``sources``."""

    waiters: Expr
    sources: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class For:
    var: str
    iterable: Expr
    by: str | None
    body: tuple[Statement, ...]
    pos: Pos
    by_pos: Pos | None = None


@dataclass(frozen=True, slots=True)
class If:
    test: Expr
    body: tuple[Statement, ...]
    orelse: tuple[Statement, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Include:
    path: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Require:
    """``require TEST, WHY``: the script applies only to a trace where TEST holds (else: NotApplicable)."""

    test: Expr
    message: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class Assert:
    test: Expr
    message: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class Print:
    values: tuple[Expr, ...]
    pos: Pos


Statement = (
    Docstring
    | Param
    | Let
    | Scale
    | Alloc
    | SetAttr
    | Remove
    | Insert
    | Schedule
    | Wait
    | For
    | If
    | Include
    | Require
    | Assert
    | Print
)


@dataclass(frozen=True)
class Script:
    """A parsed script: its file name (or ``<stdin>``, ``<repl>``), text and statements."""

    file: str
    text: str
    statements: tuple[Statement, ...]
    docstring: str | None = None
    comments: tuple[str, ...] = field(default_factory=tuple)

    def source(self, node: Any) -> str:
        """The text of a statement or expression."""
        return self.text[node.pos.start : node.pos.end]

    @property
    def params(self) -> list[Param]:
        return [s for s in self.statements if isinstance(s, Param)]
