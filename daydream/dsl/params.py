"""Binding ``param`` statements: the value given to the session for the name (``-p NAME=VALUE``), else the
script's default. A name may be given for one script of several: ``-p ddp.link=ib-ndr`` binds ``link`` in
ddp.whatif alone (its file's name without .whatif), ahead of a plain ``-p link=...``."""

from __future__ import annotations

import os
import re
from typing import Any

from daydream.dsl import ast
from daydream.dsl.environment import Environment
from daydream.dsl.functions import type_name
from daydream.dsl.parse import parse_expression
from daydream.dsl.values import format_quantity, format_value
from daydream.errors import ScriptError
from daydream.files import MAX_INPUT_NUMBER, clip, shown_number

_UNIT = re.compile(r"\d(ns|us|ms|s|min|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")


class CommandLineParams(dict):  # type: ignore[type-arg]
    """Params as the command line gives them (``-p NAME=VALUE``): errors about them say ``-p NAME=VALUE``; a plain dict
    is the Python API's ``params``, and errors say ``params['NAME']``."""


class ParamBinder:
    """``given``: values by name (numbers, strings, lists, or strings parsed as .whatif expressions); ``used``:
    the given names a script declared; ``values``: every param's value, as bound."""

    def __init__(self, given: dict[str, Any] | None, env: Environment, texts: dict[str, str]) -> None:
        self.given: dict[str, Any] = dict(given or {})
        self.command_line = isinstance(given, CommandLineParams)  # how the caller gave them, for error messages
        self.used: set[str] = set()
        self.values: dict[str, Any] = {}
        self.units: dict[str, str] = {}  # the unit a param's default was written in (``25MiB``: MiB), where it has one
        self.scripts: dict[str, dict[str, Any]] = {}  # each param's value by the script that bound it (two may differ)
        self.env = env
        self.texts = texts  # a parsed -p value's text joins the scripts', for its error messages

    def key(self, s: ast.Param) -> str | None:
        """The given name that binds ``param NAME``: ``SCRIPT.NAME`` for its script, else ``NAME``; None: neither."""
        scoped = f"{script_name(s.pos.file)}.{s.name}"
        return scoped if scoped in self.given else s.name if s.name in self.given else None

    def bind(self, s: ast.Param) -> Any:
        """The value of ``param NAME = DEFAULT``, recorded in ``values``."""
        key = self.key(s)
        if key is not None:
            value = self.given[key]
            if not isinstance(value, str):
                self.check_given(key, value)
            if (
                isinstance(value, str)
                and not value.lstrip().startswith('"')
                and isinstance(self.env.value(s.default), str)
            ):
                pass  # a string param: -p link=eth-10g means the text, quotes optional
            elif isinstance(value, str):
                label = self.origin(key)
                try:
                    expr = parse_expression(value, label)
                except ScriptError as exc:
                    raise ScriptError(f"{self.origin(key, value)}: not a value: {str(exc).splitlines()[0]}") from None
                self.texts[label] = value
                if isinstance(expr, ast.Literal) and (m := _UNIT.search(expr.text or "")):
                    self.units[s.name] = m.group(1)  # shown as given: -p bucket_cap=10MB is 10 MB
                default = self.env.value(s.default)
                if isinstance(expr, ast.Name) and not self.env.knows(expr.id):
                    if default is not None:  # a bare word where the default says what is wanted: say that
                        raise ScriptError(
                            f"{self.origin(key, value)}: {s.name} takes {type_name(default)} (its default: "
                            f"{format_quantity(default, self.units.get(s.name))}), not the word {expr.id!r}"
                        )
                    value = expr.id  # a bare word for a param whose default is none is its text: -p dtype=bf16
                else:
                    value = self.env.value(expr)
            self.used.add(key)
        else:
            value = self.env.value(s.default)
        self.values[s.name] = value
        self.scripts.setdefault(s.name, {})[script_name(s.pos.file)] = value
        if (
            s.name not in self.units
            and isinstance(s.default, ast.Literal)
            and (m := _UNIT.search(s.default.text or ""))
        ):
            self.units[s.name] = m.group(1)
        return value

    def check_given(self, key: str, value: Any) -> None:
        """A value given as data (a scenarios file's params, the Python API's), not as text: its numbers, in lists
        too, finite and at most MAX_INPUT_NUMBER in magnitude, as a file's numbers are (a 400-digit int would overflow
        the floats it is turned into; inf would make every time 0 or inf)."""
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, (list, tuple)):
                stack.extend(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and not abs(v) <= MAX_INPUT_NUMBER:
                raise ScriptError(
                    f"{self.origin(key)}: {shown_number(v)}: a number given is finite and at most 10^18 in magnitude"
                )

    def origin(self, key: str, value: Any = None) -> str:
        """How the caller gave param ``key`` (with its value where given): ``-p factor=two`` on the command line,
        ``params['factor'] = 'two'`` through the Python API."""
        if self.command_line:
            return f"-p {key}" + (
                "" if value is None else f"={clip(value if isinstance(value, str) else format_value(value), 100)}"
            )
        return f"params[{key!r}]" + ("" if value is None else f" = {clip(repr(value), 100)}")

    def shown(self) -> dict[str, str]:
        """Every param as bound, as a person reads it: in its default's unit (``bucket_cap = 25 MiB``); a name two
        scripts bound to different values, each with its script (``dtype = fp16 (amp), none (device)``)."""
        out = {}
        for name, v in self.values.items():
            each = {
                script: format_quantity(x, self.units.get(name)) for script, x in self.scripts.get(name, {}).items()
            }
            if len(set(each.values())) > 1:
                out[name] = ", ".join(f"{text} ({script})" for script, text in each.items())
            else:
                out[name] = format_quantity(v, self.units.get(name))
        return out

    def unused(self) -> list[str]:
        """Given names that no script run so far declared."""
        return sorted(set(self.given) - self.used)


def script_name(file: str) -> str:
    """How a -p name scopes a script: its file's name without .whatif (``ddp`` for .../ddp.whatif)."""
    return os.path.basename(file).removesuffix(".whatif")
