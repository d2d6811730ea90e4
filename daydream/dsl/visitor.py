"""One way to walk the syntax tree: a visitor dispatches on a node's class to the method named after it.

The checker (check.py), the expression compiler (evaluate.py) and the statement executor (execute.py) are
visitors: ``visit(node, *args)`` calls ``visit_Scale(node, *args)`` for an ``ast.Scale``. The table from node
class to method is built once per visitor class, when the class is defined, so a visit is one dict lookup.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from daydream.dsl import ast

R = TypeVar("R")

# Every class of node a script's syntax tree holds.
NODE_CLASSES: tuple[type, ...] = (*typing.get_args(ast.Expr), *typing.get_args(ast.Statement))


class Visitor(Generic[R]):
    """Base of the tree walkers. A subclass defines ``visit_<NodeClass>(self, node, *args)`` for the nodes it
    handles; a node class without its method goes to ``generic_visit``, which raises unless overridden."""

    _methods: ClassVar[dict[type, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {node: getattr(cls, f"visit_{node.__name__}", cls.generic_visit) for node in NODE_CLASSES}

    def visit(self, node: Any, *args: Any) -> R:
        try:
            method = self._methods[node.__class__]
        except KeyError:
            method = type(self).generic_visit
        return method(self, node, *args)  # type: ignore[no-any-return]

    def generic_visit(self, node: Any, *args: Any) -> R:
        raise TypeError(f"{type(self).__name__} has no visit_{type(node).__name__}")
