"""Modules that moved keep their old import paths: ``import daydream.perf.roofline`` gets the module now at
``daydream.perf.kernels.roofline`` (one module object, so a class keeps one identity and pickles by its new path),
with a DeprecationWarning naming the new path. A package that moved modules registers its map once
(:func:`keep_old_paths`)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from typing import Any


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``PACKAGE.<old name>`` and loads it as the module at its new place: the module made for the old name is
    replaced in ``sys.modules`` by the new one, which the import system then returns (it reads the module back from
    ``sys.modules`` after loading, for modules that replace themselves)."""

    def __init__(self, package: str, moved: dict[str, str]) -> None:
        self.prefix = f"{package}."
        self.moved = moved

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.prefix) or fullname[len(self.prefix) :] not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a plain module, replaced by exec_module

    def exec_module(self, module: Any) -> None:
        new = self.prefix + self.moved[module.__name__[len(self.prefix) :]]
        warnings.warn(f"{module.__name__} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        sys.modules[module.__name__] = importlib.import_module(new)


def keep_old_paths(package: str, moved: dict[str, str]) -> None:
    """Old name -> new name of the modules of ``package`` that moved (both under it): the old names import the new
    modules. Once per package, however often it is reloaded."""
    if not any(isinstance(f, MovedModules) and f.prefix == f"{package}." for f in sys.meta_path):
        sys.meta_path.append(MovedModules(package, moved))
