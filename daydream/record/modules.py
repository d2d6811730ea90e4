"""Profiler ranges for every module's forward pass and for the gradient accumulation of its parameters.

Forward: torch's global module hooks open a ``daydream.module: <path>`` range before a module's ``forward`` and close
it after. The graph builder reads the range as the layer of every op inside it, and maps each backward op to the
layer of the forward op with the same autograd sequence number, so no backward hooks are needed (torch's global
full-backward hooks wrap module outputs and break in-place ops on them).

Gradient accumulation: ``AccumulateGrad`` has no sequence number, so the range goes around it: a pre-hook and a hook
on each parameter's accumulation node (the node DDP and FSDP hook into too). Nothing here synchronizes a device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

try:  # torch >= 2.2: a range without the Python object of record_function, ~10x cheaper per module call
    from torch._C._profiler import _RecordFunctionFast as _Range
except ImportError:  # pragma: no cover - older torch
    from torch.autograd.profiler import record_function as _Range

from daydream.trace.model import RECORDER_RANGE_PREFIX as RANGE_PREFIX  # read back by the graph builder

# Attributes through which wrappers hold the model: their names are not part of a layer's path.
_WRAPPER_ATTRIBUTES = frozenset({"module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})
WRAPPER_TYPES = frozenset({"DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "OptimizedModule"})


_profiling = torch.autograd._profiler_enabled


# Looked up once: the hooks run on every module call. Inside torch.compile's tracing they add no ranges.
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)


def unwrap(module: nn.Module) -> nn.Module:
    """The model inside DDP / DataParallel / FSDP / torch.compile wrappers."""
    while type(module).__name__ in WRAPPER_TYPES:
        inner = getattr(module, "module", None) or getattr(module, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            break
        module = inner
    return module


def module_path(root_name: str, dotted: str) -> str:
    """``MLP`` + ``module.body.0`` -> ``MLP.body.0``: wrapper attributes dropped."""
    parts = [p for p in dotted.split(".") if p and p not in _WRAPPER_ATTRIBUTES]
    return ".".join([root_name, *parts])


class ModuleNames:
    """Names every module by its path from the outermost module that ran it: ``MLP.body.0``.

    A root (a module whose forward runs outside any other's) is named by its class, numbered when two roots share a
    class (``Linear``, ``Linear#1``). A module seen first outside its root's tree is named by its class under the
    module that called it.
    """

    def __init__(self) -> None:
        self.paths: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self.roots: dict[str, weakref.ref[nn.Module]] = {}
        self._root_count: dict[str, int] = {}

    def add_root(self, root: nn.Module) -> str:
        cls = type(unwrap(root)).__name__
        n = self._root_count.get(cls, 0)
        self._root_count[cls] = n + 1
        name = cls if n == 0 else f"{cls}#{n}"
        self.roots[name] = weakref.ref(root)
        for dotted, module in root.named_modules(remove_duplicate=True):
            self.paths.setdefault(module, module_path(name, dotted))
        return name

    def path(self, module: nn.Module, caller: nn.Module | None) -> str:
        found = self.paths.get(module)
        if found is not None:
            return found
        if caller is None:
            self.add_root(module)
            return self.paths[module]
        path = f"{self.paths.get(caller, type(caller).__name__)}.{type(module).__name__}"
        self.paths[module] = path
        return path

    def parameters(self, roots: list[str] | None = None) -> Iterator[tuple[str, str, nn.Parameter]]:
        """(module path, parameter name, parameter) for the parameters of the named roots (default: every live
        root), each once."""
        seen: set[int] = set()
        for name in self.roots if roots is None else roots:
            root = self.roots[name]()
            if root is None:
                continue
            for owner_dotted, owner in root.named_modules():
                owner_path = self.paths.get(owner) or module_path(name, owner_dotted)
                for pname, p in owner.named_parameters(recurse=False):
                    if id(p) not in seen:
                        seen.add(id(p))
                        yield owner_path, pname, p


class ModuleRanges:
    """Installs the global hooks; ``close()`` removes them. ``on_root_forward`` is called when a root's forward starts
    (the recorder tells iterations apart with it).

    Global module hooks put every module call on torch's slow path (a few microseconds each), so the recorder turns
    them off (``active = False``) in the warm-up steps where it needs neither ranges nor forward passes."""

    def __init__(self, names: ModuleNames, on_root_forward: Callable[[nn.Module], None] | None = None) -> None:
        self.names = names
        self.on_root_forward = on_root_forward
        self.stack: list[tuple[nn.Module, Any]] = []
        self._grad_nodes: dict[int, Any] = {}  # id(parameter) -> its AccumulateGrad node, kept alive for its hooks
        self._open: dict[int, list[Any]] = {}  # id(node) -> open ranges (pre-hook entered, hook not yet run)
        self._hooked: set[str] = set()  # roots whose parameters all have their accumulation hooked
        self._handles: list[Any] = []
        self.active = True

    @property
    def active(self) -> bool:
        return bool(self._handles)

    @active.setter
    def active(self, on: bool) -> None:
        if on and not self._handles:
            self._handles = [
                nn.modules.module.register_module_forward_pre_hook(self._pre),
                _register_forward_hook(self._post),
            ]
        elif not on:
            for h in self._handles:
                h.remove()
            self._handles = []
            self._unwind()

    def _unwind(self) -> None:
        while self.stack:
            rf = self.stack.pop()[1]
            if rf is not None:
                rf.__exit__(None, None, None)

    def close(self) -> None:
        self.active = False
        for node_hooks in self._grad_nodes.values():
            for h in node_hooks[1:]:
                h.remove()
        self._grad_nodes.clear()

    # ---- forward ---------------------------------------------------------------------------------------------

    def _pre(self, module: nn.Module, args: Any) -> None:
        if _compiling():
            return
        caller = self.stack[-1][0] if self.stack else None
        path = self.names.path(module, caller)
        if caller is None:
            if self.on_root_forward is not None:
                self.on_root_forward(module)
            if len(self._hooked) < len(self.names.roots) and torch.is_grad_enabled():
                self._hook_gradients()
            if not self._handles:  # the callback turned the hooks off: this call's post-hook will not run
                return
        rf = None
        if _profiling():  # outside the recorded steps the hooks only name modules and find iterations
            rf = _Range(RANGE_PREFIX + path)
            rf.__enter__()
        self.stack.append((module, rf))

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if _compiling():
            return
        if not any(top is module for top, _ in self.stack):
            return  # its pre-hook ran while the hooks were off (they were turned on inside its forward)
        # A forward that raised skipped its own post-hook (torch < 2.1): close what it left open too.
        while self.stack:
            top, rf = self.stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)
            if top is module:
                break

    # ---- gradient accumulation -----------------------------------------------------------------------------

    def _hook_gradients(self) -> None:
        for root in [r for r in self.names.roots if r not in self._hooked]:
            if all([self._hook_gradient(owner_path, p) for owner_path, _, p in self.names.parameters([root])]):
                self._hooked.add(root)

    def _hook_gradient(self, owner_path: str, p: nn.Parameter) -> bool:
        """Hook the accumulation of ``p``'s gradient: False where it has no accumulation node yet."""
        if id(p) in self._grad_nodes or not p.requires_grad:
            return True
        grad_fn = p.view_as(p).grad_fn
        node = grad_fn.next_functions[0][0] if grad_fn is not None and grad_fn.next_functions else None
        if node is None or not hasattr(node, "register_prehook"):
            return False
        name = RANGE_PREFIX + owner_path
        key = id(node)

        def enter(grad_outputs: Any, name: str = name, key: int = key) -> None:
            if not _profiling():
                return
            rf = _Range(name)
            rf.__enter__()
            self._open.setdefault(key, []).append(rf)

        def leave(grad_inputs: Any, grad_outputs: Any, key: int = key) -> None:
            opened = self._open.get(key)
            if opened:
                opened.pop().__exit__(None, None, None)

        self._grad_nodes[id(p)] = (node, node.register_prehook(enter), node.register_hook(leave))
        return True


def _register_forward_hook(hook: Callable[..., None]) -> Any:
    try:  # always_call (torch >= 2.1): the hook runs even when forward raises
        return nn.modules.module.register_module_forward_hook(hook, always_call=True)
    except TypeError:
        return nn.modules.module.register_module_forward_hook(hook)
