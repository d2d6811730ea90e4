"""Finding, reading and describing .whatif scripts: files, includes, the bundled library of transforms."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from daydream.dsl import ast
from daydream.dsl.check import Checker
from daydream.dsl.parse import parse_script, script_error
from daydream.errors import ScriptError


def library_dirs() -> list[Path]:
    """Where ``include "NAME"`` and ``daydream run TRACE NAME`` look when NAME is not a file: the bundled transforms."""
    root = files("daydream").joinpath("transforms")
    return [Path(str(root))] if root.is_dir() else []


class Loader:
    """Reads scripts (each file once) and resolves includes; keeps every text for error messages."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self._scripts: dict[str, ast.Script] = {}

    def find(self, path: str | os.PathLike[str]) -> Path:
        """A script path as given, or a name from the bundled library (``amp`` -> transforms/amp.whatif)."""
        p = Path(path)
        if p.exists() or os.sep in str(path) or "/" in str(path):
            return p
        for d in library_dirs():
            for c in (d / str(path), d / f"{path}.whatif"):
                if c.is_file():
                    return c
        return p

    def load(self, path: str | os.PathLike[str]) -> ast.Script:
        """Parse a script file (cached by its resolved path)."""
        p = self.find(path)
        key = str(p.resolve()) if p.exists() else str(p)
        if key in self._scripts:
            return self._scripts[key]
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScriptError(f"{path}: no such script") from None
        except IsADirectoryError:
            raise ScriptError(f"{path}: is a directory, not a script") from None
        except UnicodeDecodeError as exc:
            raise ScriptError(f"{path}: not a text file (UTF-8): {exc.reason} at byte {exc.start}") from None
        except OSError as exc:
            raise ScriptError(f"{path}: cannot read: {exc.strerror}") from None
        script = parse_script(text, str(p))
        self._scripts[key] = script
        self.texts[script.file] = text
        return script

    def resolve_include(self, path: str, current: ast.Script, node: ast.Include) -> ast.Script:
        """``include "x.whatif"``: next to the including script (or the working directory for typed input),
        then, for a bare name, the bundled library."""
        candidates = []
        if os.path.isabs(path):
            candidates.append(Path(path))
        else:
            base = Path(current.file).parent if not current.file.startswith("<") else Path.cwd()
            candidates.append(base / path)
            if os.sep not in path and "/" not in path:
                for d in library_dirs():
                    candidates += [d / path, d / f"{path}.whatif"]
        for c in candidates:
            if c.is_file():
                return self.load(c)
        raise script_error(
            f"include {path!r}: no such script (looked for {', '.join(str(c) for c in candidates)})", node.pos, current.text
        )

    def source(self, node: Any) -> str:
        """A node's text, on one line: for warnings, messages and the statement of an Effect."""
        text = self.texts.get(node.pos.file, "")
        return " ".join(text[node.pos.start : node.pos.end].split())

    def error(self, message: str, node: Any, hint: str | None = None) -> ScriptError:
        """A ScriptError at a node, with its line from the text it was parsed from."""
        pos = getattr(node, "pos", None)
        return script_error(message, pos, self.texts.get(pos.file) if pos else None, hint)


@dataclass
class ScriptInfo:
    path: str
    name: str
    summary: str
    docstring: str
    params: list[tuple[str, str]]
    statements: int


def check_files(paths: list[str]) -> list[str]:
    """Parse and check each script without a trace; one line per script. Raises the first ScriptError."""
    loader = Loader()
    out = []
    for path in paths:
        script = loader.load(path)
        checker = Checker(loader.resolve_include)
        checker.check(script)
        params = ", ".join(f"{name} = {script_source(p.default, checker.params[name], loader)}" for name, p in checker.params.items())
        n = len(script.statements)
        out.append(f"ok  {script.file}: {n} statement{'s' if n != 1 else ''}" + (f"; params {params}" if params else ""))
    return out


def script_source(node: ast.Expr, param: ast.Param, loader: Loader) -> str:
    text = loader.texts.get(param.pos.file, "")
    return " ".join(text[node.pos.start : node.pos.end].split())


def describe_scripts(paths: list[str]) -> list[ScriptInfo]:
    """Each script's docstring (or leading comments) and params; directories are searched for *.whatif."""
    loader = Loader()
    targets: list[Path] = []
    for p in [Path(x) for x in paths] or library_dirs():
        if p.is_dir():
            targets += sorted(p.glob("*.whatif"))
        else:
            targets.append(loader.find(p))
    out = []
    for t in targets:
        script = loader.load(t)
        doc = script.docstring or "\n".join(script.comments)
        out.append(
            ScriptInfo(
                path=str(t), name=t.stem, summary=doc.strip().splitlines()[0] if doc.strip() else "", docstring=doc,
                params=[(p.name, " ".join(script.source(p.default).split())) for p in script.params],
                statements=len(script.statements),
            )  # fmt: skip
        )
    return out
