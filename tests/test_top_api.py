"""The notebook API at the top of the package: ``from daydream import whatif, compare, plan, ScriptError, ...``, each
name the very object of the module it comes from, loaded on first use so that ``import daydream`` stays cheap."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import daydream


@pytest.mark.parametrize("name", daydream.__all__)
def test_every_top_name_is_the_object_of_its_module(name: str) -> None:
    module = importlib.import_module(f"daydream.{daydream._WHERE[name]}")
    assert getattr(daydream, name) is getattr(module, name)


def test_the_names_a_notebook_starts_with_are_at_the_top() -> None:
    from daydream import RunOptions, Scenario, ScriptError, TraceError, Workload, compare, plan, replay, whatif

    assert whatif.__module__ == "daydream.api.whatif" and compare.__module__ == "daydream.api.compare"
    assert Scenario.__module__ == "daydream.api.compare"  # the scenario of a comparison, not the demo's
    assert {plan.__module__, replay.__module__, Workload.__module__, RunOptions.__module__} == {
        "daydream.api.plan",
        "daydream.api.replay",
        "daydream.api.workload",
    }
    assert issubclass(ScriptError, daydream.DaydreamError) and issubclass(TraceError, daydream.DaydreamError)


def test_dir_and_all_list_the_names() -> None:
    assert sorted(daydream.__all__) == daydream.__all__ == sorted(daydream._WHERE)
    assert set(daydream.__all__) <= set(dir(daydream)) and "__version__" in dir(daydream)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'whatiff'"):
        daydream.whatiff  # noqa: B018
    with pytest.raises(ImportError):
        from daydream import whatiff  # noqa: F401


def test_import_daydream_loads_no_module_of_the_api() -> None:
    code = "import sys, daydream; print(sorted(m for m in sys.modules if m.startswith('daydream')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["daydream", "daydream._version"]
