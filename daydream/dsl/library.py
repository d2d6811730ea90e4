"""Finding, reading and describing .whatif scripts: files, includes, the bundled library of transforms."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from daydream.dsl import ast
from daydream.dsl.check import Checker, user_attributes
from daydream.dsl.limits import MAX_SCRIPT_BYTES, Budget
from daydream.dsl.parse import parse_script, script_error
from daydream.errors import ScriptError, did_you_mean
from daydream.files import clip, read_input


def library_dirs() -> list[Path]:
    """Where ``include "NAME"`` and ``daydream run TRACE NAME`` look when NAME is not a file: the bundled transforms."""
    root = files("daydream").joinpath("transforms")
    return [Path(str(root))] if root.is_dir() else []


def library_name(path: str | os.PathLike[str]) -> str | None:
    """The bundled library's name of a script (``amp``, ``.../transforms/amp.whatif`` -> ``amp``: found as
    :meth:`Loader.find` finds it); None for one of the user's own."""
    real = os.path.realpath(Loader().find(path))
    for root in library_dirs():
        if os.path.dirname(real) == os.path.realpath(root) and real.endswith(".whatif"):
            return Path(real).stem
    return None


def library_names() -> list[str]:
    """The bundled library's script names (``amp``, ``ddp``, ...)."""
    return sorted(f.stem for d in library_dirs() for f in d.glob("*.whatif"))


def script_path(
    base: Path | None, script: str, where: str = "", include_dirs: Iterable[str | os.PathLike[str]] = ()
) -> str:
    """A script as a scenarios or cases file names it: a bare name is the bundled library's, a path is relative to
    the file's folder ``base``. ``base`` None: a script given on the command line, taken as it is.

    A file's scripts are data, like an ``include``: a bare name is looked up in the library only (never a file of
    the working directory), and a path must lead (after symlinks) to a ``.whatif`` file in ``base``'s folder tree,
    the bundled library or one of ``include_dirs``; anything else is refused, without being read, by an error
    naming ``where`` (the file and entry)."""
    if base is None:
        return script
    at = f"{where}: " if where else ""
    if "/" not in script and os.sep not in script and not script.endswith(".whatif"):
        if any((d / f"{script}.whatif").is_file() for d in library_dirs()):
            return script  # Loader.find takes a bare library name from the library, before any file of that name
        raise Unreadable(f"{at}script {clip(script, 200)!r}: no such script in the library; {library_hint(script)}")
    path = base / script
    real = os.path.realpath(path)
    roots = [os.path.realpath(r) for r in (base, *library_dirs(), *include_dirs)]
    if not real.endswith(".whatif"):
        why = "only .whatif files are scripts"
    elif not any(_inside(real, root) for root in roots):
        why = "it is outside the folders a file may name scripts from"
    else:
        return str(path)
    raise Unreadable(
        f"{at}script {clip(script, 200)!r}: refused: {why}; a scenarios or cases file names the bundled "
        "library's scripts by name and .whatif files in its own folder (and below) or in a folder given "
        "with --include-dir"
    )


def library_hint(name: str) -> str:
    """What to say about a script name that is neither a file nor in the library: the closest library name, and
    where the list is."""
    close = did_you_mean(name.removesuffix(".whatif"), library_names())
    return (
        f"{close} (the library: daydream list)" if close else "not a file, nor in the library (daydream list shows it)"
    )


class Unreadable(ScriptError):
    """A script file that cannot be read: missing, not a regular file, too large, not UTF-8 text."""


def read_script(path: str | os.PathLike[str], shown: str | os.PathLike[str] | None = None) -> str:
    """The text of a script file: a regular file (a FIFO, a device or a directory is refused without blocking on
    it) of at most MAX_SCRIPT_BYTES bytes, UTF-8, read through the one checked opener (daydream.files.read_input).
    Errors name the file (``shown``), never its content."""
    name = os.fspath(shown if shown is not None else path)
    try:
        data = read_input(path, "script", MAX_SCRIPT_BYTES, Unreadable)
    except Unreadable as exc:  # the opener names the path it opened; a message names the script as the user wrote it
        raise Unreadable(str(exc).replace(os.fspath(path), name, 1)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{name}: not a text file (UTF-8): {exc.reason} at byte {exc.start}") from None


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


class Loader:
    """Reads scripts (each file once) and resolves includes; keeps every text for error messages.

    ``include`` reads only ``.whatif`` files (after symlinks) in the folder of the including script or below, in
    the folders of the scripts loaded to run (``load``) or below, in the bundled library, or in ``include_dirs``."""

    def __init__(self, include_dirs: Iterable[str | os.PathLike[str]] | None = None) -> None:
        self.texts: dict[str, str] = {}
        self._scripts: dict[str, ast.Script] = {}
        self.include_dirs = [Path(d) for d in include_dirs or ()]
        self._roots: list[str] = []  # the folders of the scripts run

    def in_library(self, file: str) -> bool:
        """Whether ``file`` (a loaded script's) is one of the bundled library's, or one of its parts."""
        real = os.path.realpath(file)
        return any(real.startswith(os.path.realpath(d) + os.sep) for d in library_dirs())

    def find(self, path: str | os.PathLike[str]) -> Path:
        """A script path as given, or a name from the bundled library (``amp`` -> transforms/amp.whatif)."""
        p = Path(path)
        text = str(path)
        if os.sep in text or "/" in text:
            return p
        if not text.endswith(".whatif"):  # a bare name is the library's first: `amp` never reads a file named amp here
            for d in library_dirs():
                c = d / f"{text}.whatif"
                if c.is_file():
                    return c
        if p.exists():
            return p
        for d in library_dirs():
            c = d / text
            if c.is_file():
                return c
        return p

    def load(self, path: str | os.PathLike[str]) -> ast.Script:
        """Parse a script file to run (cached by its resolved path): a regular file of at most MAX_SCRIPT_BYTES.
        Its folder becomes one the scripts may include from."""
        p = self.find(path)
        if not p.exists() and os.sep not in str(path) and "/" not in str(path):
            raise Unreadable(f"{path}: no such script; {library_hint(str(path))}")
        script = self._load(p, path)
        root = os.path.realpath(p.parent if str(p.parent) else ".")
        if root not in self._roots:
            self._roots.append(root)
        return script

    def _load(self, p: Path, shown: str | os.PathLike[str]) -> ast.Script:
        key = str(p.resolve()) if p.exists() else str(p)
        if key in self._scripts:
            return self._scripts[key]
        text = read_script(p, shown)
        script = parse_script(text, str(p))
        self._scripts[key] = script
        self.texts[script.file] = text
        return script

    def include_roots(self, current: ast.Script) -> list[str]:
        """The folders (resolved) whose .whatif files ``current`` may include, its own first."""
        own = Path(current.file).parent if not current.file.startswith("<") else Path.cwd()
        roots = [
            os.path.realpath(own),
            *self._roots,
            *(os.path.realpath(d) for d in (*library_dirs(), *self.include_dirs)),
        ]
        return list(dict.fromkeys(roots))

    def _refusal(self, candidate: Path, current: ast.Script) -> str | None:
        """Why ``candidate`` may not be included from ``current``, or None."""
        real = os.path.realpath(candidate)
        if not real.endswith(".whatif"):
            return "only .whatif files can be included"
        if not any(_inside(real, root) for root in self.include_roots(current)):
            return "it is outside the folders a script may include from"
        return None

    def resolve_include(self, path: str, current: ast.Script, node: ast.Include) -> ast.Script:
        """``include "x.whatif"``: next to the including script (or the working directory for typed input),
        then, for a bare name, the bundled library. Only .whatif files inside the folders of ``include_roots``
        (after symlinks) are read; anything else is refused without being opened."""
        candidates = []
        if os.path.isabs(path):
            candidates.append(Path(path))
        else:
            base = Path(current.file).parent if not current.file.startswith("<") else Path.cwd()
            candidates.append(base / path)
            if os.sep not in path and "/" not in path:
                for d in library_dirs():
                    candidates += [d / path, d / f"{path}.whatif"]
        refused: str | None = None
        for c in candidates:
            if not os.path.lexists(c) or c.is_dir():
                continue
            why = self._refusal(c, current)
            if why is not None:
                refused = refused or why
                continue
            try:
                return self._load(c, c)
            except Unreadable as exc:
                raise script_error(f"include {clip(path, 200)!r}: {exc}", node.pos, current.text) from None
        if refused is not None:
            raise script_error(
                f"include {clip(path, 200)!r}: refused: {refused}; a script includes .whatif files from its own folder "
                "(and below), the folders of the scripts run, the bundled library (daydream list) and the folders "
                "given with --include-dir (Python API: include_dirs=...)",
                node.pos,
                current.text,
            )
        raise script_error(
            f"include {clip(path, 200)!r}: no such script (looked for"
            f" {', '.join(clip(str(c), 200) for c in candidates)})",
            node.pos,
            current.text,
        )

    def source(self, node: Any) -> str:
        """A node's text, on one line: for warnings, messages and the statement of an Effect."""
        text = self.texts.get(node.pos.file, "")
        return " ".join(text[node.pos.start : node.pos.end].split())

    def error(self, message: str, node: Any, hint: str | None = None) -> ScriptError:
        """A ScriptError at a node, with its line from the text it was parsed from."""
        pos = getattr(node, "pos", None)
        return script_error(message, pos, self.texts.get(pos.file) if pos else None, hint)


def script_inputs(
    scripts: Iterable[str | os.PathLike[str]], include_dirs: Iterable[str | os.PathLike[str]] | None = None
) -> list[str]:
    """Every file running ``scripts`` reads: each script and, followed statically, every script it includes (the
    includes a run would refuse are left out: the run stops on them before writing anything). Read before the work,
    so that an output is checked against all of them (daydream.files.check_output_path)."""
    loader = Loader(include_dirs)
    for script in scripts:
        user_attributes(loader.load(script), loader.resolve_include)
    return [f for f in loader.texts if not f.startswith("<")]


@dataclass
class ScriptInfo:
    path: str
    name: str
    summary: str  # the docstring's first paragraph, on one line (its first sentence may span two)
    docstring: str
    params: list[tuple[str, str]]
    statements: int
    error: str | None = (
        None  # why the script cannot be used (read, parsed or checked): describe_scripts(keep_going=True)
    )


def check_files(
    paths: list[str], include_dirs: Iterable[str | os.PathLike[str]] | None = None, budget: int | None = None
) -> list[str]:
    """Parse and check each script without a trace; one line per script. Raises the first ScriptError.
    ``include_dirs``: more folders includes may read from; ``budget``: the work units each script's check may use."""
    loader = Loader(include_dirs)
    out = []
    for path in paths:
        script = loader.load(path)
        checker = Checker(loader.resolve_include, budget=Budget(budget))
        checker.check(script)
        params = ", ".join(
            f"{name} = {script_source(p.default, checker.params[name], loader)}" for name, p in checker.params.items()
        )
        n = len(script.statements)
        out.append(
            f"ok  {script.file}: {n} statement{'s' if n != 1 else ''}" + (f"; params {params}" if params else "")
        )
    return out


def script_source(node: ast.Expr, param: ast.Param, loader: Loader) -> str:
    text = loader.texts.get(param.pos.file, "")
    return " ".join(text[node.pos.start : node.pos.end].split())


def describe_scripts(paths: list[str], keep_going: bool = False) -> list[ScriptInfo]:
    """Each script's docstring (or leading comments) and params; directories are searched for *.whatif.

    ``keep_going`` (``daydream list``): every script is also checked as ``daydream check`` does, and one that cannot
    be read, parsed or checked is described by its ``error`` while the others are still described; otherwise the
    first script that cannot be read or parsed raises its ScriptError."""
    loader = Loader()  # reads each script (includes only to check them)
    targets: list[Path] = []
    for p in [Path(x) for x in paths] or library_dirs():
        if p.is_dir():
            targets += sorted(p.glob("*.whatif"))
        else:
            targets.append(loader.find(p))
    out = []
    for t in targets:
        try:
            script = loader.load(t)
            if keep_going:
                Checker(loader.resolve_include).check(script)
        except ScriptError as exc:
            if not keep_going:
                raise
            out.append(
                ScriptInfo(path=str(t), name=t.stem, summary="", docstring="", params=[], statements=0, error=str(exc))
            )
            continue
        doc = script.docstring or "\n".join(script.comments)
        out.append(
            ScriptInfo(
                path=str(t),
                name=t.stem,
                summary=" ".join(doc.strip().split("\n\n")[0].split()),
                docstring=doc,
                params=[(p.name, " ".join(script.source(p.default).split())) for p in script.params],
                statements=len(script.statements),
            )
        )
    return out
