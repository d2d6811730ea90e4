"""A mutation fuzzer of the command line: hostile traces, scripts, output paths and signals, and what the CLI does.

    python bench/fuzz_cli.py [--cases 4000] [--seed 0] [--timeout 15] [--jobs 2] [--out fuzz-report.json]

Each case is one CLI run (`daydream run TRACE SCRIPT --json`, `daydream simulate TRACE`, `daydream plan TRACE`,
`daydream check SCRIPT`) on
inputs made by mutating real ones: the bundled example trace and those of ../shared/traces (the smaller ones) at
the byte level (flips, cuts, inserted bytes, truncation) and the JSON level (fields given other types, huge or
non-finite numbers, deep nesting, names holding rich markup or invalid UTF-8, events removed or duplicated), special
files (a FIFO, /dev/zero, a directory, a symlink loop, an empty file, a gzip bomb); and the bundled library scripts
mutated token by token or given hostile snippets (deep nesting, long literals, huge powers, catastrophic regexes,
long loops, includes of /etc/passwd and /proc/self/environ). And the surfaces of the second round of hostile input:
output targets of every kind (a FIFO, a socket, a pseudo-terminal standing in for a device, symlinks to each and to
/proc/self/fd/1, a directory, a dangling link; look-alikes made in the case's folder, never the machine's /dev) for
`--export-trace`, `compare --save` and `report --out`; outputs onto every input of the run (the trace, its sidecar, a
hard link to it, the script, an included script, the scenarios file); files whose headers lie about their sizes
(.npy headers of 10^11-10^13 rows, rank numbers and world sizes of 10^11, tables files of zeros); op names that
matplotlib reads as math and trace file names with undecodable bytes; and SIGINT or SIGTERM at a random moment. And
the surfaces of the third round (issue 80): DSL functions that walk the whole graph called in loops (`for i in
range(100000) { let r = linears() }`, with and without `--budget`); numbers past any count, size or time (400-digit
integers, inf, nan, 1e400, 1e300, negatives, full-width digits) in scenarios, cases and tables files (TOML), saved
results files (`--against`: predictions of 0, below 0 or non-finite, nesting 100,000 deep), flags and `-p` values;
names holding C0 and C1 controls and escape sequences (op names, a table's name, a file name, a script's print); and
outputs aimed into input folders (a job folder made of copies of the bundled example, directly or through a symlink;
a `.whatif` name in an `--include-dir`).

Each run happens in a forked child with its own working directory, stdout and stderr to files, killed past
`--timeout` seconds. A case fails when: an exception escaped (a traceback, or the CLI's "internal error", exit 70),
the run hung (killed), the exit status is not one the CLI documents (0-4; 130 and 143 for a signal sent), an input
changed, a file appeared that the run was not asked to write, a temporary file was left behind, an output target
that is not a regular file changed kind (a FIFO replaced by a file), the output is longer than a bound, or the output
holds text from a file a script must not read (a line of /etc/passwd, a secret put in the environment); and for the
third round's surfaces: an input folder gained or lost a file, a control character reached the terminal raw (stdout
but for --json's, and stderr), or a report's SVG is not well-formed XML or its page holds a control character. A
hang of a LONG_LOOP loop of walking DSL functions under the default budget is counted apart (`part_a_hangs`): each
call charged for its walk is issue 80's part A, another session's work. Prints a summary and writes every
failure (its inputs kept under the report's folder) to `--out`. A benchmark-style tool: not part of the test suite
(tests/test_hostile_*.py hold the regression tests and a seeded, time-bounded sample).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
SECRET = "DAYDREAM_FUZZ_SECRET_9f1c2e"
OUTPUT_BOUND = 2_000_000  # bytes of stdout + stderr a run may print
DOCUMENTED_EXITS = {0, 1, 2, 3, 4}
SIGNALLED_EXITS = {signal.SIGINT: 130, signal.SIGTERM: 143}

HOSTILE_SNIPPETS = [
    "let x = " + "(" * 3000 + "1" + ")" * 3000,
    "let x = " + "(" * 1_000_000,
    "let x = " + "9" * 30_000,
    "let x = " + "1" * 5000,
    "let x = 9 ** 9 ** 9",
    'let x = "x" * 10000000000',
    "let x = range(1000000000)",
    "for i in range(100000000) { let y = i }",
    "let x = [1][1e309]",
    'let x = "' + "a" * 10_000_000 + '"',
    'assert "' + "a" * 40 + '!" ~ "^(a+)+$"',
    'let x = "a" ~ "(?P<x>a)(?P=x)+"',
    'include "/etc/passwd"',
    'include "/proc/self/environ"',
    'include "/dev/zero"',
    'include "../../../../etc/hosts"',
    "set (select kernel).duration = 1e308 * 10",
    "set (select cpu).duration = 0 / 0",
    "set (select cpu).gap = -1",
    'print "[bold red]markup[/k]"',
    "let x = -" * 2000 + "1",
    "scale (select cpu) by 1e-400",
    "let ranks = 1e999\nlet y = allreduce(1MB, ranks = ranks)",
]


def _small_traces() -> list[Path]:
    from daydream.api.demo import bundled_example

    out = [Path(bundled_example())]
    if SHARED.is_dir():
        for p in sorted(SHARED.rglob("*.json.gz")):
            if p.stat().st_size < 400_000 and "_et" not in p.name and ".et." not in p.name:
                out.append(p)
    return out


def _library() -> list[Path]:
    return sorted((ROOT / "daydream" / "transforms").glob("*.whatif"))


def _read_json(path: Path) -> Any:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


HOSTILE_VALUES: list[Any] = [
    None,
    "",
    "abc",
    "[/k]",
    "[bold red]x",
    -1,
    0,
    1e400,
    -1e400,
    1e308,
    2**80,
    True,
    [],
    {},
    [[[[[]]]]],
    "\udcff",
    "\u202e",
    "a" * 100_000,
    1.5,
    -0.0,
]


def mutate_trace(rng: random.Random, src: Path, dest: Path) -> None:
    """A mutated copy of ``src`` at ``dest`` (byte- or JSON-level, sometimes gzipped)."""
    kind = rng.random()
    raw = src.read_bytes()
    if kind < 0.3:  # bytes of the JSON text
        text = bytearray(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            i = rng.randrange(max(1, len(text)))
            if op < 0.3:
                text[i : i + rng.randint(1, 50)] = b""
            elif op < 0.6:
                text[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif op < 0.8:
                text[i:i] = rng.choice([b"{", b"}", b"[", b"]", b'"', b",", b":", b"\xff", b"\x00", b"-1e999", b"NaN"])
            else:
                del text[i:]
        data = bytes(text)
    else:  # JSON structure
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if isinstance(events, list) and events:
            for _ in range(rng.randint(1, 12)):
                op = rng.random()
                ev = rng.choice(events)
                if op < 0.15 and events:
                    events.remove(ev)
                elif op < 0.25:
                    events.append(dict(ev) if isinstance(ev, dict) else ev)
                elif op < 0.75 and isinstance(ev, dict) and ev:
                    key = rng.choice([*ev.keys(), "ts", "dur", "pid", "tid", "name", "cat", "args", "ph"])
                    ev[key] = rng.choice(HOSTILE_VALUES)
                elif op < 0.85 and isinstance(ev, dict):
                    ev.setdefault("args", {})
                    if isinstance(ev["args"], dict):
                        ev["args"]["deep"] = f"__DEEP{rng.choice([10, 600, 3000])}__"  # nested as text below
                elif op < 0.95:
                    events.insert(rng.randrange(len(events) + 1), rng.choice(HOSTILE_VALUES))
                elif isinstance(doc, dict):
                    doc[rng.choice(["traceEvents", "deviceProperties", "distributedInfo"])] = rng.choice(HOSTILE_VALUES)
        text = json.dumps(doc, allow_nan=True)
        for depth in (10, 600, 3000):  # json.dumps itself cannot write deep nesting
            text = text.replace(f'"__DEEP{depth}__"', '{"a": [' * depth + "1" + "]}" * depth)
        data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.5:
        dest.write_bytes(gzip.compress(data, compresslevel=1))
    else:
        dest.write_bytes(data)


def special_trace(rng: random.Random, dest: Path) -> Path:
    """A trace path that is not an ordinary trace file."""
    kind = rng.randrange(7)
    if kind == 0:
        os.mkfifo(dest)
    elif kind == 1:
        return Path("/dev/zero")
    elif kind == 2:
        dest.mkdir()
    elif kind == 3:
        dest.symlink_to(dest)  # a loop
    elif kind == 4:
        dest.write_bytes(b"")
    elif kind == 5:  # a gzip that expands far beyond its size
        with gzip.open(dest, "wb", compresslevel=9) as f:
            block = b" " * (1 << 20)
            for _ in range(rng.choice([64, 2048])):
                f.write(block)
    else:
        dest.write_bytes(b'{"traceEvents": []}')
    return dest


def mutate_script(rng: random.Random, src: Path) -> str:
    text = src.read_text()
    op = rng.random()
    if op < 0.35:
        lines = text.splitlines()
        at = rng.randrange(len(lines) + 1)
        lines.insert(at, rng.choice(HOSTILE_SNIPPETS))
        return "\n".join(lines)
    tokens = text.split(" ")
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(tokens))
        r = rng.random()
        if r < 0.3:
            del tokens[i]
        elif r < 0.5:
            tokens.insert(i, tokens[rng.randrange(len(tokens))])
        elif r < 0.7:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            tokens.insert(
                i, rng.choice(["(", ")", "{", "}", "[", "]", '"', "1e999", "9" * 400, "**", "~", "include", "\\", "\n"])
            )
    return " ".join(tokens)


def _digest(paths: list[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size < 200_000_000:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            pass
    return out


def _child(argv: list[str], cwd: str, out_path: str, err_path: str) -> None:
    os.chdir(cwd)
    os.environ[SECRET] = SECRET
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    from daydream.commands.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 99
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _kinds(paths: list[Path]) -> dict[str, str]:
    """Each path's kind as lstat sees it: a FIFO, socket, symlink, character device, directory, file or missing."""
    import stat

    out = {}
    for p in paths:
        try:
            mode = os.lstat(p).st_mode
        except OSError:
            out[str(p)] = "missing"
            continue
        out[str(p)] = {
            stat.S_IFIFO: "fifo",
            stat.S_IFSOCK: "socket",
            stat.S_IFLNK: "symlink",
            stat.S_IFCHR: "char",
            stat.S_IFDIR: "dir",
            stat.S_IFREG: "file",
        }.get(stat.S_IFMT(mode), "other")
    return out


def _temporaries(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if ".daydream-" in p.name and p.name.endswith(".tmp"))


def run_case(
    argv: list[str], inputs: list[Path], workdir: Path, timeout: float, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``extra``: ``targets`` (special output paths whose kind must not change), ``outputs`` (names the run may
    write in its folder), ``pty`` (a pseudo-terminal's master to drain), ``signal`` ((signal, seconds) to send)."""
    extra = extra or {}
    targets = [Path(t) for t in extra.get("targets", [])]
    before = _digest(inputs)
    kinds_before = _kinds(targets)
    listing = set(os.listdir(workdir))
    listings = {Path(f): _listing(Path(f)) for f in extra.get("folders", [])}
    out_path, err_path = workdir.parent / (workdir.name + ".out"), workdir.parent / (workdir.name + ".err")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child never returns
        try:
            _child(argv, str(workdir), str(out_path), str(err_path))
        finally:
            os._exit(98)
    hung, status, signalled = False, 0, None
    master = extra.get("pty")
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if master is not None:  # a terminal's buffer is small: a writer to a full one waits
            with contextlib.suppress(OSError):
                while os.read(master, 1 << 16):
                    pass
        if extra.get("signal") and signalled is None and time.perf_counter() - start > extra["signal"][1]:
            signalled = extra["signal"][0]
            os.kill(pid, signalled)
        if time.perf_counter() - start > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung = True
            break
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    exitcode = os.waitstatus_to_exitcode(status) if not hung else None
    out = out_path.read_bytes() if out_path.exists() else b""
    err = err_path.read_bytes() if err_path.exists() else b""
    text = (out + err).decode("utf-8", "replace")
    problems = []
    if hung:
        problems.append(f"hang (killed after {timeout:g} s)")
    elif exitcode == 99 or "Traceback (most recent call last)" in text:
        problems.append("traceback")
    elif exitcode == 70:
        problems.append("internal error (exit 70)")
    elif exitcode not in DOCUMENTED_EXITS and signalled is None:
        problems.append(f"undocumented exit status {exitcode}")
    elif exitcode not in DOCUMENTED_EXITS and exitcode not in (SIGNALLED_EXITS[signalled], -signalled):
        # the signal's status, or killed by it where it landed outside the command (before its handlers or after)
        problems.append(f"undocumented exit status {exitcode} after signal {signalled}")
    if _digest(inputs) != before:
        problems.append("an input changed")
    changed = {p: (k, _kinds([Path(p)])[p]) for p, k in kinds_before.items() if _kinds([Path(p)])[p] != k}
    if changed:
        problems.append(f"an output target changed kind: {changed}")
    left = _temporaries(workdir.parent)
    if left:
        problems.append(f"temporary files left: {left[:3]}")
    asked = {
        os.path.basename(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a in ("--export-trace", "--save", "--out")
    }
    new = set(os.listdir(workdir)) - listing - asked - set(extra.get("outputs", []))
    if new:
        problems.append(f"files written: {sorted(new)[:5]}")
    if len(out) + len(err) > OUTPUT_BOUND:
        problems.append(f"output of {len(out) + len(err)} bytes")
    for folder, names in listings.items():
        if _listing(folder) != names:
            problems.append(f"an input folder changed: {sorted(_listing(folder) ^ names)[:5]}")
    if extra.get("terminal_safe"):  # text for a terminal (--json's stdout excepted: JSON keeps names whole)
        shown = err if "--json" in argv else out + err
        if CONTROL_BYTES.search(shown.decode("utf-8", "replace")):
            problems.append("a control character reached the terminal raw")
    if extra.get("report") and exitcode == 0:
        problems.extend(_report_problems(Path(extra["report"])))
    if SECRET in text.replace(f"{SECRET}=", "") or "root:x:0:0" in text:
        problems.append("leaked the content of a file a script may not read")
    for flag in ("RecursionError", "MemoryError", "maximum recursion depth", "out of memory"):
        if flag in text:
            problems.append(f"mentions {flag}")
            break
    return {
        "argv": argv,
        "exit": exitcode,
        "seconds": round(elapsed, 2),
        "problems": problems,
        "surface": extra.get("surface", "mutation"),
        "signal": signalled,
        "stderr_tail": err.decode("utf-8", "replace")[-600:],
    }


CONTROL_BYTES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal acts on (tab, newline kept)


def _listing(folder: Path) -> set[str]:
    return set(os.listdir(folder)) if folder.is_dir() else set()


def _report_problems(folder: Path) -> list[str]:
    """A report folder's page and figures: well-formed XML, no character HTML cannot hold."""
    import xml.dom.minidom

    out = []
    for svg in folder.glob("*.svg"):
        try:
            xml.dom.minidom.parse(str(svg))
        except Exception as exc:  # noqa: BLE001 - expat's errors
            out.append(f"malformed SVG {svg.name}: {exc}")
    page = folder / "index.html"
    if page.is_file() and re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", page.read_text("utf-8", "replace")):
        out.append("a control character in index.html")
    return out


def make_case(
    index: int, seed: int, base: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], Path, dict[str, Any]]:
    rng = random.Random(seed * 1_000_003 + index)
    case_dir = base / f"case{index:05d}"
    case_dir.mkdir(parents=True)
    work = case_dir / "cwd"
    work.mkdir()
    surface = rng.random()
    if surface >= 0.45:
        make = next(make for bound, make in SURFACES if surface < bound)
        argv, inputs, extra = make(rng, case_dir, work, traces, scripts)
        extra["surface"] = make.__name__.removesuffix("_case")
        return argv, inputs, work, extra
    inputs: list[Path] = []
    # a trace: mostly mutated, sometimes a clean one (the script carries the mutation), sometimes a special file
    r = rng.random()
    src = rng.choice(traces)
    if r < 0.55:
        trace = case_dir / ("trace.json.gz" if rng.random() < 0.5 else "trace.json")
        mutate_trace(rng, src, trace)
    elif r < 0.65:
        trace = special_trace(rng, case_dir / "special.json")
    else:
        trace = case_dir / "clean.json.gz"
        shutil.copyfile(src, trace)
    inputs.append(trace)
    script_src = rng.choice(scripts)
    script = case_dir / "script.whatif"
    script.write_text(mutate_script(rng, script_src) if r >= 0.55 or rng.random() < 0.3 else script_src.read_text())
    inputs.append(script)
    which = rng.random()
    if which < 0.6:
        argv = ["run", str(trace), str(script), "--json"]
        if rng.random() < 0.2:
            argv += ["--export-trace", rng.choice([str(trace), str(script), "", "out.json"])]
        if rng.random() < 0.2:
            argv += [
                "-p",
                rng.choice(
                    [
                        "factor=1e999",
                        "factor=9**9**9",
                        'factor="x"',
                        "k=-1",
                        "ranks=1e999",
                        "threads=0",
                        'layers="(a+)+$"',
                        "factor=" + "9" * 5000,
                    ]
                ),
            ]
    elif which < 0.8:
        argv = ["simulate", str(trace)] + (["--json"] if rng.random() < 0.5 else [])
    elif which < 0.88:  # the plan search over a (mutated) trace: its memory model reads shapes and modules
        argv = [
            "plan",
            str(trace),
            "--gpus",
            rng.choice(["2", "4", "0", "-1", "99999999"]),
            "--micro-batches",
            rng.choice(["2", "0", "1,2", "100000", "x"]),
            "--json",
        ]
    else:
        argv = ["check", str(script)]
    return argv, inputs, work, {}


# ---- the surfaces of the second round ----------------------------------------------------------------------------

SCRIPT_WITH_INCLUDE = 'include "part.whatif"\n'
PART = "scale cpu by 0.9\n"
TARGET_KINDS = [
    "fifo",
    "socket",
    "fifo-link",
    "socket-link",
    "stdout-link",
    "pty",
    "pty-link",
    "dir",
    "dangling-link",
    "file-link",
    "file",
    "dash",
    "no-folder",
    "link-loop",
]


def _clean_trace(rng: random.Random, case_dir: Path, traces: list[Path], name: str = "t.json.gz") -> Path:
    """A clean copy of the bundled example (mostly: it is fast) or a small shared trace, with its sidecar."""
    src = traces[0] if rng.random() < 0.8 else rng.choice(traces)
    trace = case_dir / name
    shutil.copyfile(src, trace)
    sidecar = src.with_name(src.name.replace(".json.gz", ".daydream.json"))
    if sidecar.is_file():
        shutil.copyfile(sidecar, case_dir / name.replace(".json.gz", ".daydream.json"))
    return trace


def _scripts(case_dir: Path) -> tuple[Path, Path, Path]:
    """A script that includes another, and a scenarios file naming the first."""
    (case_dir / "main.whatif").write_text(SCRIPT_WITH_INCLUDE)
    (case_dir / "part.whatif").write_text(PART)
    (case_dir / "s.toml").write_text('[[scenario]]\nname = "faster"\nscripts = ["main.whatif"]\n')
    return case_dir / "main.whatif", case_dir / "part.whatif", case_dir / "s.toml"


def _target(rng: random.Random, kind: str, case_dir: Path, extra: dict[str, Any]) -> tuple[str, list[Path]]:
    """An output path of ``kind`` made in ``case_dir`` (look-alikes only), and the special files to watch."""
    import socket

    t = case_dir / "target"
    watch: list[Path] = []
    if kind in ("fifo", "fifo-link"):
        os.mkfifo(case_dir / "fifo")
        watch.append(case_dir / "fifo")
    if kind in ("socket", "socket-link"):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(case_dir / "sock"))
        sock.close()  # the socket file stays
        watch.append(case_dir / "sock")
    if kind in ("pty", "pty-link"):
        master, slave = os.openpty()
        os.set_blocking(master, False)  # drained while the run writes, never waited on
        extra["pty"], extra["pty_slave"] = master, slave
        watch.append(Path(os.ttyname(slave)))
    if kind == "fifo":
        return str(case_dir / "fifo"), watch
    if kind == "socket":
        return str(case_dir / "sock"), watch
    if kind == "pty":
        return os.ttyname(extra["pty_slave"]), watch
    if kind.endswith("-link") and kind not in ("dangling-link", "file-link"):
        dest = {
            "fifo-link": case_dir / "fifo",
            "socket-link": case_dir / "sock",
            "stdout-link": Path("/proc/self/fd/1"),
            "pty-link": Path(os.ttyname(extra["pty_slave"])) if "pty_slave" in extra else t,
        }[kind]
        t.symlink_to(dest)
        return str(t), [*watch, t]
    if kind == "dir":
        t.mkdir()
        return str(t), [t]
    if kind == "dangling-link":
        t.symlink_to(case_dir / "made-through-link.json")
        return str(t), [t]
    if kind == "file-link":
        (case_dir / "real.json").write_text("{}")
        t.symlink_to(case_dir / "real.json")
        return str(t), [t]
    if kind == "file":
        t.write_text("{}")
        return str(t), [t]
    if kind == "no-folder":
        return str(case_dir / "missing" / "out.json"), []
    if kind == "link-loop":
        t.symlink_to(t)
        return str(t), [t]
    return "-", []


def output_target_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """An output of every command that writes one, onto a target of some kind: written as its kind allows (a
    regular file or a new name replaced, a stream written in place) or refused; never a special file replaced."""
    extra: dict[str, Any] = {}
    trace = _clean_trace(rng, case_dir, traces)
    main, part, scenarios = _scripts(case_dir)
    kind = rng.choice(TARGET_KINDS)
    target, watch = _target(rng, kind, case_dir, extra)
    extra["targets"] = watch
    command = rng.choice(["simulate", "run", "compare", "report"])
    if command == "simulate":
        argv = ["simulate", str(trace), "--export-trace", target] + (["--json"] if rng.random() < 0.5 else [])
    elif command == "run":
        argv = ["run", str(trace), str(main), "--export-trace", target]
    elif command == "compare":
        argv = ["compare", str(trace), str(scenarios), "--save", target]
    else:
        argv = ["report", str(trace), "--out", target] + ([str(main)] if rng.random() < 0.5 else [])
    return argv, [trace, main, part, scenarios], extra


def onto_input_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """An output named after one of the run's inputs (or a link to one): refused, the input unchanged."""
    trace = _clean_trace(rng, case_dir, traces)
    main, part, scenarios = _scripts(case_dir)
    os.link(trace, case_dir / "hard.json.gz")
    (case_dir / "link.whatif").symlink_to(part)
    sidecar = case_dir / "t.daydream.json"
    inputs = [trace, main, part, scenarios, case_dir / "hard.json.gz"] + ([sidecar] if sidecar.is_file() else [])
    trace_side = [trace, case_dir / "hard.json.gz"] + ([sidecar] if sidecar.is_file() else [])
    command = rng.choice(["simulate", "run", "compare", "compare-scenarios", "report"])
    # simulate reads no script: its inputs are the trace's side only
    onto = rng.choice(trace_side if command == "simulate" else [*trace_side, main, part, case_dir / "link.whatif"])
    if command == "simulate":
        argv = ["simulate", str(trace), "--export-trace", str(onto)]
    elif command == "run":
        argv = ["run", str(trace), str(main), "--export-trace", str(onto)]
    elif command == "compare":
        argv = ["compare", str(trace), str(scenarios), "--save", str(onto)]
    elif command == "compare-scenarios":
        argv = ["compare", str(trace), str(scenarios), "--save", str(scenarios)]
    else:  # a report folder whose report.json is a link to an input
        rep_dir = case_dir / "rep"
        rep_dir.mkdir()
        (rep_dir / "report.json").symlink_to(onto)
        argv = ["report", str(trace), str(main), "--out", str(rep_dir)]
    return argv, inputs, {}


def _npy_header(path: Path, shape: tuple[int, ...], payload: bytes) -> None:
    import numpy as np

    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=np.int64))
    header["shape"] = shape
    with path.open("wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(payload)


def lying_sizes_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """A file that states a size it does not hold: bounded before anything is sized by it."""
    import numpy as np

    kind = rng.randrange(6)
    if kind == 0:  # an .npy header of far more rows or columns than its bytes
        f = case_dir / "idx.npy"
        shape = rng.choice([(1, 10**12), (10**11,), (10**13, 2), (2**40, 3), (3, 70_000), (2**62,)])
        _npy_header(f, shape, np.arange(rng.choice([0, 8, 64]), dtype=np.int64).tobytes())
        return ["embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8"], [f], {}
    if kind == 1:  # an index or a row count that would size a count array of gigabytes
        f = case_dir / "idx.npy"
        values = np.arange(64, dtype=np.int64)
        values[rng.randrange(64)] = rng.choice([2_000_000_000, 2**62, 2**63 - 1, -1])
        np.save(f, values)
        extra = rng.choice(
            [[], ["--rows", "999999999999999999999"], ["--seed", "-1"], ["--rows", str(2**40)], ["--dim", "0"]]
        )
        return ["embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8", "--sample", "100%", *extra], [f], {}
    if kind == 2:  # a rank number in a file name
        job = case_dir / "job"
        job.mkdir()
        shutil.copyfile(traces[0], job / "rank0.json.gz")
        shutil.copyfile(traces[0], job / f"rank{rng.choice([99999999999, 2**40, 1_048_576, 5])}.json.gz")
        return ["simulate", str(job)], [job / "rank0.json.gz"], {}
    if kind == 3:  # a world size or rank in the trace
        doc = _read_json(traces[0])
        doc["distributedInfo"] = rng.choice(
            [
                {"rank": 0, "world_size": 100_000_000_000},
                {"rank": 10**12, "world_size": 2},
                {"rank": -1},
                {"world_size": 0},
                {"world_size": 1e11},
            ]
        )
        t = case_dir / "t.json.gz"
        t.write_bytes(gzip.compress(json.dumps(doc).encode()))
        return ["simulate", str(t)], [t], {}
    if kind == 4:  # a tables file that never ends, or blocks
        f = case_dir / "tables.toml"
        if rng.random() < 0.5:
            os.mkfifo(f)
        else:
            f.write_bytes(b"\0" * (20 << 20))
        return ["shard", str(f), "--ranks", "2", "--batch", "8"], [], {"targets": [f]}
    f = case_dir / "idx.npz"  # an .npz member whose header lies
    member = case_dir / "m.npy"
    _npy_header(member, rng.choice([(10**12,), (4, 10**9)]), b"\0" * 64)
    import zipfile

    with zipfile.ZipFile(f, "w") as z:
        z.write(member, "t0.npy")
    return ["embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8"], [f], {}


def names_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """Names that are text to daydream and something else to a library: math text, undecodable bytes."""
    main, part, scenarios = _scripts(case_dir)
    if rng.random() < 0.5:  # op and thread names matplotlib would read as math, in a trace with kernels
        src = rng.choice([t for t in traces if t != traces[0]] or traces)
        doc = _read_json(src)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
        for ev in events:
            if (
                isinstance(ev, dict)
                and ev.get("cat") in ("cpu_op", "kernel", "Operator", "Kernel")
                and rng.random() < 0.3
            ):
                ev["name"] = rng.choice(["$a^^b$", "$\\frac{$", "$$", "a$b$c", "$\\sqrt{x}$ $"])
        trace = case_dir / "math.json.gz"
        trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
        return ["report", str(trace), "--out", "rep"], [trace], {"outputs": ["rep"]}
    name = os.fsdecode(b"t\xff" + bytes([rng.randrange(0x80, 0x100)]) + b".json.gz")
    trace = case_dir / name
    shutil.copyfile(traces[0], trace)
    argv = rng.choice(
        [
            ["simulate", str(trace), "--json"],
            ["run", str(trace), str(main), "--json"],
            ["demo", str(trace), "--json"],
            ["simulate", str(trace), "--export-trace", "o.json"],
            ["report", str(trace), "--out", "rep"],
            ["compare", str(trace), str(scenarios), "--json"],
            ["plan", str(trace), "--gpus", "2", "--json"],
        ]
    )
    return argv, [trace, main, part, scenarios], {"outputs": ["o.json", "rep"]}


def signal_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """SIGINT or SIGTERM at a random moment of a run that writes: exit 130 or 143 (or 0 if it had finished), the
    old output whole or none, no temporary file left."""
    trace = _clean_trace(rng, case_dir, traces)
    main, part, scenarios = _scripts(case_dir)
    out = case_dir / "out.json"
    if rng.random() < 0.5:
        out.write_text("{}")  # an old output to replace
    argv = rng.choice(
        [
            ["simulate", str(trace), "--export-trace", str(out)],
            ["run", str(trace), str(main), "--export-trace", str(out)],
            ["compare", str(trace), str(scenarios), "--save", str(out)],
            ["report", str(trace), "--out", str(case_dir / "rep")],
        ]
    )
    extra = {"signal": (rng.choice([signal.SIGINT, signal.SIGTERM]), rng.uniform(0.03, 0.6))}
    return argv, [trace, main, part, scenarios], extra


# ---- the surfaces of the third round (issue 80) ------------------------------------------------------------------

# DSL functions that walk the whole graph, called in a loop: each call must be charged for its walk (issue 80, part A)
WALKING_CALLS = [
    "linears()",
    "tensor_parallel_pairs()",
    "gradients_missing()",
    "pipeline_stages()",
    "repeats(select cpu)",
    "layers()",
    "optimizer_step()",
]
LONG_LOOP = 100_000  # iterations that, uncharged, run for minutes: a hang of this is part A's to fix

# numbers past what any count, size or time holds, as TOML, JSON and flag text
BIG_NUMBERS = [
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "inf",
    "-inf",
    "nan",
    "1e400",
    "1e300",
    "-1e300",
    "1e-300",
    "-1",
    "0",
    "9223372036854775808",
    "268435456",
    "1073741824",
    "1e18",
    "1e19",
]
FLAG_NUMBERS = [
    *[n for n in BIG_NUMBERS if n not in ("inf", "-inf", "nan")],
    "１２",
    "٣",
    "1_000",
    " 7 ",
    "0x10",
    "1e-400",
]
SAVED_TIMES = ["0", "-5", "1e400", "1" + "0" * 400, "NaN", "1e300", "null", '"x"', "5e-324"]
# C0 and C1 controls, escape sequences that retitle or clear a terminal, a one-character CSI
CONTROL_NAMES = [
    "\x00",
    "\x1b[2J",
    "\x1b]0;T\x07",
    "\u009b31m",
    "\x7f",
    "\u0085",
    "\x01\x02\x03",
    "a\rb",
    "\x1b[6n",
    "\x08\x08\x08x",
    "\ufffe",
    "\x0c",
]


def dsl_loops_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """A DSL function that walks the graph, called in a loop: it ends within the budget (an error at the loop), or
    runs as a short loop does. ``part_a``: a loop of LONG_LOOP calls with the default budget, which ends only once
    every call is charged for its walk (issue 80's first item, another session's work)."""
    trace = _clean_trace(rng, case_dir, traces)
    call = rng.choice(WALKING_CALLS)
    count = rng.choice([10, 300, 3000, LONG_LOOP]) if rng.random() < 0.85 else LONG_LOOP
    body = rng.choice([f"let r = {call}", f"let r = len({call})", f"if len({call}) > 1000000 {{ print i }}"])
    script = case_dir / "loop.whatif"
    script.write_text(f"for i in range({count}) {{ {body} }}\n")
    budget = rng.choice([None, None, "3000", "100000", "1"])
    argv = (
        ["run", str(trace), str(script)]
        + (["--budget", budget] if budget else [])
        + (["--json"] if rng.random() < 0.3 else [])
    )
    return argv, [trace, script], {"part_a": count == LONG_LOOP and budget is None}


def _scenarios(path: Path, params: str) -> None:
    path.write_text(f'[[scenario]]\nname = "a"\nscripts = ["main.whatif"]\nparams = {{ {params} }}\n')


def _saved_results(path: Path, rng: random.Random) -> None:
    """A results file as compare --save writes it, its times or nesting made hostile."""
    time = rng.choice(SAVED_TIMES)
    field = rng.choice(["predicted_us", "baseline_us", "measured_us", "speedup"])
    scenario_time = time if field == "predicted_us" else "90.0"
    base_time = time if field == "baseline_us" else "100.0"
    text = (
        '{"provenance": {"daydream": "0", "date": "x", "trace": "t", "trace_sha256": "0", "step": null, "policy":'
        ' "earliest", "link": null, "device": null, "scenarios_file": null, "script_sha256": {}}, "baseline":'
        f' {{"measured_us": {time if field == "measured_us" else "100.0"}, "baseline_us": {base_time}, "breakdown":'
        ' {}, "bound": {"gpu_pct": 0, "cpu_pct": 100, "by_phase": {}, "by_kernel_class": {}}}, "scenarios":'
        f' [{{"name": "faster", "scripts": ["main.whatif"], "params": {{}}, "predicted_us": {scenario_time}, "speedup":'
        f' {time if field == "speedup" else "1.1"}, "throughput": 1.1, "breakdown": null, "bound": null}}]}}'
    )
    if rng.random() < 0.15:  # nested past any reader's stack
        text = "[" * rng.choice([1000, 100_000]) + "]" * rng.choice([0, 1000, 100_000])
    path.write_text(text)


def big_numbers_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """Numbers past any count, size or time, in a scenarios, cases or tables file, a saved results file, a flag or
    a -p value: a one-line error naming the file and field (or a result), never exit 70."""
    trace = _clean_trace(rng, case_dir, traces)
    main, part, scenarios = _scripts(case_dir)
    (case_dir / "main.whatif").write_text("param factor = 2\nscale cpu by 1 / factor\n")
    n = rng.choice(BIG_NUMBERS)
    kind = rng.randrange(7)
    if kind == 0:  # a scenarios file's params (TOML)
        _scenarios(scenarios, f"factor = {n}")
        return ["compare", str(trace), str(scenarios)], [trace, main, part, scenarios], {}
    if kind == 1:  # a cases file's params and ratio
        cases = case_dir / "cases.toml"
        key = rng.choice(["params = { factor = %s }", "ratio = %s"]) % n
        cases.write_text(
            f'[[case]]\nname = "a"\nbefore = ["{trace.name}"]\nafter = ["{trace.name}"]\n'
            f'scripts = ["main.whatif"]\n{key}\n'
        )
        return ["validate", str(cases)], [trace, main, cases], {}
    if kind == 2:  # an embedding tables file
        tables = case_dir / "tables.toml"
        sizes = {"rows": "100", "dim": "16", "pooling": "2"}
        sizes[rng.choice([*sizes, "bytes_per_element"])] = n
        tables.write_text('[[table]]\nname = "t"\n' + "".join(f"{k} = {v}\n" for k, v in sizes.items()))
        return ["shard", str(tables), "--ranks", "2", "--batch", "64"], [tables], {}
    if kind == 3:  # a saved results file
        saved = case_dir / "saved.json"
        _saved_results(saved, rng)
        return (
            ["compare", str(trace), str(scenarios), "--against", str(saved)],
            [trace, main, part, scenarios, saved],
            {},
        )
    tables = case_dir / "tables.toml"
    tables.write_text('[[table]]\nname = "t"\nrows = 100\ndim = 16\npooling = 2\n')
    f = rng.choice(FLAG_NUMBERS)
    if kind == 4:  # a flag
        flag = rng.choice(["--ranks", "--batch", "--memory", "--link"])
        args = {"--ranks": "2", "--batch": "64", flag: f}
        return ["shard", str(tables), *[x for kv in args.items() for x in kv]], [tables], {}
    if kind == 5:
        argv = rng.choice(
            [
                ["plan", str(trace), "--gpus", f, "--json"],
                ["plan", str(trace), "--gpus", "4", "--memory-gb", f],
                ["simulate", str(trace), "--link", f],
                ["run", str(trace), str(main), "--budget", f],
            ]
        )
        return argv, [trace, main, part], {}
    return ["run", str(trace), str(main), "-p", f"factor={f}"], [trace, main, part], {}  # a -p value


def controls_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """Names holding C0 and C1 controls and escape sequences - a trace's ops, a table's name, a file's name, a
    script's print - reach the terminal escaped, the report's SVG and page as XML and HTML can hold them."""
    main, part, scenarios = _scripts(case_dir)
    name = "".join(rng.sample(CONTROL_NAMES, rng.randint(1, 3)))
    extra: dict[str, Any] = {"terminal_safe": True, "outputs": ["rep", "o.json"]}
    kind = rng.randrange(4)
    if kind == 0:  # op names in a trace
        doc = _read_json(traces[0])
        for ev in doc.get("traceEvents", []):
            if isinstance(ev, dict) and ev.get("cat") in ("cpu_op", "Operator") and rng.random() < 0.5:
                ev["name"] = name + str(ev.get("name"))
        trace = case_dir / "t.json.gz"
        trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
        argv = rng.choice(
            [
                ["simulate", str(trace)],
                ["simulate", str(trace), "--json"],
                ["run", str(trace), str(main)],
                ["report", str(trace), "--out", "rep"],
                ["compare", str(trace), str(scenarios)],
            ]
        )
        if argv[0] == "report":
            extra["report"] = str(work / "rep")
        return argv, [trace, main, part, scenarios], extra
    if kind == 1:  # a file name
        trace = case_dir / f"bad{name.replace('/', '_').replace(chr(0), '0')}.json"
        trace.write_bytes(rng.choice([b"{", b"root:x:0:0\n", gzip.decompress(traces[0].read_bytes())]))
        return rng.choice([["simulate", str(trace)], ["run", str(trace), str(main)]]), [trace, main, part], extra
    if kind == 2:  # a table's name
        tables = case_dir / "tables.toml"
        tables.write_text(f"[[table]]\nname = {json.dumps(name)}\nrows = 100\ndim = 16\npooling = 2\n")
        return ["shard", str(tables), "--ranks", "2", "--batch", "64"], [tables], extra
    trace = _clean_trace(rng, case_dir, traces)  # a script that prints one
    script = case_dir / "p.whatif"
    text = name.replace('"', "").replace("\\", "")  # the characters themselves in the literal (no escapes to read)
    script.write_text(
        f'print "{text}"\nassert 1 == 2, "{text}"\n' + (f"let {text} = 1\n" if rng.random() < 0.5 else "")
    )
    return ["run", str(trace), str(script)], [trace, script], extra


def into_folder_case(
    rng: random.Random, case_dir: Path, work: Path, traces: list[Path], scripts: list[Path]
) -> tuple[list[str], list[Path], dict[str, Any]]:
    """An output aimed into an input folder - a job folder of copies of the bundled example, directly, through a
    symlink, or an --include-dir given a .whatif name: refused, the folder as it was (the job loads as before)."""
    job = case_dir / "job"
    job.mkdir()
    for rank in range(rng.choice([1, 2, 3])):
        shutil.copyfile(traces[0], job / f"rank{rank}.json.gz")
    main, part, scenarios = _scripts(case_dir)
    (case_dir / "link").symlink_to(job)
    inc = case_dir / "inc"
    inc.mkdir()
    into = rng.choice([job, case_dir / "link"])
    name = rng.choice(["rank9.json", "r.json", "report.json", "t.json.gz", "x.et", "index.html"])
    kind = rng.randrange(6)
    if kind == 0:
        argv = ["report", "--out", str(into), str(job)]
    elif kind == 1:
        argv = ["simulate", "--export-trace", str(into / name), str(job)]
    elif kind == 2:
        argv = ["compare", "--save", str(into / name), str(job), str(scenarios)]
    elif kind == 3:
        argv = ["run", str(job), str(main), "--export-trace", str(into / name)]
    elif kind == 4:
        argv = ["export", str(job), "--chakra", str(into)]
    else:  # a script's name in an --include-dir is refused; another output is no script, and is written
        trace = _clean_trace(rng, case_dir, traces)
        out = inc / rng.choice(["x.whatif", "sub.whatif", "y.json"])
        argv = ["run", str(trace), str(main), "--include-dir", str(inc), "--export-trace", str(out)]
        return argv, [trace, main, part], {"folders": [job] + ([inc] if out.suffix == ".whatif" else [])}
    return argv, [*sorted(job.iterdir()), main, part, scenarios], {"folders": [job, inc]}


# each surface's share of the cases past the first 45% (mutated traces and scripts): (upper bound, maker)
SURFACES = [
    (0.57, output_target_case),
    (0.63, onto_input_case),
    (0.69, lying_sizes_case),
    (0.74, names_case),
    (0.79, signal_case),
    (0.85, dsl_loops_case),
    (0.92, big_numbers_case),
    (0.96, controls_case),
    (1.01, into_folder_case),
]


def _worker(job: tuple[int, int, str, list[str], list[str], float]) -> dict[str, Any]:
    index, seed, base, traces, scripts, timeout = job
    argv, inputs, work, extra = make_case(
        index, seed, Path(base), [Path(t) for t in traces], [Path(s) for s in scripts]
    )
    try:
        result = run_case(argv, inputs, work, timeout, extra)
    finally:
        for fd in (extra.get("pty"), extra.get("pty_slave")):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
    result["case"] = index
    result["part_a"] = bool(extra.get("part_a")) and result["problems"] == [f"hang (killed after {timeout:g} s)"]
    if not result["problems"]:
        shutil.rmtree(Path(base) / f"case{index:05d}", ignore_errors=True)
        for suffix in (".out", ".err"):
            with contextlib.suppress(OSError):
                (Path(base) / f"case{index:05d}" / ("cwd" + suffix)).unlink()
    return result


def _preload() -> None:
    """Each worker imports the CLI once, before it forks the runs: a signal sent to a run lands in daydream's code,
    not in the import of it."""
    import daydream.commands.cli  # noqa: F401


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=15.0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("fuzz-report.json"))
    args = p.parse_args()
    traces = [str(t) for t in _small_traces()]
    scripts = [str(s) for s in _library()]
    base = Path(tempfile.mkdtemp(prefix="daydream-fuzz-"))
    jobs = [(i, args.seed, str(base), traces, scripts, args.timeout) for i in range(args.cases)]
    start = time.perf_counter()
    results = []
    with mp.get_context("fork").Pool(args.jobs, initializer=_preload, maxtasksperchild=50) as pool:
        for k, r in enumerate(pool.imap_unordered(_worker, jobs), 1):
            results.append(r)
            if r["problems"]:
                label = "part A (pending)" if r["part_a"] else ", ".join(r["problems"])
                print(f"case {r['case']}: {label}: daydream {' '.join(a[:80] for a in r['argv'])}", flush=True)
            if k % 250 == 0:
                print(f"{k}/{args.cases} cases, {time.perf_counter() - start:.0f} s", flush=True)
    # a hang of a long loop of walking DSL functions under the default budget is issue 80's part A (each call charged
    # for its walk), another session's: counted apart until it is merged
    part_a = [r for r in results if r["part_a"]]
    failures = [r for r in results if r["problems"] and not r["part_a"]]
    kinds: dict[str, int] = {}
    for r in failures:
        for problem in r["problems"]:
            key = problem.split(" (")[0].split(":")[0]
            kinds[key] = kinds.get(key, 0) + 1
    exits: dict[str, int] = {}
    surfaces: dict[str, int] = {}
    for r in results:
        exits[str(r["exit"])] = exits.get(str(r["exit"]), 0) + 1
        surfaces[r["surface"]] = surfaces.get(r["surface"], 0) + 1
    summary = {
        "cases": len(results),
        "seconds": round(time.perf_counter() - start, 1),
        "failures": len(failures),
        "by_kind": kinds,
        "exit_status": dict(sorted(exits.items())),
        "surfaces": surfaces,
        "max_seconds": max(r["seconds"] for r in results),
        "part_a_hangs": len(part_a),
        "kept": str(base),
    }
    args.out.write_text(json.dumps({"summary": summary, "failures": failures, "part_a": part_a}, indent=1))
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
