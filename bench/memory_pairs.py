"""The measured peaks of the memory corpus: for every run of every setting under validation/traces/memory (recorded by
`validation/record.py --memory`, i.e. `daydream record --profile-memory`), the peak "Total Allocated" of the trace's
`[memory]` events, per recorded step and over the whole trace; then each setting's mean, min and max over its runs,
and for every case of validation/cases.toml whether its AFTER peak differs from its BEFORE peak by more than
the runs' spread.

    python bench/memory_pairs.py [--traces validation/traces/memory] [--cases validation/cases.toml] [--json]

Read with plain json and gzip, nothing of daydream's: a `[memory]` event is an instant event (`"ph": "i"`) whose args
hold `Bytes` (negative for a free), `Addr`, `Total Allocated`, `Total Reserved`, `Device Type` (0: the CPU, 1: CUDA)
and `Device Id`. A step's peak is the largest Total Allocated among the events inside its ProfilerStep#k range; its
`start` the Total Allocated of the last event before the range (0 before the first). The totals count from when the
profiler started: what was allocated before (parameters, optimizer state, the last warm-up step's gradients) is not
in them, and its frees leave no event (torch warns "Memory block of unknown size was allocated before the profiling
started"). `where` is the outermost range under the step (`Optimizer.step#Adam.step`, `autograd::engine::...`) and
the innermost op around the peak's event; the phases (forward, backward, optimizer, zero_grad) are told by the
outermost range around each event (an event between ops, a tensor Python let go, takes the phase of the one before).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import lzma
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


@dataclass
class Step:
    name: str
    start: int  # Total Allocated when the step began
    peak: int
    end: int  # Total Allocated after the step's last event
    events: int
    where: str  # the outermost range and the innermost op around the peak
    phases: dict[str, int] = field(default_factory=dict)  # the peak of each phase's events (PHASES)


@dataclass
class Run:
    path: str
    device: str  # "cpu" or "cuda:N": the device whose events are read (the one with the largest peak)
    steps: list[Step]
    peak: int  # over every event of the trace
    events: int
    outside_steps: int  # events outside every ProfilerStep range
    unknown_frees: int  # frees of an address no event of the trace allocated
    reserved: list[int] = field(default_factory=list)  # the distinct Total Reserved values (0 on the CPU)
    # on a GPU, the sidecar's device_memory: the caching allocator's own peak over the recorded steps (max_allocated,
    # max_reserved), which counts what was allocated before the profiler started too
    allocator: dict[str, Any] | None = None


def _load(path: Path) -> list[dict[str, Any]]:
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)  # the corpus's: xz; a new recording's: gzip
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _device(args: dict[str, Any]) -> str:
    return "cpu" if args.get("Device Type", 0) == 0 else f"cuda:{args.get('Device Id', 0)}"


PHASES = ("forward", "backward", "optimizer", "zero_grad")


def _phase(outer: str | None, last: str) -> str:
    """An event's phase from the outermost range around it; between ops (a tensor freed by Python), the last one's."""
    if outer is None:
        return last
    if outer.startswith("Optimizer.step"):
        return "optimizer"
    if outer.startswith("Optimizer.zero_grad"):
        return "zero_grad"
    if outer.startswith("autograd::engine::evaluate_function"):
        return "backward"
    return "forward"


def _outermost(ranges: list[dict[str, Any]]) -> dict[Any, tuple[list[float], list[dict[str, Any]]]]:
    """Per thread, the ranges that no other range holds (a step's ranges excepted), by start: for bisect."""
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in sorted(ranges, key=lambda e: (e["ts"], -e["dur"])):
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            continue
        top = by_tid.setdefault(e.get("tid"), [])
        if not top or e["ts"] >= top[-1]["ts"] + top[-1]["dur"]:
            top.append(e)
    return {tid: ([e["ts"] for e in top], top) for tid, top in by_tid.items()}


def _around(ts: float, tid: Any, outer: dict[Any, tuple[list[float], list[dict[str, Any]]]]) -> str | None:
    starts, top = outer.get(tid, ([], []))
    i = bisect.bisect_right(starts, ts) - 1
    return top[i]["name"] if i >= 0 and ts <= top[i]["ts"] + top[i]["dur"] else None


def _where(ts: float, tid: Any, ranges: list[dict[str, Any]]) -> str:
    around = [e for e in ranges if e.get("tid") == tid and e["ts"] <= ts <= e["ts"] + e.get("dur", 0)]
    around = [e for e in around if not str(e.get("name", "")).startswith("ProfilerStep#")]
    if not around:
        return "-"
    around.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    outer, inner = around[0]["name"], around[-1]["name"]
    return outer if outer == inner else f"{outer} > {inner}"


def measure(path: Path) -> Run:
    events = _load(path)
    memory = [
        e for e in events if e.get("name") == "[memory]" and e.get("ph") == "i" and isinstance(e.get("args"), dict)
    ]
    if not memory:
        raise SystemExit(f"{path}: no [memory] events (record with `daydream record --profile-memory`)")
    by_device: dict[str, list[dict[str, Any]]] = {}
    for e in memory:
        by_device.setdefault(_device(e["args"]), []).append(e)
    device = max(by_device, key=lambda d: max(e["args"]["Total Allocated"] for e in by_device[d]))
    memory = sorted(by_device[device], key=lambda e: e["ts"])
    ranges = [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") in ("cpu_op", "user_annotation")]
    steps = sorted(
        (e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
        key=lambda e: e["ts"],
    )
    outer = _outermost(ranges)
    phase_of: dict[int, str] = {}
    last = "forward"
    for e in memory:
        last = phase_of[id(e)] = _phase(_around(e["ts"], e.get("tid"), outer), last)
    out: list[Step] = []
    inside = 0
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        mine = [e for e in memory if lo <= e["ts"] <= hi]
        inside += len(mine)
        before = [e for e in memory if e["ts"] < lo]
        start = before[-1]["args"]["Total Allocated"] if before else 0
        if not mine:
            out.append(Step(s["name"], start, start, start, 0, "-"))
            continue
        top = max(mine, key=lambda e: e["args"]["Total Allocated"])
        phases: dict[str, int] = {}
        for e in mine:
            ph = phase_of[id(e)]
            phases[ph] = max(phases.get(ph, 0), e["args"]["Total Allocated"])
        out.append(
            Step(
                s["name"],
                start,
                top["args"]["Total Allocated"],
                mine[-1]["args"]["Total Allocated"],
                len(mine),
                _where(top["ts"], top.get("tid"), ranges),
                {p: phases[p] for p in PHASES if p in phases},
            )
        )
    live: set[Any] = set()
    unknown = 0
    for e in memory:
        a = e["args"]
        if a["Bytes"] > 0:
            live.add(a["Addr"])
        elif a["Addr"] in live:
            live.discard(a["Addr"])
        else:
            unknown += 1
    return Run(
        path=str(path),
        device=device,
        steps=out,
        peak=max(e["args"]["Total Allocated"] for e in memory),
        events=len(memory),
        outside_steps=len(memory) - inside,
        unknown_frees=unknown,
        reserved=sorted({e["args"].get("Total Reserved", 0) for e in memory}),
        allocator=_allocator_peak(path),
    )


def _allocator_peak(path: Path) -> dict[str, Any] | None:
    """The sidecar's device_memory next to a trace (``rank0.daydream.json``), None where there is none."""
    sidecar = path.with_name(path.name.split(".json")[0] + ".daydream.json")
    try:
        return json.loads(sidecar.read_text()).get("device_memory")
    except (OSError, ValueError, AttributeError):
        return None


RUN_TRACES = "run*/rank0.json.[gx]z"  # gzip as recorded, xz once compacted (validation/compact_traces.py)


def _runs(folder: Path) -> list[Path]:
    return sorted(folder.glob(RUN_TRACES), key=lambda p: int(p.parent.name[3:]))


def settings(traces: Path) -> dict[str, list[Path]]:
    """setting (its folder under `traces`) -> its runs' traces"""
    found: dict[str, list[Path]] = {}
    for trace in sorted(traces.rglob(RUN_TRACES)):
        found.setdefault(trace.parent.parent.relative_to(traces).as_posix(), [])
    return {name: _runs(traces / name) for name in found}


def _stats(values: list[int]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def _mib(v: float) -> str:
    return f"{v / MIB:.3f}"


def summarize(runs: list[Run]) -> dict[str, Any]:
    names = [s.name for s in runs[0].steps]
    per_step = {}
    for i, name in enumerate(names):
        peaks = [r.steps[i].peak for r in runs if i < len(r.steps)]
        per_step[name] = _stats(peaks)
    phases = {}
    for ph in PHASES:
        values = [s.phases[ph] for r in runs for s in r.steps if ph in s.phases]
        if values:
            phases[ph] = _stats(values)
    return {"peak": _stats([r.peak for r in runs]), "steps": per_step, "phases": phases, "runs": len(runs)}


def pairs(cases_file: Path, measured: dict[str, Run]) -> list[dict[str, Any]]:
    doc = tomllib.loads(cases_file.read_text())
    out = []
    for case in doc.get("memory_case", doc.get("case", [])):
        sides = {}
        for side in ("before", "after"):
            files = [str((cases_file.parent / p).resolve()) for p in case[side]]
            missing = [f for f in files if f not in measured]
            if missing:
                raise SystemExit(
                    f"{cases_file}: case {case['name']!r}: {missing[0]} was not measured (not under --traces?)"
                )
            sides[side] = _stats([measured[f].peak for f in files])
        b, a = sides["before"], sides["after"]
        overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
        out.append(
            {
                "name": case["name"],
                "scripts": case.get("scripts", []),
                "before": b,
                "after": a,
                "ratio": a["mean"] / b["mean"] if b["mean"] else None,
                "spread": max(b["max"] - b["min"], a["max"] - a["min"]),
                "differs": not overlap,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", type=Path, default=ROOT / "validation" / "traces" / "memory")
    p.add_argument("--cases", type=Path, default=ROOT / "validation" / "cases.toml")
    p.add_argument("--json", action="store_true", help="one JSON object: every run, every setting, every case")
    args = p.parse_args(argv)
    found = settings(args.traces)
    if not found:
        p.error(f"{args.traces}: no {RUN_TRACES} below it")
    runs = {name: [measure(t) for t in traces] for name, traces in found.items()}
    measured = {str(Path(r.path).resolve()): r for rs in runs.values() for r in rs}
    cases = pairs(args.cases, measured) if args.cases.is_file() else []
    summary = {name: summarize(rs) for name, rs in runs.items()}
    if args.json:
        json.dump(
            {"runs": {n: [asdict(r) for r in rs] for n, rs in runs.items()}, "settings": summary, "cases": cases},
            sys.stdout,
            indent=1,
        )
        print()
        return 0
    print(
        "Peak Total Allocated (MiB) per run: each recorded step, then over the trace; start: the total as the step"
        " began"
    )
    for name, rs in runs.items():
        for r in rs:
            cells = "  ".join(
                f"{s.name.removeprefix('ProfilerStep')}: start {_mib(s.start)} peak {_mib(s.peak)}" for s in r.steps
            )
            odd = f"  unknown frees {r.unknown_frees}" if r.unknown_frees else ""
            if r.allocator:
                odd += (
                    f"  allocator max {_mib(r.allocator['max_allocated'])} reserved {_mib(r.allocator['max_reserved'])}"
                )
            odd += f"  outside steps {r.outside_steps}" if r.outside_steps else ""
            print(f"  {name:<32} {Path(r.path).parent.name:<5} {cells}  all: {_mib(r.peak)}  ({r.events} events){odd}")
    print("\nPeak at (run 1, each step): the outermost range > the innermost op around the event of the peak")
    for name, rs in runs.items():
        for s in rs[0].steps:
            print(f"  {name:<32} {s.name.removeprefix('ProfilerStep'):<3} {s.where}")
    print("\nPer setting, over its runs: mean [min, max] MiB")
    for name, s in summary.items():
        cells = "  ".join(
            f"{k.removeprefix('ProfilerStep')}: {_mib(v['mean'])} [{_mib(v['min'])}, {_mib(v['max'])}]"
            for k, v in s["steps"].items()
        )
        pk = s["peak"]
        print(f"  {name:<32} n={s['runs']}  {cells}  all: {_mib(pk['mean'])} [{_mib(pk['min'])}, {_mib(pk['max'])}]")
    print("\nPeak of each phase's events, over the runs and their steps: mean [min, max] MiB")
    for name, s in summary.items():
        cells = "  ".join(
            f"{ph}: {_mib(v['mean'])} [{_mib(v['min'])}, {_mib(v['max'])}]" for ph, v in s["phases"].items()
        )
        print(f"  {name:<32} {cells}")
    if cases:
        print(
            f"\nCases of {args.cases.name}: AFTER / BEFORE of the mean peak; differs: the runs' [min, max] do not"
            " overlap"
        )
        for c in cases:
            b, a = c["before"], c["after"]
            ratio = f"{c['ratio']:.3f}" if c["ratio"] is not None else "-"
            print(
                f"  {c['name']:<48} {_mib(b['mean'])} -> {_mib(a['mean'])}  x{ratio}  spread {_mib(c['spread'])}  "
                f"{'differs' if c['differs'] else 'unchanged' if b['mean'] == a['mean'] else 'within the spread'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
