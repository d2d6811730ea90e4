"""The package reads in one direction: a module imports only from its own layer or the layers below it.

trace -> graph -> simulation -> perf (its rooms: trust and paths, then kernels, collectives and cpu, then embeddings,
then the accuracy report) -> dsl -> api (whatif/replay/job/workload, then validate/demo/compare/analyses/
embeddings) -> presentation (terminal/plots/page) -> commands (the flags they share and how they print, then repl and
each group of commands, then cli); errors, stats, files, units, workers, progress, signals, memory_limit, _arrays, _gc,
_heap, _jit and _moved (old module paths kept) sit at the bottom, the recorder beside trace. Read from the source with
ast (no import is executed), so a lazy import inside a function counts like one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "daydream"

# Rank of each top-level unit of the package (a subpackage or a module): imports may only point to a lower or
# equal rank, and units of equal rank may not import each other in a loop.
LAYERS: dict[str, int] = {
    "errors": 0,
    "stats": 0,
    "_arrays": 0,
    "_gc": 0,
    "_moved": 0,
    "_heap": 0,
    "_jit": 0,
    "_version": 0,
    "files": 1,
    "names": 1,
    "units": 1,
    "workers": 1,
    "progress": 1,
    "signals": 1,
    "memory_limit": 1,
    "trace": 2,
    "record": 3,
    "graph": 4,
    "simulation": 5,
    # perf/: what work nobody measured would cost, a room per thing priced; every room states its error (trust)
    "perf.trust": 6,
    "perf.paths": 6,
    "perf.kernels": 7,
    "perf.collectives": 7,
    "perf.cpu": 7,
    "perf.embeddings": 8,
    "perf.accuracy_report": 9,
    "perf": 9,
    "dsl": 10,
    # the API a notebook uses (api/): a run, then what is built from runs
    "api": 11,
    "api.memory": 11,
    "api.whatif": 11,
    "api.replay": 11,
    "api.job": 11,
    "api.job_report": 11,
    "api.job_workers": 11,
    "api.job_whatif": 11,
    "api.workload": 11,
    "api.validate": 12,
    "api.demo": 12,
    "api.compare": 12,
    "api.plan": 12,
    "api.analyses": 12,
    "api.embeddings": 12,
    "api.chakra": 12,
    # presentation/: results rendered for people
    "presentation": 13,
    "presentation.terminal": 13,
    "presentation.plots": 13,
    "presentation.page": 13,
    "presentation.console": 13,
    # commands/: what people type
    "commands": 14,
    "commands.arguments": 14,
    "commands.output": 14,
    # a group of commands each: its flags, its call of the API, what it prints
    "commands.repl": 15,
    "commands.predict": 15,
    "commands.plans": 15,
    "commands.scripts": 15,
    "commands.models": 15,
    "commands.first_steps": 15,
    # the top parser and the dispatch
    "commands.cli": 16,
    "__init__": 17,
    "__main__": 18,
}
# packages whose modules are units of their own (the top of the house: api, presentation, commands; perf's rooms)
SPLIT = frozenset({"perf", "api", "presentation", "commands"})


def _unit(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return _unit_of(parts[:-1] if len(parts) > 1 and parts[-1] == "__init__" else parts)


def _unit_of(parts: list[str]) -> str:
    """The unit of a dotted name's parts after ``daydream``: a module of a split package, or the top-level unit."""
    if parts[0] in SPLIT and len(parts) > 1:
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def _module_name(path: Path) -> list[str]:
    parts = ["daydream", *path.relative_to(PACKAGE).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _is_unit(name: str) -> bool:
    """Whether ``name`` (a dotted path under the package: ``dsl``, ``perf.kernels``) is a module or a package."""
    path = PACKAGE.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _imported_units(path: Path) -> set[str]:
    """The package units ``path`` imports, absolute or relative, at any depth of the module."""
    units: set[str] = set()
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
            # `from daydream import dsl` names the unit in the imported names; `__version__` is the package itself
            if names == ["daydream"]:
                names = [f"daydream.{alias.name}" if _is_unit(alias.name) else "daydream" for alias in node.names]
            elif len(names[0].split(".")) == 2 and names[0].split(".")[1] in SPLIT:
                # `from daydream.api import whatif` names the module in the imported names (`from daydream.perf
                # import Accuracy` a name of the package itself)
                split = names[0].split(".")[1]
                names = [
                    f"{names[0]}.{alias.name}" if _is_unit(f"{split}.{alias.name}") else names[0]
                    for alias in node.names
                ]
        for name in names:
            parts = name.split(".")
            if parts[0] == "daydream":
                units.add(_unit_of(parts[1:]) if len(parts) > 1 else "__init__")
    return units


def _import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = _unit(path)
        graph.add_node(unit)
        for target in _imported_units(path) - {unit}:
            graph.add_edge(unit, target, where=str(path.relative_to(PACKAGE.parent)))
    return graph


def test_every_unit_has_a_layer() -> None:
    unknown = sorted(set(_import_graph()) - set(LAYERS))
    assert not unknown, f"give these package units a rank in LAYERS: {unknown}"


def test_no_lower_layer_imports_a_higher_one() -> None:
    graph = _import_graph()
    upward = [
        f"{data['where']} imports daydream.{b} ({a} is rank {LAYERS[a]}, {b} is rank {LAYERS[b]})"
        for a, b, data in graph.edges(data=True)
        if LAYERS.get(a, 99) < LAYERS.get(b, 99)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle_between_units() -> None:
    cycles = list(nx.simple_cycles(_import_graph()))
    assert not cycles, f"import cycles between package units: {cycles}"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from daydream.perf.kernels.costs import x", {"perf.kernels"}),
        ("from daydream.perf import collectives, Accuracy", {"perf.collectives", "perf"}),
        ("import daydream.dsl.parse", {"dsl"}),
        ("from daydream import dsl, errors", {"dsl", "errors"}),
        ("from daydream import __version__", {"__init__"}),
        ("def f():\n    from daydream.presentation.terminal import x", {"presentation.terminal"}),
        ("from daydream.api import whatif, compare", {"api.whatif", "api.compare"}),
        ("from ..perf import costs", {"perf"}),
        ("from ..perf.cpu import host", {"perf.cpu"}),
    ],
)
def test_imports_are_read_at_any_depth_and_relative(
    tmp_path: Path, source: str, expected: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "daydream" / "graph" / "x.py"
    fake.parent.mkdir(parents=True)
    for unit in ("perf", "perf/kernels", "perf/collectives", "perf/cpu", "dsl", "presentation", "api"):
        (tmp_path / "daydream" / unit).mkdir()
    for module in ("errors", "api/whatif", "api/compare"):
        (tmp_path / "daydream" / f"{module}.py").write_text("")
    fake.write_text(source)
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path / "daydream")
    assert _imported_units(fake) == expected


def test_no_name_shadows_a_module() -> None:
    """``import daydream.x.y`` must give the module: a package that re-exports a function named like one of its
    submodules (``daydream.simulate`` once did) hides that submodule behind the function."""
    import importlib
    import pkgutil
    import types

    shadowed = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "daydream."):
        if not info.ispkg:
            continue
        package = importlib.import_module(info.name)
        for sub in pkgutil.iter_modules(package.__path__):
            value = getattr(package, sub.name, None)
            if value is not None and not isinstance(value, types.ModuleType):
                shadowed.append(f"{info.name}.{sub.name} is {type(value).__name__}")
    top = importlib.import_module("daydream")
    shadowed += [
        f"daydream.{s.name} is {type(getattr(top, s.name)).__name__}"
        for s in pkgutil.iter_modules(top.__path__)
        if not isinstance(getattr(top, s.name, types), (types.ModuleType, type(None))) and s.name != "__main__"
    ]
    assert not shadowed, shadowed
