"""daydream report: the XSP analyses by hand, the report folder of a real trace, and the page in a headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import pytest
from whatif_graph import iteration

from daydream.api.analyses import analyse
from daydream.api.demo import bundled_traces
from daydream.api.replay import replay_graph
from daydream.commands.cli import main
from daydream.presentation.page import write_report

CPU_TRACE = next(t for t in bundled_traces() if t.endswith("_cpu.json.gz"))


def test_analyses_by_hand() -> None:
    # tests/whatif_graph.py: L1[0,10] K1[12,112] fc1 fwd; L2[10,20] K2[112,132] act fwd; L3[20,30] K3[132,332] fc1 bwd;
    # K4 all-reduce [332,382] on stream 20; K5 adam [382,412]; makespan 415
    # the critical path: L1 and its launch [0,12], K1, K2, K3, K4, K5, the sync's last 3 us: 415 us, each moment
    # owned by one task's module, the all-reduce, the optimizer and the sync of none
    a = analyse(replay_graph(iteration()).timeline, "baseline")
    modules = {(r.name, r.phase): r for r in a.modules}
    fc1 = modules[("model.fc1", "forward")]
    assert (fc1.instances, fc1.critical_us, fc1.critical_gpu_us, fc1.gpu_us, fc1.cpu_us, fc1.span_us, fc1.kernels) == (
        1,
        112,
        100,
        100,
        10,
        112,
        1,
    )
    bwd = modules[("model.fc1", "backward")]
    assert (bwd.critical_us, bwd.gpu_us, bwd.span_us) == (
        200,
        200,
        312,
    )  # its span holds the wait for the forward's GPU work
    act = modules[("model.act", "forward")]
    assert (act.critical_us, act.gpu_us, act.span_us) == (20, 20, 122)
    assert (
        modules[("(outside any layer)", "-")].critical_us,
        modules[("(outside any layer)", "-")].critical_gpu_us,
    ) == (83, 80)
    assert sum(r.critical_us for r in a.modules) == a.step_us == 415  # the rows add up to the step
    assert [r.name for r in a.modules][0] == "model.fc1"  # longest on the path first
    assert a.layers == []  # no top-level ops recorded on the hand-built graph
    streams = {s.stream: s for s in a.streams}
    assert (streams["gpu:0/7"].busy_us, streams["gpu:0/7"].idle_us, streams["gpu:0/7"].tasks) == (350, 65, 4)
    assert (streams["gpu:0/20"].busy_us, streams["gpu:0/20"].idle_us) == (50, 365)
    # idle time by what the task after it waited for: K1 its launch L1 [0,12]; K5 the all-reduce K4 [332,382]; the
    # sync's last 3 us after K5; K4 on stream 20 waited for K3 on stream 7 [0,332], then 33 us to the step's end
    by_cause = {k: v for k, v in streams["gpu:0/7"].idle_by_cause.items() if v}
    assert by_cause == {"cpu_us": 12, "comm_us": 50, "after_us": 3}
    assert {k: v for k, v in streams["gpu:0/20"].idle_by_cause.items() if v} == {"other_stream_us": 332, "after_us": 33}
    kernels = {k.name: k for k in a.kernels}
    assert kernels["sm80_gemm_bwd"].total_us == 200 and kernels["sm80_gemm_bwd"].share_pct == pytest.approx(
        100 * 200 / 400
    )
    assert kernels["ncclAllReduce"].kernel_class == "comm"
    assert a.gpu_busy_pct == pytest.approx(100 * 400 / 415)
    assert a.verdict.startswith("GPU-bound: kernels hold ") and "the GPU is busy 96% of the step" in a.verdict
    assert a.step_us == 415


def test_verdicts_of_other_bounds() -> None:
    g = iteration()
    for _, attrs in g.nodes(data=True):
        if attrs["kind"] == "cpu":
            attrs["duration"] *= 100  # the launches take 1 ms each: the CPU holds the path
    a = analyse(replay_graph(g).timeline, "slow CPU")
    assert a.verdict.startswith("CPU-bound: the GPU is busy ")
    comm = iteration()
    for _, attrs in comm.nodes(data=True):
        if attrs["kind"] == "comm":
            attrs["duration"] = 10_000.0
    assert analyse(replay_graph(comm).timeline, "slow network").verdict.startswith(
        "communication-bound: collectives hold 9"
    )
    cpu = analyse(replay_graph(_cpu_graph()).timeline, "cpu")
    assert cpu.verdict.startswith("CPU only: no GPU work")


def _cpu_graph():  # type: ignore[no-untyped-def]
    from daydream.graph import build_graph
    from daydream.trace import load_trace

    return build_graph(load_trace(CPU_TRACE))


@pytest.fixture(scope="module")
def hta_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import SHARED_TRACES

    trace = SHARED_TRACES / "hta" / "nccl_parser_config_nccl_data.json.gz"
    if not trace.is_file():
        pytest.skip(f"real traces not available: {trace} is absent")
    out = tmp_path_factory.mktemp("report") / "r"
    assert main(["report", str(trace), "amp", "ddp", "--out", str(out)]) == 0
    return out


def test_report_folder_of_a_real_trace(hta_report: Path) -> None:
    names = sorted(p.name for p in hta_report.iterdir())
    # the memory figure too: the trace holds no allocator events, its memory estimated from its shapes
    assert names == [
        "breakdown.png",
        "breakdown.svg",
        "index.html",
        "layers.png",
        "layers.svg",
        "memory.png",
        "memory.svg",
        "report.json",
        "timeline.json.gz",
        "timeline_baseline.png",
        "timeline_baseline.svg",
        "timeline_predicted.png",
        "timeline_predicted.svg",
    ]
    for png in hta_report.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for svg in hta_report.glob("*.svg"):
        assert ET.parse(svg).getroot().tag.endswith("svg")
    doc = json.loads((hta_report / "report.json").read_text())
    base, pred = doc["analyses"]
    assert (base["label"], pred["label"]) == ("baseline", "predicted")
    assert doc["scripts"][0].endswith("amp.whatif") and doc["scripts"][1].endswith("ddp.whatif")
    assert doc["speedup"] == pytest.approx(base["step_us"] / pred["step_us"])
    assert base["verdict"].startswith("CPU-bound: the GPU is busy 23% of the step")
    for a in (base, pred):
        gpu = a["breakdown"]["gpu_only_us"] + a["breakdown"]["cpu_gpu_overlap_us"]
        assert a["gpu_busy_pct"] == pytest.approx(100 * gpu / a["step_us"])
        assert sum(k["share_pct"] for k in a["kernels"]) == pytest.approx(100)
        assert sum(k["total_us"] for k in a["kernels"]) == pytest.approx(
            sum(k["total_us"] for k in a["kernels_by_layer"])
        )
        assert sum(r["critical_us"] for r in a["layers"]) == pytest.approx(a["step_us"], rel=1e-9)
        for r in a["layers"]:
            assert 0 <= r["critical_gpu_us"] <= r["critical_us"] + 1e-6 and r["span_us"] <= a["step_us"] * 3
        for s in a["streams"]:
            assert s["busy_us"] + s["idle_us"] == pytest.approx(a["step_us"])
            assert sum(s["idle_by_cause"].values()) == pytest.approx(s["idle_us"])
    layers = {(r["name"], r["phase"]) for r in base["layers"]}
    assert ("aten::conv2d", "forward") in layers and ("aten::batch_norm", "forward") in layers
    html = (hta_report / "index.html").read_text()
    for ident in (
        "steps",
        "breakdown",
        "layers-baseline",
        "layers-predicted",
        "kernels-baseline",
        "kernels-by-layer-predicted",
        "streams-baseline",
        "critical-path-predicted",
        "verdict-baseline",
        "idle-by-cause",
    ):
        assert f'id="{ident}"' in html
    assert "http://" not in html.replace('href="http', "") and "<script" not in html  # nothing fetched, no code


def test_the_interactive_timeline_is_one_click_from_the_page(hta_report: Path) -> None:
    """The report's timelines zoom in Perfetto: timeline.json.gz holds the baseline and the prediction as two
    processes of one Chrome-trace file, linked from the Timelines section; every link of the page resolves (a file
    of the folder, or an https address)."""
    import gzip
    import json

    html = (hta_report / "index.html").read_text()
    assert re.search(r'id="interactive-timeline">[^<]*<a href="timeline.json.gz">', html)
    for href in re.findall(r'href="([^"]+)"', html):
        assert href.startswith("https://") or (hta_report / unescape(href)).is_file(), href
    trace = json.loads(gzip.decompress((hta_report / "timeline.json.gz").read_bytes()))
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert sorted(name.split()[0] for name in processes.values()) == ["baseline", "predicted"]
    kernels = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert {e["pid"] for e in kernels} == set(processes)  # each timeline's kernels in its own process


def test_long_kernel_names_are_short_on_the_page_and_whole_on_hover(hta_report: Path) -> None:
    """The issue's report was 15,300 px tall, mostly full kernel names (a mangled cutlass one of 1,644 characters): a
    name cell holds at most NAME_CHARS characters, its full name in the title (hover) and in report.json."""
    from daydream.names import kernel_label
    from daydream.presentation.page import NAME_CHARS

    html = (hta_report / "index.html").read_text()
    cells = re.findall(r'<td class="name"(?: title="([^"]*)")?>([^<]*)</td>', html)
    assert cells and all(len(unescape(text)) <= NAME_CHARS for _, text in cells), max((t for _, t in cells), key=len)
    long = [(unescape(title), unescape(text)) for title, text in cells if title]
    assert any(title.startswith("_ZN19cutlass_cudnn_train") and len(title) > 1000 for title, _ in long)
    for title, text in long:  # the kernel's name without its signature, shortened in the middle: its start and end kept
        label = kernel_label(title)
        assert label.startswith(text.split("…")[0]) and label.endswith(text.split("…")[-1]), (text, label)
    assert any("…" in text for _, text in long)
    assert "_ZN19cutlass_cudnn_train" in (hta_report / "report.json").read_text()


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _dump_dom(browser: str, page: Path, tmp: Path) -> str:
    """The page's DOM after it loaded (its images' onload/onerror run), with no message on its console (Chromium
    logs each as an INFO:CONSOLE line: a script error, a console.error)."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
            f"--user-data-dir={tmp}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--window-size=1280,900",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    return done.stdout


def test_report_page_in_headless_chromium(hta_report: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless Chromium (Debian: apt-get install chromium)")
    dom = _dump_dom(browser, hta_report / "index.html", tmp_path / "profile")
    images = re.findall(r"<img [^>]*>", dom)
    assert len(images) == 5  # breakdown, memory (estimated from shapes: no allocator events), timelines, layers
    for img in images:
        loaded = re.search(r'data-loaded="(\d+)"', img)
        assert loaded and int(loaded.group(1)) > 100, img  # decoded, with its width
        assert "data-broken" not in img
    for ident in ("layers-baseline", "kernels-predicted", "streams-baseline"):
        table = re.search(rf'<table id="{ident}">.*?</table>', dom, re.S)
        assert table and table.group(0).count("<tr>") > 2
    # short enough to read (the page was 15,300 px tall): long tables show their first rows, the rest fold
    # (the memory section, its figure and table, added about 500 px)
    height = re.search(r'<body [^>]*data-height="(\d+)"', dom)
    assert height and 3000 < int(height.group(1)) < 10_000, height
    assert re.search(r'<details id="kernels-baseline-more"><summary>15 more rows</summary>', dom)
    # a page moved without its figures says so
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(hta_report / "index.html", moved / "index.html")
    dom = _dump_dom(browser, moved / "index.html", tmp_path / "profile2")
    assert dom.count('data-broken="1"') == 5
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile3'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            (hta_report / "index.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:4] == b"\x89PNG"


def test_each_step_before_and_after(tmp_path: Path) -> None:
    """The page and report.json show each simulated step: measured, baseline and predicted (the context step marked)."""
    out = tmp_path / "r"
    assert main(["report", CPU_TRACE, "batch_size", "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    steps = doc["steps"]
    assert [s["context"] for s in steps] == [True, False] and all(s["predicted_us"] > s["baseline_us"] for s in steps)
    assert steps[-1]["baseline_us"] == pytest.approx(doc["baseline_us"])
    table = re.search(r'<table id="each-step">.*?</table>', (out / "index.html").read_text(), re.S)
    assert table and table.group(0).count("<tr>") == 1 + len(steps) and "(context)" in table.group(0)


def test_report_of_a_cpu_recording_and_its_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cpu"
    assert main(["report", CPU_TRACE, "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["analyses"]) == 1 and doc["analyses"][0]["verdict"].startswith("CPU only")
    assert doc["analyses"][0]["streams"] == [] and doc["analyses"][0]["kernels"] == []
    assert not (out / "timeline_predicted.png").exists()
    page = (out / "index.html").read_text()
    assert "The trace holds no GPU work" in page and 'id="kernels-baseline"' not in page
    assert main(["report", CPU_TRACE, "batch_size", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "report written to" in text and "speedup" in text and "Kernels that take longest" not in text
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["report", CPU_TRACE, "--out", str(afile)]) == 1
    assert "is a file" in capsys.readouterr().err
    assert main(["report", CPU_TRACE, "--out", str(tmp_path / "no" / "such")]) == 1
    assert main(["report", CPU_TRACE, "ampp", "--out", str(out)]) == 2
    assert "did you mean 'amp'?" in capsys.readouterr().err


def test_report_from_python(tmp_path: Path) -> None:
    r = write_report(CPU_TRACE, ["batch_size"], {"factor": 2}, str(tmp_path / "py"))
    assert r.speedup is not None and r.speedup < 1
    assert r.params["factor"] == 2 and len(repr(r)) < 300
    assert Path(r.index).is_file() and all(Path(f).is_file() for f in r.files)


def test_a_cpu_recording_gets_no_empty_gpu_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", CPU_TRACE, "batch_size"]) == 0
    out = capsys.readouterr().out
    assert "GPU time by kernel class" not in out and "Breakdown" in out


def test_names_from_a_trace_are_text_on_the_page(tmp_path: Path) -> None:
    """The page is a template filled with autoescaped values: a kernel or op named like markup shows as its text,
    it does not become markup (a trace is data)."""
    from synth import make_trace, write_trace

    doc = make_trace()
    hostile = '<img src=x onerror="alert(1)">'
    for e in doc["traceEvents"]:
        if "sgemm" in str(e.get("name")) and e.get("cat") == "kernel":
            e["name"] = f"sgemm{hostile}"
        elif e.get("name") == "aten::relu":
            e["name"] = "aten::relu</td><script>alert(2)</script>"
    report = write_report(str(write_trace(tmp_path / "t<b>.json", doc)), out_dir=str(tmp_path / "r"))
    html = Path(report.index).read_text()
    assert hostile not in html and "<script>" not in html and "t<b>.json" not in html
    assert "sgemm&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html and "t&lt;b&gt;.json" in html
