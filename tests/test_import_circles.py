"""No package's modules import each other in a circle: each package reads top to bottom.

For every package of daydream, the graph of its direct children (its modules, ``__init__`` among them, and its
subpackages, each subpackage one node holding everything under it) with an edge where one child imports another.
Every import statement counts, at the top of a module or inside a function, absolute or relative; imports under
``if TYPE_CHECKING:`` do not (they never run, and they are how a type annotation names a class above). Read from
the source with ast: no import is executed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "daydream"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` at any depth, but those guarded by ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _dotted(path: Path, root: Path) -> list[str]:
    """The dotted name of the module at ``path`` (a package's ``__init__.py`` named as the package)."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_names(path: Path, root: Path) -> set[tuple[str, ...]]:
    """The dotted names ``path`` imports, relative imports resolved; ``from a.b import c`` gives ``a.b.c`` when
    ``c`` is a module or package of the tree, else ``a.b`` (a name defined in ``a/b.py`` or ``a/b/__init__.py``)."""
    here = _dotted(path, root)
    package = here if path.name == "__init__.py" else here[:-1]
    names: set[tuple[str, ...]] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(tuple(alias.name.split(".")) for alias in node.names)
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        module = (*base, *(node.module.split(".") if node.module else []))
        for alias in node.names:
            child = (*module, alias.name)
            is_module = (
                root.parent.joinpath(*child).is_dir() or root.parent.joinpath(*module, f"{alias.name}.py").is_file()
            )
            names.add(child if is_module else module)
    return names


def package_graph(package: Path, root: Path) -> nx.DiGraph:
    """The imports between the children of ``package``: one node per module (``__init__`` too) and subpackage."""
    dotted = tuple(_dotted(package / "__init__.py", root))
    graph = nx.DiGraph()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).with_suffix("").parts
        source = relative[0]
        graph.add_node(source)
        for name in imported_names(path, root):
            if name[: len(dotted)] != dotted:
                continue
            target = name[len(dotted)] if len(name) > len(dotted) else "__init__"
            if target != source:
                graph.add_edge(source, target, where=f"{path.relative_to(root.parent)}")
    return graph


def circles(root: Path) -> list[str]:
    """Each knot of modules that import each other round a circle, as text: the package, the modules, and each import
    between them with the file that makes it (one knot, however many circles run through it)."""
    found = []
    for init in sorted(root.rglob("__init__.py")):
        graph = package_graph(init.parent, root)
        for knot in nx.strongly_connected_components(graph):
            if len(knot) > 1:
                steps = [f"{a} -> {b} ({graph.edges[a, b]['where']})" for a, b in sorted(graph.subgraph(knot).edges)]
                found.append(
                    f"{'.'.join(_dotted(init, root))}: {', '.join(sorted(knot))} import each other: " + "; ".join(steps)
                )
    return found


def test_no_circle_between_the_modules_of_a_package() -> None:
    found = circles(PACKAGE)
    assert not found, "import circles:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "files, expected",
    [
        # a -> b -> a at the top of the modules
        (
            {"a.py": "from pkg.b import x", "b.py": "import pkg.a"},
            ["pkg: a, b import each other: a -> b (pkg/a.py); b -> a (pkg/b.py)"],
        ),
        # inside a function, and relative
        (
            {"a.py": "def f():\n    from .b import x", "b.py": "from . import a"},
            ["pkg: a, b import each other: a -> b (pkg/a.py); b -> a (pkg/b.py)"],
        ),
        # three round a circle, a fourth beside it
        (
            {"a.py": "import pkg.b", "b.py": "import pkg.c", "c.py": "import pkg.a", "d.py": "import pkg.a"},
            ["pkg: a, b, c import each other: a -> b (pkg/a.py); b -> c (pkg/b.py); c -> a (pkg/c.py)"],
        ),
        # a subpackage is one node of its parent: sub.c -> d -> sub
        (
            {"sub/__init__.py": "", "sub/c.py": "from pkg.d import y", "d.py": "from pkg.sub.c import z"},
            ["pkg: d, sub import each other: d -> sub (pkg/d.py); sub -> d (pkg/sub/c.py)"],
        ),
        # a name from a package's __init__ is an import of __init__
        (
            {"__init__.py": "from pkg.a import f", "a.py": "from pkg import g"},
            ["pkg: __init__, a import each other: __init__ -> a (pkg/__init__.py); a -> __init__ (pkg/a.py)"],
        ),
        # imports for type annotations only never run
        (
            {
                "a.py": "from pkg.b import x",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A",
            },
            [],
        ),
        # one way only
        ({"a.py": "from pkg.b import x", "b.py": "import os"}, []),
    ],
)
def test_a_circle_is_found_and_named(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").touch()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert sorted(circles(root)) == sorted(expected)


# a reader scans a package's modules side by side: past this many at one level, a package is grouped into rooms
MAX_MODULES = 20


def crowded(root: Path) -> list[str]:
    """Each package under ``root`` (itself included) with more than MAX_MODULES modules at one level."""
    out = []
    for init in sorted(root.rglob("__init__.py")):
        modules = [p for p in init.parent.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES:
            out.append(f"{init.parent.relative_to(root.parent)}: {len(modules)} modules")
    return out


def test_no_package_holds_more_than_twenty_modules_at_one_level(tmp_path: Path) -> None:
    assert crowded(PACKAGE) == []
    many = tmp_path / "pkg"
    many.mkdir()
    (many / "__init__.py").touch()
    for k in range(MAX_MODULES + 1):
        (many / f"m{k}.py").touch()
    assert crowded(many) == [f"pkg: {MAX_MODULES + 1} modules"]
