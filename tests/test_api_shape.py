"""The public API's shape: no public function takes more than 8 parameters (a longer list is a struct waiting to be
named: issue "one typed path"). Read from the source with ast. Functions still over it would be listed in STILL_OVER,
and the list may only shrink: a new one fails, and so does one that was fixed but is still listed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "daydream"
MAX_PARAMS = 8
STILL_OVER: dict[str, int] = {}  # name -> parameters, of those still over (none now; a new one is a struct to name)


def _public_functions() -> dict[str, int]:
    """Each public function and method of the package (names without a leading underscore, in modules without one)
    and how many parameters it takes (self and cls aside, *args and **kwargs aside)."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if any(part.startswith("_") and part != "__init__.py" for part in rel.parts):
            continue

        def visit(body: list[ast.stmt], prefix: str, rel: Path = rel) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                    a = node.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
                    found[f"{rel.as_posix()}:{prefix}{node.name}"] = len(names)
                elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    visit(node.body, f"{node.name}.")

        visit(ast.parse(path.read_text(), str(path)).body, "")
    return found


def test_no_public_function_takes_more_than_eight_parameters() -> None:
    over = {name: n for name, n in _public_functions().items() if n > MAX_PARAMS}
    new = sorted(set(over) - set(STILL_OVER))
    assert not new, f"public functions over {MAX_PARAMS} parameters: {', '.join(f'{n} ({over[n]})' for n in new)}"
    fixed = sorted(set(STILL_OVER) - set(over))
    assert not fixed, f"no longer over {MAX_PARAMS} parameters, remove from STILL_OVER: {', '.join(fixed)}"
    assert {name: over[name] for name in STILL_OVER} == STILL_OVER  # none grew


def test_the_scan_sees_a_long_signature(tmp_path: Path) -> None:
    """The scan counts positional, keyword-only and method parameters (not self)."""
    functions = _public_functions()
    assert functions["api/embeddings.py:profile"] == 5  # paths, budget, dim, batch, options
    assert functions["api/workload.py:Workload.load"] == 0
    assert functions["graph/edit.py:insert_task"] == 8  # graph, kind, name, duration, at, and 3 keyword-only
