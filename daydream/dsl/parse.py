"""Parsing .whatif text into a Script: lark's LALR parser over grammar/whatif.lark, Transformers to the AST (one
for the statement rules, one for the expression rules, each method taking its rule's children as parameters),
and parse errors that show the line, a caret, what was expected and the likely fix."""

from __future__ import annotations

import functools
import math
import re
import threading
import typing
from collections.abc import Callable, Iterator
from dataclasses import replace
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from daydream.dsl import ast
from daydream.dsl.limits import (
    MAX_MESSAGE,
    MAX_NESTING,
    MAX_NUMBER_LITERAL,
    MAX_SCRIPT_BYTES,
    MAX_SHOWN_LINE,
    MAX_STRING_LITERAL,
)
from daydream.errors import ScriptError, did_you_mean
from daydream.files import clip

TIME_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "min": 6e7}
BYTE_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
STATEMENT_KEYWORDS = (
    "param",
    "let",
    "scale",
    "alloc",
    "set",
    "remove",
    "insert",
    "schedule",
    "wait",
    "for",
    "if",
    "include",
    "require",
    "assert",
    "print",
)
KEYWORDS = frozenset(STATEMENT_KEYWORDS) | {
    "select",
    "where",
    "by",
    "in",
    "and",
    "or",
    "not",
    "true",
    "false",
    "none",
    "with",
    "launches",
    "launch",
    "queued",
    "on",
    "duration",
    "until",
    "as",
}
_QUANTITY = re.compile(r"(.*?)([A-Za-z]+)$")
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


class _JoinInBrackets:
    """Line ends inside ( ) and [ ] do not end a statement, as in Python: a list or a call may span lines, in a file
    and in the REPL alike (whose continuation prompt shows while a bracket is open). Braces keep theirs: a block's
    line ends separate its statements."""

    always_accept = ("_NL",)
    _OPEN, _CLOSE = frozenset({"LPAR", "LSQB"}), frozenset({"RPAR", "RSQB"})

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        for token in stream:
            if token.type in self._OPEN:
                depth += 1
            elif token.type in self._CLOSE:
                depth = max(depth - 1, 0)
            elif token.type == "_NL" and depth:
                continue
            yield token


@functools.cache
def _parser() -> Lark:
    global _TRANSFORMER
    grammar = files("daydream").joinpath("grammar", "whatif.lark").read_text(encoding="utf-8")
    # The transformer runs inside the parser, building the AST without an intermediate tree.
    _TRANSFORMER = _ToAst("<script>")
    return Lark(
        grammar,
        parser="lalr",
        maybe_placeholders=True,
        transformer=_TRANSFORMER,
        start=["start", "expr"],
        postlex=_JoinInBrackets(),
    )


def parse_script(text: str, file: str = "<script>") -> ast.Script:
    """Parse a whole script. Raises ScriptError with the position and a caret on bad input, or on input over the
    limits (size, nesting, literal lengths: limits.py), which are checked before the parser sees the text."""
    prescan(text, file)
    parser = _parser()
    assert _TRANSFORMER is not None
    with _LOCK:
        _TRANSFORMER.file = file  # positions are stamped with the file being parsed
        try:
            statements = parser.parse(text if text.endswith("\n") else text + "\n", start="start")
        except UnexpectedInput as exc:
            raise _parse_error(exc, text, file) from None
        except _BadSyntax as exc:
            raise script_error(str(exc), exc.pos, text) from None
    check_depth(statements, text)
    docstring = None
    for i, s in enumerate(statements):
        if isinstance(s, ast.Docstring):
            if i != 0:
                raise script_error(
                    "a string on its own does nothing; only the first statement may be a docstring", s.pos, text
                )
            docstring = s.text
    return ast.Script(file, text, tuple(statements), docstring, tuple(_comments(text)))


def parse_expression(text: str, file: str = "<expression>") -> ast.Expr:
    """Parse one expression (a ``-p name=value`` value, a REPL ``:show`` argument)."""
    prescan(text, file)
    parser = _parser()
    assert _TRANSFORMER is not None
    with _LOCK:
        _TRANSFORMER.file = file
        try:
            expr = parser.parse(text, start="expr")
        except UnexpectedInput as exc:
            raise _parse_error(exc, text, file) from None
        except _BadSyntax as exc:
            raise script_error(str(exc), exc.pos, text) from None
    check_depth([expr], text)
    return expr  # type: ignore[no-any-return]


# ---- limits checked before parsing --------------------------------------------------------------------------

# What the lexer will see, as far as the limits care: strings and comments (whose brackets do not count), names (whose
# digits are no number), numbers and brackets. Every alternative matches in time linear in its length.
_SCAN = re.compile(
    r'(?P<long>"""[\s\S]*?(?:"""|\Z))'
    r'|(?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*')"
    r"|(?P<comment>#[^\n]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<open>[(\[{])"
    r"|(?P<close>[)\]}])"
)


def prescan(text: str, file: str) -> None:
    """Refuse text over the limits before the parser sees it, in time linear in its length: the text's size,
    brackets open at once (a million nested parentheses fail in milliseconds), the length of each number and string
    literal (a long number lexes in quadratic time, a long string in much memory)."""
    if len(text) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{file}: {len(text):,} characters: a script holds at most {MAX_SCRIPT_BYTES:,}")
    depth = 0
    for m in _SCAN.finditer(text):
        kind = m.lastgroup
        if kind == "open":
            depth += 1
            if depth > MAX_NESTING:
                raise _at(text, file, m.start(), f"more than {MAX_NESTING} brackets open at once: nested too deeply", 1)
        elif kind == "close":
            depth = max(0, depth - 1)
        elif kind == "number":
            if m.end() - m.start() > MAX_NUMBER_LITERAL:
                raise _at(
                    text,
                    file,
                    m.start(),
                    f"a number of {m.end() - m.start():,} characters: a number literal has at most "
                    f"{MAX_NUMBER_LITERAL}",
                    MAX_NUMBER_LITERAL,
                )
        elif kind in ("string", "long"):
            quote = 3 if kind == "long" else 1
            n = max(0, m.end() - m.start() - 2 * quote)
            if n > MAX_STRING_LITERAL:
                raise _at(
                    text, file, m.start(), f"a string literal of {n:,} characters: at most {MAX_STRING_LITERAL:,}", 1
                )


def _at(text: str, file: str, offset: int, message: str, width: int) -> ScriptError:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return script_error(message, ast.Pos(file, line, column, offset, offset + width), text)


_NODE_TYPES = frozenset((*typing.get_args(ast.Expr), *typing.get_args(ast.Statement)))


def _children(node: Any) -> Iterator[Any]:
    """The nodes directly under a node: its expressions, its block's statements, its keyword arguments' values."""
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        if type(value) in _NODE_TYPES:
            yield value
        elif type(value) is tuple:
            for x in value:
                if type(x) in _NODE_TYPES:
                    yield x
                elif type(x) is tuple:
                    yield from (y for y in x if type(y) in _NODE_TYPES)


def check_depth(roots: list[Any], text: str) -> None:
    """Refuse a syntax tree deeper than MAX_NESTING (blocks in blocks, operators chained: ``1 + 1 + ... + 1``),
    so that every pass over it (checker, compiler, evaluation) recurses a bounded number of times. Iterative."""
    stack = [(node, 1) for node in roots]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise script_error(
                f"nested more than {MAX_NESTING} levels deep (blocks in blocks, brackets, operators chained as in "
                "`a + b + c ...`): split the expression over lets, or test membership with `in [...]`",
                node.pos,
                text,
            )
        stack.extend((child, depth + 1) for child in _children(node))


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


def script_error(
    message: str, pos: ast.Pos | None, text: str | None = None, hint: str | None = None, width: int | None = None
) -> ScriptError:
    """A ScriptError that reads ``file:line:col: message``, then the line with a caret under the spot. The message
    and hint are cut to MAX_MESSAGE characters, a long line to MAX_SHOWN_LINE characters around the column."""
    message = clip(message, MAX_MESSAGE)
    hint = clip(hint, MAX_MESSAGE) if hint else hint
    if pos is None:
        return ScriptError(message, hint=hint)
    excerpt = None
    if text is not None:
        line = _line(text, pos.line)
        if line is not None:
            line = line.replace("\t", " ")
            n = width if width is not None else max(1, min(pos.end - pos.start, len(line) - pos.column + 1))
            shown, column = _window(line, pos.column)
            n = max(1, min(n, len(shown) - column + 1))
            gutter = f"{pos.line:>4} | "
            excerpt = gutter + shown + "\n" + " " * (len(gutter) - 2) + "| " + " " * (column - 1) + "^" * n
    return ScriptError(message, pos.file, pos.line, pos.column, excerpt, hint)


def _line(text: str, number: int) -> str | None:
    """Line ``number`` (1-based) of ``text``, lines ending at "\\n" as the lexer counts them, or None."""
    if number < 1:
        return None
    lines = text.split("\n")
    return lines[number - 1].rstrip("\r") if number <= len(lines) else None


def _window(line: str, column: int) -> tuple[str, int]:
    """A line cut to MAX_SHOWN_LINE characters around ``column`` ("..." where cut), and the column within it."""
    if len(line) <= MAX_SHOWN_LINE:
        return line, column
    start = max(0, min(column - 1 - MAX_SHOWN_LINE // 2, len(line) - MAX_SHOWN_LINE))
    end = start + MAX_SHOWN_LINE
    head = "..." if start > 0 else ""
    tail = "..." if end < len(line) else ""
    return head + line[start:end] + tail, column - start + len(head)


_OPERATORS = frozenset(
    {"==", "!=", "<", "<=", ">", ">=", "~", "!~", "+", "-", "*", "/", "%", "**", "&", "|", ".", "(", "["}
)


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
        shown = clip(shown, 60)
        kind = _TOKEN_WORDS.get(tok.type, "")
        what = f"{kind.split(' ', 1)[1]} {shown!r}" if kind.startswith("a ") else repr(shown)
        options = _keyword_options(expected)
        if tok.type == "NAME" and "PARAM" in expected and "LET" in expected:
            message = (
                f"unknown statement {shown!r}: a statement starts with"
                f" {_join([repr(k) for k in STATEMENT_KEYWORDS], limit=None)}"
            )
            return script_error(message, pos, text, did_you_mean(shown, STATEMENT_KEYWORDS))
        if tok.type in ("NAME", *(k.upper() for k in KEYWORDS)) and options:
            hint = did_you_mean(shown, options) or hint
        if shown == "=":
            hint = "compare with '=='; '=' only binds (param, let, set, with)"
        described = _describe_expected(expected)
        message = f"unexpected {what}" + (
            f"; expected {_join(described)}" if described else "; expected the end of the expression"
        )
        return script_error(message, pos, text, hint)
    if isinstance(exc, UnexpectedCharacters):
        ch = text[offset] if offset < len(text) else ""
        pos = ast.Pos(file, line, column, offset, offset + 1)
        if ch in "\"'":
            return script_error(
                'unterminated string: a string ends on the line it starts (use """ for several lines)', pos, text
            )
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


class _BadSyntax(Exception):
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


class _Positions(Transformer):
    """Positions for the AST: a node's Pos spans its first to its last token, in the file being parsed."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file

    def _pos(self, first: Any, last: Any | None = None) -> ast.Pos:
        last = first if last is None else last
        if isinstance(first, Token):
            line, column, start = first.line, first.column, first.start_pos
        else:
            p = first.pos
            line, column, start = p.line, p.column, p.start
        end = last.end_pos if isinstance(last, Token) else last.pos.end
        return ast.Pos(self.file, line, column, start, end)


def _binary(op: str) -> Callable[..., ast.Binary]:
    """``left OP right``: an operator written with symbols, which the tree leaves out."""

    def make(self: _Positions, left: Any, right: Any) -> ast.Binary:
        return ast.Binary(op, left, right, self._pos(left, right))

    return make


def _keyword_binary(op: str) -> Callable[..., ast.Binary]:
    """``left or right``, ``left in right``: an operator written as keywords, which the tree keeps."""

    def make(self: _Positions, left: Any, *keywords_and_right: Any) -> ast.Binary:
        right = keywords_and_right[-1]
        return ast.Binary(op, left, right, self._pos(left, right))

    return make


def _expressions(children: tuple[Any, ...]) -> list[Any]:
    """The expressions among a rule's children: no punctuation, no placeholder of a missing optional part."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


@v_args(inline=True)
class _Expressions(_Positions):
    """The expression rules to ast expressions; each method takes the rule's children as parameters."""

    def select(self, keyword: Token, kind: Token | None, where_keyword: Token | None, where: Any) -> ast.Select:
        last = where if where is not None else kind if kind is not None else keyword
        return ast.Select(
            str(kind) if kind is not None else None, where, self._pos(keyword, last), self._pos(kind) if kind else None
        )

    or_ = _keyword_binary("or")
    and_ = _keyword_binary("and")
    in_ = _keyword_binary("in")
    not_in = _keyword_binary("not in")
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

    def not_(self, keyword: Token, operand: Any) -> ast.Unary:
        return ast.Unary("not", operand, self._pos(keyword, operand))

    def neg(self, sign: Token, operand: Any) -> ast.Unary:
        return ast.Unary("-", operand, self._pos(sign, operand))

    def pos(self, sign: Token, operand: Any) -> ast.Unary:
        return ast.Unary("+", operand, self._pos(sign, operand))

    def project(self, obj: Any, dot: Token, attr: Token) -> ast.Project:
        return ast.Project(obj, str(attr), self._pos(obj, attr), self._pos(attr))

    def index(self, obj: Any, open_bracket: Token, index: Any, close_bracket: Token) -> ast.Index:
        return ast.Index(obj, index, self._pos(obj, close_bracket))

    def keyword_argument(self, name: Token, value: Any) -> tuple[str, Any]:
        return (str(name), value)

    def call(self, func: Token, open_paren: Token, *arguments_and_close: Any) -> ast.Call:
        pos = self._pos(func, arguments_and_close[-1])
        args = _expressions(arguments_and_close)  # keyword arguments are (name, value) tuples
        positional = tuple(a for a in args if not isinstance(a, tuple))
        keywords = tuple(a for a in args if isinstance(a, tuple))
        seen = [k for k, _ in keywords]
        if len(seen) != len(set(seen)):
            raise _BadSyntax(f"{func}() has a keyword argument twice", pos)
        if keywords and any(not isinstance(a, tuple) for a in args[args.index(keywords[0]) :]):
            raise _BadSyntax(f"{func}(): a positional argument follows a keyword argument", pos)
        return ast.Call(str(func), positional, keywords, pos)

    def atom(self, open_paren: Token, inner: Any, close_paren: Token) -> Any:  # "(" expr ")"
        return replace(inner, pos=self._pos(open_paren, close_paren))

    def number(self, tok: Token) -> ast.Literal:
        text = str(tok)
        value: float | int = int(text) if text.isdigit() else float(text)
        if not math.isfinite(value):
            raise _BadSyntax(
                f"number too large: {clip(text, 40)} is past the largest number, about 1.8e308", self._pos(tok)
            )
        return ast.Literal(value, self._pos(tok), text)

    def quantity(self, tok: Token) -> ast.Literal:
        value = quantity_value(str(tok))
        if not math.isfinite(value):
            raise _BadSyntax(
                f"number too large: {clip(str(tok), 40)} is past the largest number, about 1.8e308", self._pos(tok)
            )
        return ast.Literal(value, self._pos(tok), str(tok))

    def string(self, tok: Token) -> ast.Literal:
        body = tok[3:-3] if tok.type == "LONG_STRING" else unescape(tok[1:-1])
        return ast.Literal(body, self._pos(tok), str(tok))

    def true(self, tok: Token) -> ast.Literal:
        return ast.Literal(True, self._pos(tok), "true")

    def false(self, tok: Token) -> ast.Literal:
        return ast.Literal(False, self._pos(tok), "false")

    def none(self, tok: Token) -> ast.Literal:
        return ast.Literal(None, self._pos(tok), "none")

    def name(self, tok: Token) -> ast.Name:
        return ast.Name(str(tok), self._pos(tok))

    def list(self, open_bracket: Token, *items_and_close: Any) -> ast.ListExpr:
        return ast.ListExpr(tuple(_expressions(items_and_close)), self._pos(open_bracket, items_and_close[-1]))


@v_args(inline=True)
class _Statements(_Positions):
    """The statement rules to ast statements; each method takes the rule's children as parameters."""

    def start(self, *statements: Any) -> list[Any]:
        return [s for s in statements if s is not None]

    def block(self, open_brace: Token, *statements_and_close: Any) -> tuple[list[Any], Token]:
        body = _expressions(statements_and_close)
        for s in body:
            if isinstance(s, ast.Docstring):
                raise _BadSyntax("a string on its own does nothing; only the first statement may be a docstring", s.pos)
        return body, statements_and_close[-1]

    def docstring(self, tok: Token) -> ast.Docstring:
        body = tok[3:-3] if tok.type == "LONG_STRING" else unescape(tok[1:-1])
        return ast.Docstring(_dedent(body), self._pos(tok))

    def param(self, keyword: Token, name: Token, equals: Token, value: Any) -> ast.Param:
        return ast.Param(str(name), value, self._pos(keyword, value))

    def let(self, keyword: Token, name: Token, equals: Token, value: Any) -> ast.Let:
        return ast.Let(str(name), value, self._pos(keyword, value))

    def scale(
        self,
        keyword: Token,
        target: Any,
        by: Token,
        factor: Any,
        anchor: Token | None = None,
        after: Any = None,
        until_kw: Token | None = None,
        until: Any = None,
    ) -> ast.Scale:
        self._after_only(anchor)
        last = until if until is not None else after if after is not None else factor
        return ast.Scale(target, factor, self._pos(keyword, last), after, until)

    def alloc(
        self,
        keyword: Token,
        nbytes: Any,
        as_kw: Token | None = None,
        category: Any = None,
        anchor: Token | None = None,
        after: Any = None,
        until_kw: Token | None = None,
        until: Any = None,
    ) -> ast.Alloc:
        self._after_only(anchor)
        last = next((x for x in (until, after, category) if x is not None), nbytes)
        return ast.Alloc(nbytes, category, after, until, self._pos(keyword, last))

    def _after_only(self, anchor: Token | None) -> None:
        if anchor is not None and str(anchor) != "after":
            raise _BadSyntax(
                "a stretch of memory begins 'after TASK' (and ends 'until TASK'), not 'before'", self._pos(anchor)
            )

    def set(self, keyword: Token, target: Any, equals: Token, value: Any) -> ast.SetAttr:
        if not isinstance(target, ast.Project):
            raise _BadSyntax(
                "set needs a selection's attribute on the left: set SELECTION.ATTRIBUTE = VALUE", target.pos
            )
        return ast.SetAttr(target, value, self._pos(keyword, value))

    def with_launches(self, with_: Token, launches: Token) -> Token:
        return launches

    def remove(self, keyword: Token, target: Any, with_launches: Token | None) -> ast.Remove:
        last = with_launches if with_launches is not None else target
        return ast.Remove(target, with_launches is not None, self._pos(keyword, last))

    def duration_clause(self, keyword: Token, value: Any) -> tuple[str, Any]:
        return ("duration", value)

    def on_clause(self, keyword: Token, value: Any) -> tuple[str, Any]:
        return ("on", value)

    def launch_clause(self, keyword: Token, value: Any) -> tuple[str, Any]:
        return ("launch", value)

    def queued_clause(self, keyword: Token) -> tuple[str, Any]:
        return ("queued", keyword)

    def attribute(self, name: Token, value: Any) -> tuple[str, Any]:
        return (str(name), value)

    def with_clause(self, keyword: Token, *attributes: tuple[str, Any]) -> tuple[str, Any]:
        return ("with", attributes)

    def insert(
        self, keyword: Token, kind: Token, name: Any, side: Token, anchor: Any, *clauses: tuple[str, Any]
    ) -> ast.Insert:
        given: dict[str, Any] = {}
        attrs: list[tuple[str, Any]] = []
        last: Any = anchor
        for key, value in clauses:
            if key == "with":
                attrs += value
                last = value[-1][1]
                continue
            if key in given:
                raise _BadSyntax(f"insert has two '{key}' clauses", self._pos(value))
            given[key] = value
            last = value
        return ast.Insert(
            str(kind),
            name,
            str(side),
            anchor,
            given.get("duration"),
            given.get("on"),
            given.get("launch"),
            tuple(attrs),
            self._pos(keyword, last),
            self._pos(kind),
            "queued" in given,
        )

    def schedule(self, keyword: Token, policy: Token, priority: Any) -> ast.Schedule:
        last = priority if priority is not None else policy
        return ast.Schedule(str(policy), priority, self._pos(keyword, last), self._pos(policy))

    def wait(self, keyword: Token, waiters: Any, for_: Token, sources: Any) -> ast.Wait:
        return ast.Wait(waiters, sources, self._pos(keyword, sources))

    def if_stmt(
        self,
        keyword: Token,
        test: Any,
        body: tuple[list[Any], Token],
        else_: Token | None,
        orelse: tuple[list[Any], Token] | None,
    ) -> ast.If:
        statements, closing = body
        other: list[Any] = []
        if orelse is not None:
            other, closing = orelse
        return ast.If(test, tuple(statements), tuple(other), self._pos(keyword, closing))

    def for_loop(
        self,
        keyword: Token,
        var: Token,
        in_: Token,
        iterable: Any,
        by_: Token | None,
        by: Token | None,
        block: tuple[list[Any], Token],
    ) -> ast.For:
        body, closing = block
        return ast.For(
            str(var),
            iterable,
            str(by) if by is not None else None,
            tuple(body),
            self._pos(keyword, closing),
            self._pos(by) if by is not None else None,
        )

    def include(self, keyword: Token, path: Token) -> ast.Include:
        return ast.Include(unescape(path[1:-1]), self._pos(keyword, path))

    def require(self, keyword: Token, test: Any, comma: Token | None, message: Any) -> ast.Require:
        return ast.Require(test, message, self._pos(keyword, message if message is not None else test))

    def assert_(self, keyword: Token, test: Any, comma: Token | None, message: Any) -> ast.Assert:
        return ast.Assert(test, message, self._pos(keyword, message if message is not None else test))

    def print_(self, keyword: Token, *values_and_commas: Any) -> ast.Print:
        values = values_and_commas[::2]
        return ast.Print(values, self._pos(keyword, values[-1]))


class _ToAst(_Statements, _Expressions):
    """lark tree -> ast nodes, run inside the parser (no tree is built): the statement and expression rules."""


def _dedent(text: str) -> str:
    import textwrap

    lines = text.strip("\n").splitlines()
    if not lines:
        return ""
    return (lines[0].strip() + "\n" + textwrap.dedent("\n".join(lines[1:]))).strip()
