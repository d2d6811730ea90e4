"""A mutation fuzzer of the command line: hostile traces and scripts, and what the CLI does with them.

    python bench/fuzz_cli.py [--cases 4000] [--seed 0] [--timeout 15] [--jobs 2] [--out fuzz-report.json]

Each case is one CLI run (`daydream run TRACE SCRIPT --json`, `daydream simulate TRACE`, `daydream check SCRIPT`) on
inputs made by mutating real ones: the bundled example trace and those of ../shared/traces (the smaller ones) at
the byte level (flips, cuts, inserted bytes, truncation) and the JSON level (fields given other types, huge or
non-finite numbers, deep nesting, names holding rich markup or invalid UTF-8, events removed or duplicated), special
files (a FIFO, /dev/zero, a directory, a symlink loop, an empty file, a gzip bomb); and the bundled library scripts
mutated token by token or given hostile snippets (deep nesting, long literals, huge powers, catastrophic regexes,
long loops, includes of /etc/passwd and /proc/self/environ).

Each run happens in a forked child with its own working directory, stdout and stderr to files, killed past
`--timeout` seconds. A case fails when: an exception escaped (a traceback, or the CLI's "internal error", exit 70),
the run hung (killed), the exit status is not one the CLI documents (0, 1, 2, 3), an input changed, a file appeared
that the run was not asked to write, the output is longer than a bound, or the output holds text from a file a
script must not read (a line of /etc/passwd, a secret put in the environment). Prints a summary and writes every
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
DOCUMENTED_EXITS = {0, 1, 2, 3}

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
    'let ranks = 1e999\nlet y = allreduce(1MB, ranks = ranks)',
]


def _small_traces() -> list[Path]:
    from daydream.demo import bundled_example

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
    None, "", "abc", "[/k]", "[bold red]x", -1, 0, 1e400, -1e400, 1e308, 2**80, True, [], {}, [[[[[]]]]],
    "\udcff", "\u202e", "a" * 100_000, 1.5, -0.0,
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
            tokens.insert(i, rng.choice(["(", ")", "{", "}", "[", "]", '"', "1e999", "9" * 400, "**", "~", "include", "\\", "\n"]))
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
    from daydream.cli import main

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


def run_case(argv: list[str], inputs: list[Path], workdir: Path, timeout: float) -> dict[str, Any]:
    before = _digest(inputs)
    listing = set(os.listdir(workdir))
    out_path, err_path = workdir.parent / (workdir.name + ".out"), workdir.parent / (workdir.name + ".err")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child never returns
        try:
            _child(argv, str(workdir), str(out_path), str(err_path))
        finally:
            os._exit(98)
    hung, status = False, 0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
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
    elif exitcode not in DOCUMENTED_EXITS:
        problems.append(f"undocumented exit status {exitcode}")
    if _digest(inputs) != before:
        problems.append("an input changed")
    asked = {os.path.basename(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--export-trace"}
    new = set(os.listdir(workdir)) - listing - asked
    if new:
        problems.append(f"files written: {sorted(new)[:5]}")
    if len(out) + len(err) > OUTPUT_BOUND:
        problems.append(f"output of {len(out) + len(err)} bytes")
    if SECRET in text.replace(f"{SECRET}=", "") or "root:x:0:0" in text:
        problems.append("leaked the content of a file a script may not read")
    for flag in ("RecursionError", "MemoryError", "maximum recursion depth", "out of memory"):
        if flag in text:
            problems.append(f"mentions {flag}")
            break
    return {"argv": argv, "exit": exitcode, "seconds": round(elapsed, 2), "problems": problems,
            "stderr_tail": err.decode("utf-8", "replace")[-600:]}  # fmt: skip


def make_case(index: int, seed: int, base: Path, traces: list[Path], scripts: list[Path]) -> tuple[list[str], list[Path], Path]:
    rng = random.Random(seed * 1_000_003 + index)
    case_dir = base / f"case{index:05d}"
    case_dir.mkdir(parents=True)
    work = case_dir / "cwd"
    work.mkdir()
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
            argv += ["-p", rng.choice(["factor=1e999", "factor=9**9**9", 'factor="x"', "k=-1", "ranks=1e999", "threads=0",
                                       'layers="(a+)+$"', "factor=" + "9" * 5000])]  # fmt: skip
    elif which < 0.85:
        argv = ["simulate", str(trace)] + (["--json"] if rng.random() < 0.5 else [])
    else:
        argv = ["check", str(script)]
    return argv, inputs, work


def _worker(job: tuple[int, int, str, list[str], list[str], float]) -> dict[str, Any]:
    index, seed, base, traces, scripts, timeout = job
    argv, inputs, work = make_case(index, seed, Path(base), [Path(t) for t in traces], [Path(s) for s in scripts])
    result = run_case(argv, inputs, work, timeout)
    result["case"] = index
    if not result["problems"]:
        shutil.rmtree(Path(base) / f"case{index:05d}", ignore_errors=True)
        for suffix in (".out", ".err"):
            with contextlib.suppress(OSError):
                (Path(base) / f"case{index:05d}" / ("cwd" + suffix)).unlink()
    return result


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
    with mp.get_context("fork").Pool(args.jobs, maxtasksperchild=50) as pool:
        for k, r in enumerate(pool.imap_unordered(_worker, jobs), 1):
            results.append(r)
            if r["problems"]:
                print(f"case {r['case']}: {', '.join(r['problems'])}: daydream {' '.join(a[:80] for a in r['argv'])}", flush=True)
            if k % 250 == 0:
                print(f"{k}/{args.cases} cases, {time.perf_counter() - start:.0f} s", flush=True)
    failures = [r for r in results if r["problems"]]
    kinds: dict[str, int] = {}
    for r in failures:
        for problem in r["problems"]:
            key = problem.split(" (")[0].split(":")[0]
            kinds[key] = kinds.get(key, 0) + 1
    exits: dict[str, int] = {}
    for r in results:
        exits[str(r["exit"])] = exits.get(str(r["exit"]), 0) + 1
    summary = {"cases": len(results), "seconds": round(time.perf_counter() - start, 1), "failures": len(failures),
               "by_kind": kinds, "exit_status": exits, "max_seconds": max(r["seconds"] for r in results),
               "kept": str(base)}  # fmt: skip
    args.out.write_text(json.dumps({"summary": summary, "failures": failures}, indent=1))
    print(json.dumps(summary, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
