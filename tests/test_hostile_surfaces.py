"""Hostile input, third round (issue 80): big numbers in files, flags and the API; saved results that cannot be
compared against; parse errors that name their file; outputs aimed into input folders; control characters in names;
graphs the Python API is handed without their attributes.

Most tests call the CLI's ``main`` in this process (``cli``): a subprocess costs a second of imports each.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import xml.dom.minidom
from pathlib import Path

import pytest

from daydream.api.demo import bundled_example
from daydream.commands import cli as cli_module
from daydream.errors import DaydreamError, ScriptError
from daydream.perf.embeddings.sharding import ShardingProblem, Table, best_plan

BIG = "1" + "0" * 400  # past a float: float(BIG) raises OverflowError


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``daydream ARGS`` in this process: its exit status, stdout and stderr. argparse's own refusals exit 2."""
    try:
        code = cli_module.main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    dst = tmp_path / "t.json.gz"
    shutil.copyfile(bundled_example(), dst)
    return dst


# ---- item 4: numbers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [(BIG, "401 digits"), ("inf", "infinite"), ("nan", "nan"), ("1e400", "infinite"), ("-1e300", "-1e+300")],
)
def test_a_scenarios_file_number_out_of_range_is_one_line_naming_file_and_field(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], value: str, said: str
) -> None:
    sc = tmp_path / "sc.toml"
    sc.write_text(f'[[scenario]]\nname = "a"\nscripts = ["amp"]\nparams = {{ compute_speedup = {value} }}\n')
    code, _, err = cli(capsys, "compare", str(trace), str(sc))
    assert code == 1, err
    assert f"{sc}: scenario[0].params.compute_speedup: " in err and said in err and "10^18" in err
    assert len(err.strip().splitlines()) == 1


def test_a_cases_file_and_the_api_refuse_a_big_number_alike(tmp_path: Path, trace: Path) -> None:
    from daydream.api.compare import load_scenarios
    from daydream.api.validate import load_cases

    cases = tmp_path / "cases.toml"
    cases.write_text(
        f'[[case]]\nname = "a"\nbefore = ["{trace}"]\nafter = ["{trace}"]\nscripts = ["amp"]\n'
        f"params = {{ compute_speedup = {BIG} }}\n"
    )
    with pytest.raises(DaydreamError, match=r"cases.toml: case\[0\]\.params\.compute_speedup: a whole number of 401"):
        load_cases(cases)
    sc = tmp_path / "sc.toml"
    sc.write_text(f'[[scenario]]\nname = "a"\nscripts = ["amp"]\nparams = {{ compute_speedup = {BIG} }}\n')
    with pytest.raises(DaydreamError, match="sc.toml: scenario"):
        load_scenarios(sc)


@pytest.mark.parametrize(
    "value",
    [10**400, 10**5000, float("inf"), float("nan"), [1, 10**30], 1e300],
    ids=["e400", "e5000", "inf", "nan", "list", "e300"],
)
def test_the_api_refuses_a_param_number_out_of_range(tmp_path: Path, value: object) -> None:
    from daydream.api.whatif import whatif

    script = tmp_path / "s.whatif"
    script.write_text("param speedup = 2\nscale cpu by 1 / speedup\n")
    with pytest.raises(ScriptError, match=r"params\['speedup'\]: .*finite and at most 10\^18"):
        whatif(bundled_example(), [str(script)], {"speedup": value})


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("rows = 268435456\ndim = 1073741824\npooling = 1", "dim must be a positive integer of at most 65,536"),
        ("rows = 10\ndim = 4\npooling = 1e300", "pooling: 1e+300"),
        ("rows = 10\ndim = 4\npooling = 1e17", "pooling must be a number from 0 to 1,000,000"),
        (f"rows = {BIG}\ndim = 4\npooling = 1", "rows: a whole number of 401 digits"),
        (f"rows = 10\ndim = {BIG}\npooling = 1", "dim: a whole number of 401 digits"),
        ("rows = 268435457\ndim = 4\npooling = 1", "rows must be a positive integer of at most 268,435,456"),
        ("rows = -5\ndim = 4\npooling = 1", "rows must be a positive integer"),
        ("rows = 10\ndim = 4\npooling = 1\nbytes_per_element = 1000000", "bytes_per_element must be"),
    ],
)
def test_shard_tables_out_of_range_are_refused_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, said: str
) -> None:
    tables = tmp_path / "tables.toml"
    tables.write_text(f'[[table]]\nname = "t"\n{table}\n')
    code, _, err = cli(capsys, "shard", str(tables), "--ranks", "2", "--batch", "64")
    assert code == 1, err
    assert str(tables) in err and said in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--ranks", BIG], "argument --ranks: "),
        (["--batch", BIG], "argument --batch: "),
        (["--memory", "1e300"], "argument --memory: 1e300: a number is finite"),
        (["--memory", "nan"], "argument --memory: nan"),
        (["--ranks", "２"], "ASCII digits"),
        (["--link", "1e-300"], "from 0.001 to 1,000,000,000,000; got 1e-300"),
        (["--link", "inf"], "got inf"),
        (["--link", "１２"], "unknown link"),
        (["--ranks", "99999999", "--batch", "99999999"], "ranks must be a positive integer of at most 65,536"),
    ],
)
def test_shard_flags_out_of_range_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    tables = tmp_path / "tables.toml"
    tables.write_text('[[table]]\nname = "t"\nrows = 10\ndim = 4\npooling = 1\n')
    args = {"--ranks": "2", "--batch": "64"}
    args.update(dict(zip(flags[::2], flags[1::2])))
    code, _, err = cli(capsys, "shard", str(tables), *[x for kv in args.items() for x in kv])
    assert code in (1, 2), err
    assert said in err


def test_a_number_past_pythons_4300_digits_is_one_line_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = tmp_path / "tables.toml"
    tables.write_text(f'[[table]]\nname = "t"\nrows = {"1" * 5000}\ndim = 4\npooling = 1\n')
    code, _, err = cli(capsys, "shard", str(tables), "--ranks", "2", "--batch", "64")
    assert code == 1 and "a whole number of over 4,300 digits" in err, err


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Table("t", 10**5000, 4, 1), "rows must be .* got a whole number of 5,001 digits"),
        (lambda: Table("t", 10, 4, 10**5000), "pooling must be .* got a whole number of 5,001 digits"),
        (lambda: best_plan(ShardingProblem([Table("t", 10, 4, 1)], 2, 10**5000, "V100", "nvlink2")), "batch must be"),
        (
            lambda: best_plan(ShardingProblem([Table("t", 10, 4, 1)], 2, 64, "V100", "nvlink2", other_us=10**400)),
            "other_us",
        ),
        (
            lambda: best_plan(ShardingProblem([Table("t", 10, 4, 1)], 2, 64, "V100", 1e-300)),
            "from 0.001 to 1,000,000,000,000",
        ),
    ],
)
def test_the_sharding_api_refuses_numbers_out_of_range(make: object, said: str) -> None:
    with pytest.raises(DaydreamError, match=said):
        make()  # type: ignore[operator]


def test_full_width_digits_are_no_number_in_a_param(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = trace.with_name("s.whatif")
    script.write_text("param x = 2\nscale cpu by 1 / x\n")
    code, _, err = cli(capsys, "run", str(trace), str(script), "-p", "x=１２")
    assert code == 2 and "unexpected character '１'" in err


# ---- items 9 and 10: saved results ------------------------------------------------------------------------------


BOUND = {"gpu_pct": 0.0, "cpu_pct": 100.0, "by_phase": {}, "by_kernel_class": {}}


def _saved(tmp_path: Path) -> Path:
    """A results file as compare --save writes it, made by hand: a baseline and one scenario 'a'."""
    path = tmp_path / "saved.json"
    path.write_text(
        json.dumps(
            {
                "provenance": {
                    "daydream": "0",
                    "date": "x",
                    "trace": "t",
                    "trace_sha256": "0" * 64,
                    "step": None,
                    "policy": "earliest",
                    "link": None,
                    "device": None,
                    "scenarios_file": None,
                    "script_sha256": {},
                },
                "baseline": {"measured_us": 100.0, "baseline_us": 100.0, "breakdown": {}, "bound": BOUND},
                "scenarios": [
                    {
                        "name": "a",
                        "scripts": ["x"],
                        "params": {},
                        "predicted_us": 90.0,
                        "speedup": 1.1,
                        "throughput": 1.1,
                        "breakdown": None,
                        "bound": None,
                    }
                ],
            }
        )
    )
    return path


@pytest.mark.parametrize(("field", "value"), [("predicted_us", 0), ("predicted_us", -5), ("baseline_us", 0)])
def test_a_saved_time_of_zero_or_below_is_refused_with_its_field(tmp_path: Path, field: str, value: float) -> None:
    from daydream.api.compare import load_saved

    path = _saved(tmp_path)
    doc = json.loads(path.read_text())
    (doc["baseline"] if field == "baseline_us" else doc["scenarios"][0])[field] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(DaydreamError, match=rf"saved.json: .*{field}.* = {value}.*: a saved time is a positive"):
        load_saved(path)


def test_check_against_refuses_a_hand_made_zero_prediction(tmp_path: Path) -> None:
    from daydream.api.compare import check_against, load_saved

    saved = load_saved(_saved(tmp_path))
    saved.scenarios[0].predicted_us = 0.0
    with pytest.raises(DaydreamError, match=r"scenarios\[0\]\.predicted_us"):
        check_against(saved, saved, "mine", 1.0)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
        ('{"a": 1e400}', "Number out of range"),
        ('{"a": 1' + "0" * 30 + "}", "a: 1" + "0" * 30 + ": a number in a file is finite"),
        ("{", "not a results file"),
        ('{"a": ' + "1" * 5000 + "}", "Integer value out of range"),
    ],
    ids=["deep", "e400", "e30", "cut", "digits5000"],
)
def test_a_saved_file_that_cannot_be_read_names_the_file(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    bad = tmp_path / "deep.json"
    bad.write_text(text)
    sc = tmp_path / "sc.toml"
    sc.write_text('[[scenario]]\nname = "a"\nscripts = ["s.whatif"]\n')
    (tmp_path / "s.whatif").write_text("scale cpu by 0.5\n")
    code, _, err = cli(capsys, "compare", str(trace), str(sc), "--against", str(bad))
    assert code == 1 and f"{bad}: " in err and said in err, err


# ---- item 11: a graph handed to the API without its attributes --------------------------------------------------


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda g: g.add_node("extra"), "task 'extra' has no 'duration'"),
        (lambda g: g.add_edge(next(iter(g)), "extra"), "task 'extra' has no 'duration'"),
        (lambda g: g.add_node("extra", duration=1.0), "task 'extra' has no 'thread'"),
        (lambda g: g.add_node("extra", duration="x", thread="cpu:1/1"), "task 'extra': duration 'x' is not a number"),
    ],
)
def test_a_task_without_its_attributes_is_a_daydream_error_naming_it(change: object, said: str) -> None:
    from daydream.api.replay import replay_graph
    from daydream.api.workload import Workload

    graph, _ = Workload(bundled_example()).load()
    change(graph)  # type: ignore[operator]
    with pytest.raises(DaydreamError, match=said):
        replay_graph(graph)


# ---- item 8: control characters in names ------------------------------------------------------------------------

CONTROLS = "\x00\x01\x07\x1b[2J\x1b]0;T\x07\x7f\x85\x9b31m"  # C0 (NUL, BEL), ESC sequences, DEL, C1 (NEL, CSI)
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _named_trace(tmp_path: Path, name: str) -> Path:
    """The bundled example with every CPU op named ``name`` + its name."""
    doc = json.loads(gzip.decompress(Path(bundled_example()).read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator"):
            e["name"] = name + e["name"]
    path = tmp_path / "named.json"
    path.write_text(json.dumps(doc))
    return path


def _strings(value: object) -> list[str]:
    """Every string of a JSON value, keys too."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.extend(k for k in v if isinstance(k, str))
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str):
            out.append(v)
    return out


def test_the_sanitizers_escape_what_each_sink_cannot_hold() -> None:
    from daydream.names import markup_text, terminal_text

    assert terminal_text("a\x1b[2Jb\x9bc\td\ne\x00\r") == "a\\x1b[2Jb\\x9bc\td\ne\\x00\\x0d"
    assert terminal_text("plain ünïcode …") == "plain ünïcode …"
    assert markup_text("a\x00b\x1b\x85\ud800\ufffe\t\n\r") == "a\\x00b\\x1b\\x85\\ud800\\ufffe\t\n\r"


def test_names_with_controls_print_escaped_to_stdout_and_stay_whole_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _named_trace(tmp_path, CONTROLS)
    code, out, _ = cli(capsys, "simulate", str(trace))
    assert code == 0 and not UNSAFE.search(out) and "\\x1b[2J" in out
    code, out, _ = cli(capsys, "simulate", str(trace), "--json")
    assert code == 0 and any(x.startswith(CONTROLS) for x in _strings(json.loads(out)))  # JSON: the name whole


def test_a_file_name_with_escape_sequences_reaches_stderr_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = tmp_path / "bad\x1b]0;T\x07\x1b[2J\u009b.json"
    evil.write_text("{")
    code, out, err = cli(capsys, "simulate", str(evil))
    assert code == 1 and not UNSAFE.search(err) and "bad\\x1b]0;T\\x07\\x1b[2J\\x9b.json" in err


def test_the_terminal_console_escapes_data_and_keeps_its_own_styles() -> None:
    from daydream.presentation.console import terminal_console

    buf = io.StringIO()
    console = terminal_console(file=buf, force_terminal=True, color_system="standard", width=200)
    console.print("written to x\x1b]0;T\x07\x9b", style="bold", markup=False, highlight=False)
    text = buf.getvalue()
    # the data escaped (rich drops the BEL itself), rich's bold kept
    assert "x\\x1b]0;T" in text and "\\x9b" in text and "\x1b[1m" in text
    assert not re.search("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]", text)


def test_an_svg_figure_with_controls_in_its_labels_is_well_formed_xml(tmp_path: Path) -> None:
    from daydream.presentation.plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots()
    ax.set_title("a\x00b\x1bc\x9bd")  # matplotlib writes each label into an XML comment as it is
    ax.barh(["x\x01y"], [1])
    svg = next(p for p in _save(fig, str(tmp_path), "f") if p.endswith(".svg"))
    xml.dom.minidom.parse(svg)


def test_the_report_page_holds_no_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _named_trace(tmp_path, CONTROLS)
    code, out, _ = cli(capsys, "report", str(trace), "--out", str(tmp_path / "rep"))
    assert code == 0 and not UNSAFE.search(out)
    html = (tmp_path / "rep" / "index.html").read_text("utf-8")
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", html) and "\\x1b[2J" in html
    for svg in (tmp_path / "rep").glob("*.svg"):
        xml.dom.minidom.parse(str(svg))
    assert any(x.startswith(CONTROLS) for x in _strings(json.loads((tmp_path / "rep" / "report.json").read_text())))


# ---- item 7: outputs aimed into an input folder -----------------------------------------------------------------


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job folder of two copies of the bundled example."""
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        shutil.copyfile(bundled_example(), folder / f"rank{rank}.json.gz")
    return folder


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--out", "{job}", "{job}"],
        ["simulate", "--export-trace", "{job}/rank2.json", "{job}"],
        ["simulate", "--export-trace", "{link}/rank2.json", "{job}"],  # through a symlink to the folder
        ["compare", "--save", "{job}/r.json", "{job}", "{sc}"],
        ["run", "{job}", "{s}", "--export-trace", "{job}/timeline.json"],
    ],
)
def test_an_output_into_a_job_folder_is_refused_and_the_job_still_loads(
    tmp_path: Path, job: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    (tmp_path / "s.whatif").write_text("scale cpu by 0.5\n")
    (tmp_path / "sc.toml").write_text('[[scenario]]\nname = "a"\nscripts = ["s.whatif"]\n')
    (tmp_path / "link").symlink_to(job)
    names = {"job": job, "link": tmp_path / "link", "sc": tmp_path / "sc.toml", "s": tmp_path / "s.whatif"}
    before = sorted(p.name for p in job.iterdir())
    code, _, err = cli(capsys, *[a.format(**names) for a in args])
    assert code == 1 and f"inside {job}, a job's folder" in err, err
    assert sorted(p.name for p in job.iterdir()) == before
    code, out, err = cli(capsys, "simulate", str(job))
    assert code == 0, err


def test_an_output_into_a_subfolder_of_a_job_is_written_and_the_job_still_loads(
    tmp_path: Path, job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (job / "out").mkdir()  # reading a job takes the files at its top only
    code, _, err = cli(capsys, "simulate", str(job), "--export-trace", str(job / "out" / "t.json"))
    assert code == 0 and (job / "out" / "t.json").is_file(), err
    code, _, err = cli(capsys, "simulate", str(job))
    assert code == 0, err


def test_a_script_written_into_an_include_dir_is_refused_other_outputs_are_not(
    tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    script = tmp_path / "s.whatif"
    script.write_text("scale cpu by 0.5\n")
    for out in (inc / "x.whatif", inc / "sub" / "y.whatif"):
        code, _, err = cli(
            capsys, "run", str(trace), str(script), "--include-dir", str(inc), "--export-trace", str(out)
        )
        assert code == 1 and "an --include-dir: each .whatif file there is a script" in err, err
    assert not list(inc.rglob("*.whatif"))
    code, _, err = cli(
        capsys, "run", str(trace), str(script), "--include-dir", str(inc), "--export-trace", str(inc / "t.json")
    )
    assert code == 0 and (inc / "t.json").is_file(), err


# ---- slow but not broken ----------------------------------------------------------------------------------------


def test_a_rank_file_that_is_a_link_to_a_system_file_shows_none_of_its_bytes(
    tmp_path: Path, job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "passwd"  # a look-alike of /etc/passwd: tests touch no system file
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (job / "rank1.json.gz").unlink()
    (job / "rank1.json").symlink_to(secret)
    code, _, err = cli(capsys, "simulate", str(job))
    assert code == 1 and "not JSON (starts with text, where a trace starts with '{' or '[')" in err, err
    assert "root:x" not in err and "/bin/bash" not in err


def test_a_folder_named_as_a_case_trace_is_said_to_be_a_folder(tmp_path: Path, trace: Path) -> None:
    from daydream.api.validate import load_cases

    cases = tmp_path / "cases.toml"
    cases.write_text(f'[[case]]\nname = "a"\nbefore = ["."]\nafter = ["{trace}"]\nscripts = ["amp"]\n')
    with pytest.raises(DaydreamError, match=r"case 'a': trace .*: is a folder; before and after name trace files"):
        load_cases(cases)


def test_a_saved_file_of_more_scenarios_than_a_comparison_holds_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import daydream.api.compare as compare

    path = _saved(tmp_path)
    doc = json.loads(path.read_text())
    doc["scenarios"] = [dict(doc["scenarios"][0], name=f"s{i}") for i in range(11)]
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(compare, "MAX_SCENARIOS", 10)
    with pytest.raises(DaydreamError, match="11 scenarios: a comparison holds at most 10"):
        compare.load_saved(path)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        ("tolerance", "５"),
        ("tolerance", "1e400"),
        ("size", "١٢MB"),
        ("fraction", "５%"),
        ("counts", "２,3"),
        ("counts", BIG),
    ],
)
def test_numbers_given_as_text_are_read_one_way(parse: str, text: str) -> None:
    from daydream.api.compare import parse_tolerance
    from daydream.api.embeddings import parse_counts, parse_fraction, parse_size

    call = {"tolerance": parse_tolerance, "size": parse_size, "fraction": parse_fraction, "counts": parse_counts}[parse]
    with pytest.raises(DaydreamError):
        call(text) if parse != "counts" else call(text, "--rows")  # type: ignore[operator]
