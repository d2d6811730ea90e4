"""Regular expressions for ``~`` and ``!~``: matched in time linear in the text, whatever the pattern.

Python's ``re`` backtracks: ``"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!" ~ "^(a+)+$"`` would run for hours. Patterns run on RE2
(the ``google-re2`` package), which never backtracks; its syntax is Python's without backreferences and look-around
(https://github.com/google/re2/wiki/Syntax). Without RE2 installed, ``re`` runs the patterns that cannot backtrack
badly (no quantifier over a group that holds a quantifier or an alternation; no backreference or look-around; subjects
of at most MAX_FALLBACK_SUBJECT characters) and refuses the others. Either way no Python warning reaches the user.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

from daydream.dsl.limits import MAX_PATTERN
from daydream.errors import DaydreamError

try:  # pragma: no cover - which branch runs depends on the installation
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

ENGINE = "re2" if _re2 is not None else "re"
MAX_FALLBACK_SUBJECT = 10_000  # without RE2: the longest text a pattern is matched against
_MEMO = 16_384  # results remembered per compiled pattern in one expression (task names repeat)
_MEMO_TEXT = 256  # texts longer than this are not remembered


class BadPattern(DaydreamError):
    """A pattern that does not compile, is too long, or (without RE2) could backtrack for too long."""


@functools.lru_cache(maxsize=128)
def compile_pattern(pattern: str) -> Callable[[str], bool]:
    """``search(text) -> bool``: whether ``pattern`` matches anywhere in ``text``. Raises BadPattern."""
    if len(pattern) > MAX_PATTERN:
        raise BadPattern(f"a regular expression of {len(pattern):,} characters: at most {MAX_PATTERN:,}")
    if _re2 is not None:
        return _compile_re2(pattern)
    return _compile_re(pattern)  # pragma: no cover


def matcher(pattern: str) -> Callable[[str], bool]:
    """A search function for one expression: ``compile_pattern``'s, remembering its answers for short texts (a
    where-clause meets the same task names over and over)."""
    search = compile_pattern(pattern)
    memo: dict[str, bool] = {}

    def remembered(text: str) -> bool:
        hit = memo.get(text)
        if hit is None:
            hit = search(text)
            if len(text) <= _MEMO_TEXT:
                if len(memo) >= _MEMO:
                    memo.clear()
                memo[text] = hit
        return hit

    return remembered


def _compile_re2(pattern: str) -> Callable[[str], bool]:
    assert _re2 is not None
    options = _re2.Options()
    options.log_errors = False  # RE2 would print its own message on stderr
    try:
        rx = _re2.compile(pattern, options)
    except _re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise BadPattern(_explain(str(reason))) from None
    except (TypeError, ValueError, UnicodeError) as exc:
        raise BadPattern(str(exc)) from None
    raw: Any = getattr(rx, "_regexp", None)
    anchor = getattr(getattr(getattr(_re2, "_re2", None), "RE2", None), "Anchor", None)
    if raw is not None and anchor is not None and hasattr(raw, "Match"):
        unanchored = anchor.UNANCHORED

        def search(text: str) -> bool:
            # the RE2 object itself: no Match object to build, as a where-clause asks once per task
            data = text.encode("utf-8", "surrogatepass")
            return bool(raw.Match(unanchored, data, 0, len(data))[0][0] != -1)

        return search

    def search_public(text: str) -> bool:  # pragma: no cover - another google-re2 layout
        return rx.search(text.encode("utf-8", "surrogatepass")) is not None

    return search_public


def _explain(reason: str) -> str:
    if "invalid escape sequence: \\" in reason and reason.rstrip()[-1:].isdigit():
        return f"{reason} (backreferences are not supported)"
    if (
        "invalid perl operator: (?<" in reason
        or "invalid perl operator: (?=" in reason
        or "invalid perl operator: (?!" in reason
    ):
        return f"{reason} (look-around is not supported)"
    return reason


# ---- without RE2 ---------------------------------------------------------------------------------------------


def _compile_re(pattern: str) -> Callable[[str], bool]:  # pragma: no cover - used where google-re2 is missing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Possible nested set" and the like: not for the user to see
        try:
            rx = re.compile(pattern)
            tree = _sre_parse(pattern)
        except (re.error, RecursionError, OverflowError, ValueError) as exc:
            raise BadPattern(str(exc)) from None
    problem = _backtracking_problem(tree)
    if problem is not None:
        raise BadPattern(
            f"{problem} is refused without google-re2, which matches it in linear time (Python's re could take"
            " exponential time)"
        )
    search = rx.search

    def run(text: str) -> bool:
        if len(text) > MAX_FALLBACK_SUBJECT:
            raise BadPattern(
                f"matching a text of {len(text):,} characters: at most {MAX_FALLBACK_SUBJECT:,} without google-re2"
            )
        return search(text) is not None

    return run


def _sre_parse(pattern: str) -> Any:  # pragma: no cover
    try:
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:
        import sre_parse as parser  # type: ignore[no-redef]
    return parser.parse(pattern)


def _backtracking_problem(tree: Any) -> str | None:  # pragma: no cover
    """Why a parsed pattern is unsafe for a backtracking engine, or None."""
    try:
        from re import _constants as c  # type: ignore[attr-defined]
    except ImportError:
        import sre_constants as c  # type: ignore[no-redef]
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}
    unbounded = 0

    def items(node: Any) -> Any:
        return node.data if hasattr(node, "data") else node

    def has(node: Any, ops: set[Any]) -> bool:
        for op, av in items(node):
            if op in ops:
                return True
            for sub in _subpatterns(op, av, c):
                if has(sub, ops):
                    return True
        return False

    stack = [tree]
    while stack:
        node = stack.pop()
        for op, av in items(node):
            if op in (c.GROUPREF, c.GROUPREF_EXISTS):
                return "a backreference"
            if op in (c.ASSERT, c.ASSERT_NOT):
                return "a look-around"
            if op in repeats:
                low, high, body = av
                if high == c.MAXREPEAT or high > 1:
                    unbounded += 1
                if has(body, repeats | {c.BRANCH}):
                    return "a quantifier over a group that holds a quantifier or an alternation"
            stack.extend(_subpatterns(op, av, c))
    if unbounded > 2:
        return "more than two quantifiers that repeat"
    return None


def _subpatterns(op: Any, av: Any, c: Any) -> list[Any]:  # pragma: no cover
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) or op == getattr(c, "POSSESSIVE_REPEAT", None):
        return [av[2]]
    if op == c.SUBPATTERN:
        return [av[-1]]
    if op == c.BRANCH:
        return list(av[1])
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [av[1]]
    if op == getattr(c, "ATOMIC_GROUP", None):
        return [av]
    if op == c.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []
