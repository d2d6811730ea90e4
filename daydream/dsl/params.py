"""Binding ``param`` statements: the value given to the session for the name (``-p NAME=VALUE``), else the
script's default."""

from __future__ import annotations

from typing import Any

from daydream.dsl import ast
from daydream.dsl.environment import Environment
from daydream.dsl.parse import parse_expression
from daydream.errors import ScriptError
from daydream.files import clip


class ParamBinder:
    """``given``: values by name (numbers, strings, lists, or strings parsed as .whatif expressions); ``used``:
    the given names a script declared; ``values``: every param's value, as bound."""

    def __init__(self, given: dict[str, Any] | None, env: Environment, texts: dict[str, str]) -> None:
        self.given: dict[str, Any] = dict(given or {})
        self.used: set[str] = set()
        self.values: dict[str, Any] = {}
        self.env = env
        self.texts = texts  # a parsed -p value's text joins the scripts', for its error messages

    def bind(self, s: ast.Param) -> Any:
        """The value of ``param NAME = DEFAULT``, recorded in ``values``."""
        if s.name in self.given:
            value = self.given[s.name]
            if isinstance(value, str) and not value.lstrip().startswith('"') and isinstance(self.env.value(s.default), str):
                pass  # a string param: -p link=eth-10g means the text, quotes optional
            elif isinstance(value, str):
                try:
                    expr = parse_expression(value, f"-p {s.name}")
                except ScriptError as exc:
                    raise ScriptError(f"-p {s.name}={clip(value, 100)}: not a value: {str(exc).splitlines()[0]}") from None
                self.texts[f"-p {s.name}"] = value
                value = self.env.value(expr)
            self.used.add(s.name)
        else:
            value = self.env.value(s.default)
        self.values[s.name] = value
        return value

    def unused(self) -> list[str]:
        """Given names that no script run so far declared."""
        return sorted(set(self.given) - self.used)

