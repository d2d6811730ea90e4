"""The entry points a notebook calls have structured docstrings (Parameters, Returns, Raises, Examples, as networkx's
do), every parameter named, and their examples run: on the bundled trace, under doctest, here."""

from __future__ import annotations

import doctest
import inspect
import re

import pytest

import daydream

# the ten a notebook calls first, and the error it meets most
ENTRY_POINTS = [
    "whatif",
    "replay",
    "compare",
    "plan",
    "Scenario",
    "Workload",
    "RunOptions",
    "load_trace",
    "build_graph",
    "simulate",
]
EXAMPLES = [*ENTRY_POINTS, "TraceError"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_examples_run(name: str) -> None:
    obj = getattr(daydream, name)
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, name, globs={}) if t.examples]
    assert tests, f"{name}: no example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    for test in tests:
        runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_the_docstring_is_structured(name: str) -> None:
    obj = getattr(daydream, name)
    doc = inspect.getdoc(obj) or ""
    sections = re.findall(r"^(\w[\w ]*)\n-+$", doc, re.MULTILINE)
    assert "Parameters" in sections and "Examples" in sections, f"{name}: sections {sections}"
    if inspect.isfunction(obj):
        assert "Returns" in sections, f"{name}: no Returns"
    described = set(re.findall(r"^(\w+) : ", doc, re.MULTILINE))
    if inspect.isclass(obj):
        params = set(getattr(obj, "__struct_fields__", ()) or getattr(obj, "__dataclass_fields__", {}))
    else:
        params = set(inspect.signature(obj).parameters)
    assert params <= described, f"{name}: parameters not described: {sorted(params - described)}"
