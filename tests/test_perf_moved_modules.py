"""The modules of daydream.perf from before its rooms (issue 77) still import: each old name gives the module at its
new place, the same object, with a DeprecationWarning that names the new place; objects pickle by the new path, in
this process and in a spawned one."""

from __future__ import annotations

import importlib
import multiprocessing
import pickle
import sys
import warnings

import pytest

import daydream.perf as perf

OLD = (
    "daydream.perf."  # the old names are written as this prefix and the module's name, so a rewrite of paths skips them
)


@pytest.mark.parametrize("old, new", sorted(perf.MOVED.items()))
def test_an_old_name_imports_the_module_at_its_new_place(old: str, new: str) -> None:
    sys.modules.pop(OLD + old, None)
    with pytest.warns(DeprecationWarning, match=f"{OLD + old} moved to daydream.perf.{new}"):
        module = importlib.import_module(OLD + old)
    assert module is importlib.import_module(f"daydream.perf.{new}")


def test_from_an_old_name_import_a_class() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        costs = importlib.import_module(OLD + "costs")
        uncertainty = importlib.import_module(OLD + "uncertainty")
    from daydream.perf.kernels.costs import Cost
    from daydream.perf.trust.uncertainty import Interval

    assert costs.Cost is Cost and uncertainty.Interval is Interval
    assert Cost.__module__ == "daydream.perf.kernels.costs"


def test_the_moved_collective_model_keeps_its_path() -> None:
    from daydream.perf.collectives import Link, collective_us

    assert Link.__module__ == "daydream.perf.collectives" and perf.collective_us is collective_us


def _roundtrip(data: bytes) -> bytes:
    return pickle.dumps(pickle.loads(data))


def test_objects_of_moved_modules_pickle_across_a_spawned_process() -> None:
    from daydream.perf.kernels.costs import Cost
    from daydream.perf.trust.accuracy import Accuracy

    things = [Cost(1.0, 2.0), Accuracy("m", 1.5, 3, "d")]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        back = pickle.loads(pool.apply(_roundtrip, (pickle.dumps(things),)))
    assert back == things


@pytest.mark.parametrize("old, new", sorted(__import__("daydream.graph", fromlist=["MOVED"]).MOVED.items()))
def test_the_builders_old_module_names_import_its_room(old: str, new: str) -> None:
    """graph/'s builder became a room (daydream.graph.build): its stages' old names import their modules there."""
    name = "daydream.graph." + old
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=f"{name} moved to daydream.graph.{new}"):
        module = importlib.import_module(name)
    assert module is importlib.import_module(f"daydream.graph.{new}")
