"""Terminal rendering of a replay with rich: the tables a person reads."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from daydream.replay import Replay


def ms(us: float) -> str:
    return f"{us / 1e3:,.3f} ms"


def render_replay(result: Replay, console: Console) -> None:
    d = result.to_dict()
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    console.print(f"[b]daydream simulate[/] {d['trace']}", highlight=False)
    head = Table(show_header=False, box=None)
    head.add_row("device", str(d["device"] or "-"), "rank", f"{d['rank']} of {d['world_size']}")
    head.add_row("tasks", f"{d['tasks']:,}", "edges", f"{d['edges']:,}")
    console.print(head)

    steps = Table(title="Iteration time", title_justify="left")
    steps.add_column("step")
    steps.add_column("measured", justify="right")
    steps.add_column("predicted", justify="right")
    steps.add_column("error", justify="right")
    for s in d["steps"]:
        err = (s["predicted_us"] - s["measured_us"]) / s["measured_us"] * 100 if s["measured_us"] else 0.0
        steps.add_row(s["name"], ms(s["measured_us"]), ms(s["predicted_us"]), f"{err:+.2f}%")
    if len(d["steps"]) != 1:
        steps.add_row("[b]all[/]", ms(d["measured_us"]), ms(d["predicted_us"]), f"{d['error_pct']:+.2f}%")
    console.print(steps)

    bd = d["breakdown"]
    brk = Table(title="Breakdown (predicted)", title_justify="left")
    for col in ("CPU only", "GPU only", "CPU+GPU overlap", "idle"):
        brk.add_column(col, justify="right")
    total = bd["total_us"] or 1.0
    brk.add_row(*(f"{ms(bd[k])} ({bd[k] / total:.0%})" for k in ("cpu_only_us", "gpu_only_us", "cpu_gpu_overlap_us", "idle_us")))
    console.print(brk)

    cp = d["critical_path"]
    title = f"Critical path: {cp['tasks']:,} tasks; GPU holds it {ms(cp['gpu_us'])}, CPU {ms(cp['cpu_us'])}"
    crit = Table(title=title, title_justify="left")
    crit.add_column("top tasks on the critical path", overflow="ellipsis", max_width=60, no_wrap=True)
    crit.add_column("time", justify="right", no_wrap=True, min_width=11)
    crit.add_column("top layers on the critical path", overflow="ellipsis", max_width=40, no_wrap=True)
    crit.add_column("time", justify="right", no_wrap=True, min_width=11)
    names, layers = list(cp["by_name"].items()), list(cp["by_layer"].items())
    for i in range(max(len(names), len(layers))):
        n = names[i] if i < len(names) else ("", None)
        la = layers[i] if i < len(layers) else ("", None)
        crit.add_row(n[0], ms(n[1]) if n[1] is not None else "", la[0], ms(la[1]) if la[1] is not None else "")
    console.print(crit)
