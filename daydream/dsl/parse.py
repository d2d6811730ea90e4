"""Parsing .whatif text into a Script: lark's LALR parser over grammar/whatif.lark, a Transformer to the AST,
and parse errors that show the line, a caret, what was expected and the likely fix."""

from __future__ import annotations

import difflib
import functools
import re
import threading
from dataclasses import replace
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from daydream.dsl import ast
from daydream.errors import ScriptError

TIME_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "min": 6e7}
BYTE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
STATEMENT_KEYWORDS = ("param", "let", "scale", "set", "remove", "insert", "schedule", "wait", "for", "if", "include", "assert", "print")
KEYWORDS = frozenset(STATEMENT_KEYWORDS) | {
    "select", "where", "by", "in", "and", "or", "not", "true", "false", "none", "with", "launches", "launch", "queued", "on", "duration",
}  # fmt: skip
_QUANTITY = re.compile(r"(.*?)([A-Za-z]+)$")
# Tokens that carry a value; the others (keywords, punctuation) only delimit.
_VALUE_TOKENS = frozenset({"NAME", "STRING", "LONG_STRING", "NUMBER", "QUANTITY", "ANCHOR"})
_TOKEN_WORDS = {
    "NAME": "a name",
    "STRING": "a string",
    "LONG_STRING": "a string",
    "NUMBER": "a number",
    "QUANTITY": "a number with a unit",
    "ANCHOR": "'before' or 'after'",
    "_NL": "end of line",
    "$END": "end of input",
}


_TRANSFORMER: _ToAst | None = None
_LOCK = threading.Lock()


@functools.cache
def _parser() -> Lark:
    global _TRANSFORMER
    grammar = files("daydream").joinpath("grammar", "whatif.lark").read_text(encoding="utf-8")
    # The transformer runs inside the parser, building the AST without an intermediate tree.
    _TRANSFORMER = _ToAst("<script>")
    return Lark(grammar, parser="lalr", maybe_placeholders=True, transformer=_TRANSFORMER, start=["start", "expr"])


def parse_script(text: str, file: str = "<script>") -> ast.Script:
    """Parse a whole script. Raises ScriptError with the position and a caret on bad input."""
    parser = _parser()
    assert _TRANSFORMER is not None
    with _LOCK:
        _TRANSFORMER.file = file  # positions are stamped with the file being parsed
        try:
            statements = parser.parse(text if text.endswith("\n") else text + "\n", start="start")
        except UnexpectedInput as exc:
            raise _parse_error(exc, text, file) from None
        except _BadLiteral as exc:
            raise script_error(str(exc), exc.pos, text) from None
    docstring = None
    for i, s in enumerate(statements):
        if isinstance(s, ast.Docstring):
            if i != 0:
                raise script_error("a string on its own does nothing; only the first statement may be a docstring", s.pos, text)
            docstring = s.text
    return ast.Script(file, text, tuple(statements), docstring, tuple(_comments(text)))


def parse_expression(text: str, file: str = "<expression>") -> ast.Expr:
    """Parse one expression (a ``-p name=value`` value, a REPL ``:show`` argument)."""
    parser = _parser()
    assert _TRANSFORMER is not None
    with _LOCK:
        _TRANSFORMER.file = file
        try:
            return parser.parse(text, start="expr")  # type: ignore[no-any-return]
        except UnexpectedInput as exc:
            raise _parse_error(exc, text, file) from None
        except _BadLiteral as exc:
            raise script_error(str(exc), exc.pos, text) from None


def _comments(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            out.append(stripped[1:].strip())
        elif stripped:
            break
    return out


# ---- errors -----------------------------------------------------------------------------------------------


def script_error(message: str, pos: ast.Pos | None, text: str | None = None, hint: str | None = None, width: int | None = None) -> ScriptError:
    """A ScriptError that reads ``file:line:col: message``, then the line with a caret under the spot."""
    if pos is None:
        return ScriptError(message + (f"\n  {hint}" if hint else ""))
    out = [f"{pos}: {message}"]
    if text is not None:
        lines = text.splitlines()
        if 0 < pos.line <= len(lines):
            line = lines[pos.line - 1].replace("\t", " ")
            n = width if width is not None else max(1, min(pos.end - pos.start, len(line) - pos.column + 1))
            gutter = f"{pos.line:>4} | "
            out.append(gutter + line)
            out.append(" " * (len(gutter) - 2) + "| " + " " * (pos.column - 1) + "^" * max(1, n))
    if hint:
        out.append(f"  {hint}")
    return ScriptError("\n".join(out))


_OPERATORS = frozenset({"==", "!=", "<", "<=", ">", ">=", "~", "!~", "+", "-", "*", "/", "%", "**", "&", "|", ".", "(", "["})


def _describe_expected(names: set[str]) -> list[str]:
    parser = _parser()
    words = set()
    operators = False
    for n in names:
        if n in _TOKEN_WORDS:
            words.add(_TOKEN_WORDS[n])
            continue
        if n.lower() in KEYWORDS:
            words.add(f"'{n.lower()}'")
            continue
        try:
            pattern = parser.get_terminal(n).pattern
        except KeyError:
            words.add(n)
            continue
        if pattern.type == "str" and pattern.value in _OPERATORS and len(names) > 4:
            operators = True
            continue
        words.add(f"'{pattern.value}'" if pattern.type == "str" else n.lower())
    statements = {f"'{k}'" for k in STATEMENT_KEYWORDS}
    if len(words & statements) >= 5:
        words = (words - statements) | {"a statement"}
    if "end of line" in words:
        words.discard("end of input")
    # Keywords first, then punctuation, then kinds of token.
    out = sorted(words, key=lambda w: (not w[1:-1].isidentifier(), w.startswith("a") or w.startswith("end"), w))
    return out + (["an operator"] if operators else [])


def _keyword_options(names: set[str]) -> list[str]:
    out = [n.lower() for n in names if n.lower() in KEYWORDS]
    return out + (["before", "after"] if "ANCHOR" in names else [])


def _parse_error(exc: UnexpectedInput, text: str, file: str) -> ScriptError:
    line, column = getattr(exc, "line", -1), getattr(exc, "column", -1)
    if isinstance(exc, UnexpectedEOF) or line in (None, -1):
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    offset = _offset(text, line, column)
    hint = None
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = set(exc.accepts or exc.expected)
        if tok.type == "$END":
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
            offset = _offset(text, line, column)
        if tok.type == "$END" or tok.type == "_NL":
            what = "end of line" if tok.type == "_NL" else "end of input"
            message = f"the statement is not finished: expected {_join(_describe_expected(expected))}"
            pos = ast.Pos(file, line, column, offset, offset + 1)
            if "RBRACE" in expected or "}" in _describe_expected(expected) or "'}'" in _describe_expected(expected):
                hint = "a block opened with '{' needs its closing '}'"
            return script_error(f"unexpected {what}; " + message.split(": ", 1)[1], pos, text, hint)
        shown = str(tok)
        pos = ast.Pos(file, line, column, offset, offset + len(shown))
        kind = _TOKEN_WORDS.get(tok.type, "")
        what = f"{kind.split(' ', 1)[1]} {shown!r}" if kind.startswith("a ") else repr(shown)
        options = _keyword_options(expected)
        if tok.type == "NAME" and "PARAM" in expected and "LET" in expected:
            close = difflib.get_close_matches(shown, STATEMENT_KEYWORDS, n=1, cutoff=0.6)
            message = f"unknown statement {shown!r}: a statement starts with {_join([repr(k) for k in STATEMENT_KEYWORDS], limit=None)}"
            return script_error(message, pos, text, f"did you mean '{close[0]}'?" if close else None)
        if tok.type in ("NAME", *(k.upper() for k in KEYWORDS)) and options:
            close = difflib.get_close_matches(shown, options, n=1, cutoff=0.6)
            if close:
                hint = f"did you mean '{close[0]}'?"
        if shown == "=":
            hint = "compare with '=='; '=' only binds (param, let, set, with)"
        described = _describe_expected(expected)
        message = f"unexpected {what}" + (f"; expected {_join(described)}" if described else "; expected the end of the expression")
        return script_error(message, pos, text, hint)
    if isinstance(exc, UnexpectedCharacters):
        ch = text[offset] if offset < len(text) else ""
        pos = ast.Pos(file, line, column, offset, offset + 1)
        if ch in "\"'":
            return script_error("unterminated string: a string ends on the line it starts (use \"\"\" for several lines)", pos, text)
        if ch == "=" and text[offset : offset + 2] != "==":
            hint = "compare with '=='; '=' only binds (param, let, set, with)"
        if ch == "!" and text[offset : offset + 2] not in ("!=", "!~"):
            hint = "negate with 'not'"
        # What the lexer allowed here is not what the parser expects: name only the character.
        return script_error(f"unexpected character {ch!r}", pos, text, hint)
    expected = _describe_expected(set(getattr(exc, "expected", ()) or ()))
    pos = ast.Pos(file, line, column, offset, offset + 1)
    return script_error("unexpected end of input" + (f"; expected {_join(expected)}" if expected else ""), pos, text)


def _join(words: list[str], limit: int | None = 12) -> str:
    if limit is not None and len(words) > limit:
        words = words[:limit] + ["..."]
    return ", ".join(words) if len(words) < 2 else ", ".join(words[:-1]) + " or " + words[-1]


def _offset(text: str, line: int, column: int) -> int:
    if line < 1:
        return 0
    pos = 0
    for _ in range(line - 1):
        nl = text.find("\n", pos)
        if nl < 0:
            return len(text)
        pos = nl + 1
    return pos + max(0, column - 1)


# ---- tree to AST ------------------------------------------------------------------------------------------


class _BadLiteral(Exception):
    def __init__(self, message: str, pos: ast.Pos) -> None:
        super().__init__(message)
        self.pos = pos


def unescape(body: str) -> str:
    """Backslash escapes: \\" \\' \\\\ \\n \\t; any other backslash stays, so regular expressions read as written."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in "\"'\\":
                out.append(n)
                i += 2
                continue
            if n in "nt":
                out.append("\n" if n == "n" else "\t")
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)


def quantity_value(text: str) -> float:
    """``10us`` -> 10.0 (microseconds), ``2ms`` -> 2000.0, ``1MB`` -> 1e6 (bytes)."""
    m = _QUANTITY.match(text)
    assert m is not None
    number, unit = m.groups()
    if unit in TIME_UNITS_US:
        return float(number) * TIME_UNITS_US[unit]
    return float(number) * BYTE_UNITS[unit]


class _ToAst(Transformer):
    """lark tree -> ast nodes. Each node's Pos spans its first to its last token."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    # positions
    def _pos(self, first: Any, last: Any | None = None) -> ast.Pos:
        last = first if last is None else last
        if isinstance(first, Token):
            line, column, start = first.line, first.column, first.start_pos
        else:
            p = first.pos
            line, column, start = p.line, p.column, p.start
        end = last.end_pos if isinstance(last, Token) else last.pos.end
        return ast.Pos(self.file, line, column, start, end)

    def _span(self, children: list[Any]) -> ast.Pos:
        present = [c for c in children if c is not None and (isinstance(c, Token) or hasattr(c, "pos"))]
        return self._pos(present[0], present[-1])

    @staticmethod
    def _values(children: list[Any]) -> list[Any]:
        return [c for c in children if c is not None and not (isinstance(c, Token) and c.type not in _VALUE_TOKENS)]

    # script
    def start(self, children: list[Any]) -> list[Any]:
        return [c for c in children if c is not None]

    def block(self, children: list[Any]) -> tuple[list[Any], Token]:
        body = [c for c in children if c is not None and not isinstance(c, Token)]
        for s in body:
            if isinstance(s, ast.Docstring):
                raise _BadLiteral("a string on its own does nothing; only the first statement may be a docstring", s.pos)
        return body, children[-1]

    def docstring(self, children: list[Any]) -> ast.Docstring:
        tok = children[0]
        body = tok[3:-3] if tok.type == "LONG_STRING" else unescape(tok[1:-1])
        return ast.Docstring(_dedent(body), self._pos(tok))

    # statements
    def param(self, c: list[Any]) -> ast.Param:
        name, value = self._values(c)
        return ast.Param(str(name), value, self._span(c))

    def let(self, c: list[Any]) -> ast.Let:
        name, value = self._values(c)
        return ast.Let(str(name), value, self._span(c))

    def scale(self, c: list[Any]) -> ast.Scale:
        target, factor = self._values(c)
        return ast.Scale(target, factor, self._span(c))

    def set(self, c: list[Any]) -> ast.SetAttr:
        target, value = self._values(c)
        if not isinstance(target, ast.Project):
            raise _BadLiteral("set needs a selection's attribute on the left: set SELECTION.ATTRIBUTE = VALUE", target.pos)
        return ast.SetAttr(target, value, self._span(c))

    def with_launches(self, c: list[Any]) -> Token:
        return c[-1]

    def remove(self, c: list[Any]) -> ast.Remove:
        target = self._values(c)[0]
        return ast.Remove(target, c[-1] is not None, self._span(c))

    def duration_clause(self, c: list[Any]) -> tuple[str, Any]:
        return ("duration", c[-1])

    def on_clause(self, c: list[Any]) -> tuple[str, Any]:
        return ("on", c[-1])

    def launch_clause(self, c: list[Any]) -> tuple[str, Any]:
        return ("launch", c[-1])

    def queued_clause(self, c: list[Any]) -> tuple[str, Any]:
        return ("queued", c[-1])

    def attribute(self, c: list[Any]) -> tuple[str, Any, ast.Pos]:
        return (str(c[0]), c[-1], self._pos(c[0]))

    def with_clause(self, c: list[Any]) -> tuple[str, Any]:
        return ("with", [x for x in c if isinstance(x, tuple)])

    def insert(self, c: list[Any]) -> ast.Insert:
        kind, name, side, anchor = c[1], c[2], c[3], c[4]
        clauses: dict[str, Any] = {}
        attrs: list[tuple[str, Any]] = []
        last: Any = anchor
        for key, value in c[5:]:
            if key == "with":
                attrs += [(n, v) for n, v, _ in value]
                last = value[-1][1]
                continue
            if key in clauses:
                raise _BadLiteral(f"insert has two '{key}' clauses", self._pos(value))
            clauses[key] = value
            last = value
        return ast.Insert(
            str(kind), name, str(side), anchor, clauses.get("duration"), clauses.get("on"),
            clauses.get("launch"), tuple(attrs), self._pos(c[0], last), self._pos(kind), "queued" in clauses,
        )  # fmt: skip

    def schedule(self, c: list[Any]) -> ast.Schedule:
        return ast.Schedule(str(c[1]), c[2], self._span(c), self._pos(c[1]))

    def wait(self, c: list[Any]) -> ast.Wait:
        waiters, sources = self._values(c)
        return ast.Wait(waiters, sources, self._span(c))

    def if_stmt(self, c: list[Any]) -> ast.If:
        body, closing = c[2]
        orelse: list[Any] = []
        if c[4] is not None:
            orelse, closing = c[4]
        return ast.If(c[1], tuple(body), tuple(orelse), self._pos(c[0], closing))

    def for_loop(self, c: list[Any]) -> ast.For:
        var = c[1]
        iterable = c[3]
        by = c[5]
        body, closing = c[-1]
        pos = self._pos(c[0], closing)
        return ast.For(str(var), iterable, str(by) if by is not None else None, tuple(body), pos, self._pos(by) if by is not None else None)

    def include(self, c: list[Any]) -> ast.Include:
        return ast.Include(unescape(c[1][1:-1]), self._span(c))

    def assert_(self, c: list[Any]) -> ast.Assert:
        values = self._values(c)
        return ast.Assert(values[0], values[1] if len(values) > 1 else None, self._span(c))

    def print_(self, c: list[Any]) -> ast.Print:
        return ast.Print(tuple(self._values(c)), self._span(c))

    # expressions
    def select(self, c: list[Any]) -> ast.Select:
        kind = next((x for x in c if isinstance(x, Token) and x.type == "NAME"), None)
        where = next((x for x in c if x is not None and not isinstance(x, Token)), None)
        return ast.Select(str(kind) if kind is not None else None, where, self._span(c), self._pos(kind) if kind else None)

    def _binary(op: str) -> Any:  # type: ignore[misc]
        def make(self: _ToAst, c: list[Any]) -> ast.Binary:
            left, right = c[0], c[-1]
            return ast.Binary(op, left, right, self._pos(left, right))

        return make

    or_ = _binary("or")
    and_ = _binary("and")
    union = _binary("|")
    intersection = _binary("&")
    add = _binary("+")
    sub = _binary("-")
    mul = _binary("*")
    div = _binary("/")
    mod = _binary("%")
    pow = _binary("**")
    eq = _binary("==")
    ne = _binary("!=")
    lt = _binary("<")
    le = _binary("<=")
    gt = _binary(">")
    ge = _binary(">=")
    match = _binary("~")
    not_match = _binary("!~")
    in_ = _binary("in")
    not_in = _binary("not in")

    def not_(self, c: list[Any]) -> ast.Unary:
        return ast.Unary("not", c[-1], self._span(c))

    def neg(self, c: list[Any]) -> ast.Unary:
        return ast.Unary("-", c[-1], self._span(c))

    def pos(self, c: list[Any]) -> ast.Unary:
        return ast.Unary("+", c[-1], self._span(c))

    def project(self, c: list[Any]) -> ast.Project:
        return ast.Project(c[0], str(c[2]), self._span(c), self._pos(c[2]))

    def index(self, c: list[Any]) -> ast.Index:
        return ast.Index(c[0], c[2], self._span(c))

    def keyword_argument(self, c: list[Any]) -> tuple[str, Any]:
        return (str(c[0]), c[-1])

    def call(self, c: list[Any]) -> ast.Call:
        args = [x for x in c[2:-1] if x is not None and not isinstance(x, Token)]
        positional = tuple(a for a in args if not isinstance(a, tuple))
        keywords = tuple(a for a in args if isinstance(a, tuple))
        seen = [k for k, _ in keywords]
        if len(seen) != len(set(seen)):
            raise _BadLiteral(f"{c[0]}() has a keyword argument twice", self._span(c))
        if keywords and any(not isinstance(a, tuple) for a in args[args.index(keywords[0]) :]):
            raise _BadLiteral(f"{c[0]}(): a positional argument follows a keyword argument", self._span(c))
        return ast.Call(str(c[0]), positional, keywords, self._span(c))

    def atom(self, c: list[Any]) -> Any:  # "(" expr ")"
        inner = c[1]
        return replace(inner, pos=self._span(c))

    def number(self, c: list[Any]) -> ast.Literal:
        tok = c[0]
        text = str(tok)
        value: float | int = int(text) if text.isdigit() else float(text)
        return ast.Literal(value, self._pos(tok), text)

    def quantity(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(quantity_value(str(c[0])), self._pos(c[0]), str(c[0]))

    def string(self, c: list[Any]) -> ast.Literal:
        tok = c[0]
        body = tok[3:-3] if tok.type == "LONG_STRING" else unescape(tok[1:-1])
        return ast.Literal(body, self._pos(tok), str(tok))

    def true(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(True, self._pos(c[0]), "true")

    def false(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(False, self._pos(c[0]), "false")

    def none(self, c: list[Any]) -> ast.Literal:
        return ast.Literal(None, self._pos(c[0]), "none")

    def name(self, c: list[Any]) -> ast.Name:
        return ast.Name(str(c[0]), self._pos(c[0]))

    def list(self, c: list[Any]) -> ast.ListExpr:
        return ast.ListExpr(tuple(x for x in c if x is not None and not isinstance(x, Token)), self._span(c))


def _dedent(text: str) -> str:
    import textwrap

    lines = text.strip("\n").splitlines()
    if not lines:
        return ""
    return (lines[0].strip() + "\n" + textwrap.dedent("\n".join(lines[1:]))).strip()
