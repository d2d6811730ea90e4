"""Chakra execution traces in and out (daydream/graph/chakra.py, daydream/api/chakra.py, docs/ecosystem.md).

Every shared trace and the dlrm8 job written as Chakra ETs, read back and simulated, gives the step the original
graph gives (within 0.5%; it is exact) with the same tasks and the same dependencies of each kind: a kind the export
or the import dropped turns these red (tests below drop each in turn). mlc-chakra's own jsonizer reads every file
written, whose node ids follow their dependencies. A what-if exported (scale_out to 64 ranks on dlrm8) reads back to
the prediction `daydream run` gave. Another producer's ETs (mlc-chakra's text converter) simulate as their
dependencies say; malformed files are one-line errors naming the file.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

pytest.importorskip(
    "chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra is not installed (pip install 'daydream-whatif[chakra]')"
)

from chakra.schema.protobuf.et_def_pb2 import AttributeProto, GlobalMetadata, Node  # noqa: E402
from chakra.src.third_party.utils.protolib import encodeMessage  # noqa: E402

import daydream.graph.chakra as chakra  # noqa: E402
from daydream.api.chakra import export_chakra, export_name  # noqa: E402
from daydream.api.job import replay_job_graph  # noqa: E402
from daydream.api.replay import edges_by_kind, replay_graph  # noqa: E402
from daydream.api.whatif import whatif  # noqa: E402
from daydream.api.workload import Workload  # noqa: E402
from daydream.commands.cli import main  # noqa: E402
from daydream.errors import DaydreamError, TraceError  # noqa: E402
from daydream.graph.chakra import COMM_GROUP_FILE, read_chakra, write_chakra  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DLRM8 = SHARED / "param" / "dlrm8"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"real traces not available: {SHARED} is absent")
needs_dlrm8 = pytest.mark.skipif(not DLRM8.is_dir(), reason=f"{DLRM8} not present (shared traces)")
TOLERANCE = 0.005  # the bound on a round trip's step; it is exact


def shared_traces() -> list[Path]:
    """Every shared Kineto trace (execution traces aside), the dlrm8 ranks each alone among them."""
    if not SHARED.is_dir():
        return []
    return sorted(
        p
        for p in SHARED.rglob("*.json*")
        if "_et" not in p.parent.name and ".et." not in p.name and "_et." not in p.name
    )


def jsonized(path: str, tmp_path: Path) -> list[dict[str, Any]]:
    """What mlc-chakra's jsonizer makes of ``path``: the metadata, then each node, as JSON objects."""
    from chakra.src.jsonizer import jsonizer

    out = tmp_path / (Path(path).name + ".json")
    argv = sys.argv
    sys.argv = ["chakra_jsonizer", "--input_filename", path, "--output_filename", str(out)]
    try:
        jsonizer.main()
    finally:
        sys.argv = argv
    text, decoder, objects, at = out.read_text(), json.JSONDecoder(), [], 0
    while at < len(text):
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)
        while at < len(text) and text[at].isspace():
            at += 1
    return objects


def check_with_jsonizer(files: list[str], tmp_path: Path) -> int:
    """Every file reads through the jsonizer: its metadata first, then nodes whose ids are unique and whose
    dependencies (data and control) name nodes before them (so the file is acyclic). Returns the nodes read."""
    nodes = 0
    for f in files:
        objects = jsonized(f, tmp_path)
        assert objects and objects[0].get("version") == chakra.CHAKRA_VERSION, f
        ids: set[int] = set()
        for node in objects[1:]:
            nid = int(node.get("id", 0))
            assert nid not in ids
            deps = [int(d) for d in node.get("dataDeps", []) + node.get("ctrlDeps", [])]
            assert all(d in ids for d in deps), f"{f}: node {nid} depends on a node not before it"
            ids.add(nid)
            attrs = {a["name"] for a in node.get("attr", [])}
            assert "is_cpu_op" in attrs
        nodes += len(objects) - 1
    return nodes


def step_of(graph: nx.DiGraph) -> float:
    """The step a replay gives: a job's slowest rank's window, else the measured step's period."""
    return replay_job_graph(graph).baseline_us if graph.graph.get("ranks") else replay_graph(graph).baseline_us


def assert_same_graph(before: nx.DiGraph, after: nx.DiGraph) -> float:
    """The round trip kept the tasks, the dependencies of each kind and the step (within TOLERANCE); its error."""
    assert Counter(a["kind"] for a in after.nodes.values()) == Counter(a["kind"] for a in before.nodes.values())
    assert edges_by_kind(after) == edges_by_kind(before)
    a, b = step_of(before), step_of(after)
    error = abs(b - a) / a if a else abs(b)
    assert error <= TOLERANCE, (a, b)
    return error


def round_trip(
    path: Path, out: Path, world: int | None = None, order_deps: str = "data"
) -> tuple[nx.DiGraph, nx.DiGraph, Any]:
    before, _ = Workload(str(path)).load()
    written = write_chakra(before, out, export_name(path), world, order_deps)
    after, _ = Workload(str(out)).load()
    return before, after, written


@needs_shared
@pytest.mark.slow
def test_every_shared_trace_round_trips_to_the_same_step(tmp_path: Path) -> None:
    checked = 0
    for k, path in enumerate(shared_traces()):
        try:
            before, _ = Workload(str(path)).load()
        except DaydreamError:
            continue  # a trace the builder refuses has no graph to write
        out = tmp_path / f"t{k}"
        # a dlrm8 rank alone (the job is read whole below); the other rank of a job, the DDP trace, as its world of 2
        written = write_chakra(before, out, export_name(path), 1 if path.parent == DLRM8 else None)
        if written.world > 1:  # a rank of a job (its trace names the world): each rank written as it, the job read back
            after, _ = Workload(str(out)).load_shared()
            assert after.graph.get("ranks") and len(after.graph["ranks"]) == written.world
            assert len(after) == len(before) and {r.same_as for r in after.graph["ranks"][1:]} == {0}
            assert abs(step_of(after) - step_of(before)) <= TOLERANCE * step_of(before), path
            # the copies differ from the first in their metadata alone: the jsonizer reads the first and the last
            assert (
                check_with_jsonizer(written.files[:: written.world - 1], tmp_path) == 2 * written.nodes // written.world
            )
        else:
            after, _ = Workload(str(out)).load()
            assert_same_graph(before, after)
            assert check_with_jsonizer(written.files, tmp_path) == written.nodes
        checked += 1
    assert checked >= 18


@needs_dlrm8
@pytest.mark.parametrize("order_deps", ["data", "ctrl"])
def test_the_dlrm8_job_round_trips_rank_by_rank(tmp_path: Path, order_deps: str) -> None:
    before, after, written = round_trip(DLRM8, tmp_path / "et", order_deps=order_deps)
    assert written.world == 8 and [Path(f).name for f in written.files] == [f"dlrm8.{r}.et" for r in range(8)]
    assert_same_graph(before, after)
    b, a = replay_job_graph(before), replay_job_graph(after)
    for x, y in zip(b.ranks, a.ranks):
        assert y.step_us == pytest.approx(x.step_us, rel=TOLERANCE) and y.wait_us == pytest.approx(x.wait_us, abs=1.0)
    assert a.report.straggler is not None and a.report.straggler.rank == b.report.straggler.rank == 7
    assert after.graph["collectives"].groups == before.graph["collectives"].groups
    assert after.graph["collectives"].pricing == before.graph["collectives"].pricing
    assert check_with_jsonizer(written.files, tmp_path) == written.nodes
    if order_deps == "ctrl":  # a thread's and a stream's order in ctrl_deps, the rest in data_deps
        node = next(n for n in jsonized(written.files[0], tmp_path)[1:] if n.get("ctrlDeps") and n.get("dataDeps"))
        kinds = {a["name"]: a for a in node["attr"]}
        assert set(kinds["ctrl_dep_kinds"]["stringList"]["values"]) <= {"thread", "stream"}


@pytest.mark.slow
@needs_dlrm8
def test_an_exported_scale_out_reads_back_to_the_prediction_run_gave(tmp_path: Path) -> None:
    run = whatif(Workload(str(DLRM8)), ["scale_out"], {"ranks": "64"})
    out = tmp_path / "et64"
    done = export_chakra(Workload(str(DLRM8)), out, ["scale_out"], {"ranks": "64"})
    assert done.predicted_us == run.predicted_us
    assert done.written.world == 64 and done.world_from == "scale_out's ranks = 64" and done.written.traced_ranks == 8
    graph, _ = Workload(str(out)).load_shared()
    job = replay_job_graph(graph)
    assert job.baseline_us == pytest.approx(run.predicted_us, rel=TOLERANCE)
    assert len(job.ranks) == 64 and job.report.simulated_ranks == 8  # rank r + 8k is rank r's copy
    assert graph.graph["collectives"].groups["world"].ranks == 64
    assert json.loads((out / COMM_GROUP_FILE).read_text()) == {}  # every collective on the world: no named group
    objects = jsonized(str(out / "dlrm8.63.et"), tmp_path)
    meta = {a["name"]: a for a in objects[0]["attr"]}
    assert int(meta["rank"]["int64Val"]) == 63 and int(meta["world_size"]["int64Val"]) == 64
    assert int(meta["traced_rank"]["int64Val"]) == 7
    comm = [n for n in objects[1:] if n.get("type") == "COMM_COLL_NODE"]
    assert len(comm) == 8 and all("pg_name" not in {a["name"] for a in n["attr"]} for n in comm)


@needs_dlrm8
def test_by_chakras_fields_alone_dlrm8_replays_within_5_percent(tmp_path: Path) -> None:
    """What a consumer that reads Chakra's fields alone (ASTRA-sim) is given: the gaps and late starts as nodes, no
    lags, no stream gaps, whole microseconds (docs/ecosystem.md gives the figure: +2.2%)."""
    from daydream.perf.collectives.job import price_collectives

    before, _ = Workload(str(DLRM8)).load()
    write_chakra(before, tmp_path / "et", "d")
    alone = read_chakra(tmp_path / "et", share=False, fields_only=True)
    alone.graph["collectives"].pricing = price_collectives(alone, None)
    assert not any("task_id" in a or "gap_of" in a for a in alone.nodes.values())  # daydream's attributes unread
    assert step_of(alone) == pytest.approx(step_of(before), rel=0.05)


@pytest.mark.parametrize("kind", ["thread", "stream", "launch", "sync", "comm"])
@needs_shared
def test_a_dropped_edge_kind_turns_the_round_trip_red(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sabotage the round trips must catch: the export leaves out the dependencies of one kind."""
    path = DLRM8 if kind == "comm" else SHARED / "param" / "resnet_kineto.json.gz"
    before, _ = Workload(str(path)).load()
    real = chakra.predecessors_of

    def without(graph: nx.DiGraph) -> dict[Any, dict[Any, Any]]:
        return {n: {p: e for p, e in ps.items() if e.get("kind") != kind} for n, ps in real(graph).items()}

    monkeypatch.setattr(chakra, "predecessors_of", without)
    write_chakra(before, tmp_path / "et", "t")
    monkeypatch.setattr(chakra, "predecessors_of", real)
    after, _ = Workload(str(tmp_path / "et")).load()
    with pytest.raises(AssertionError):
        assert_same_graph(before, after)


def test_the_attributes_round_trip_with_their_types(tmp_path: Path) -> None:
    graph = nx.DiGraph()
    values = {
        "kind": "gpu",
        "name": "k",
        "thread": "gpu:0/7",
        "rank": 0,
        "duration": 1.25,
        "gap": 0.5,
        "release": None,
        "step": "s",
        "phase": "forward",
        "shapes": [[2, 3], []],
        "tensors_in": (1, 2),
        "blocks": 1 << 40,
        "queued": True,
        "prio": -3,
        "big": 1 << 70,
    }
    graph.add_node(0, **values)
    graph.graph.update(rank=0, world_size=1, steps=[], warnings=[])
    write_chakra(graph, tmp_path / "et", "one")
    back = read_chakra(tmp_path / "et")
    a = back.nodes[0]
    for key, value in values.items():
        if key != "big":
            assert a[key] == value and type(a[key]) is type(value), key
    assert a["big"] == 1 << 70  # past int64: JSON text


def text_workload(tmp_path: Path, npus: int = 4) -> Path:
    """mlc-chakra's text converter on a two-layer data-parallel model: another producer's ETs."""
    from chakra.src.converter.text_converter import TextConverter

    src = tmp_path / "model.txt"
    src.write_text(
        "DATA\n2\nlayer1 -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 1048576 10\n"
        "layer2 -1 40 NONE 0 50 NONE 0 60 ALLREDUCE 2097152 10\n"
    )
    out = tmp_path / "dp"
    out.mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the converter writes a log where it runs
    try:
        TextConverter(str(src), str(out / "dp"), npus, 1).convert()
    finally:
        os.chdir(cwd)
    return out


def test_another_producers_trace_simulates_as_its_dependencies_say(tmp_path: Path) -> None:
    from daydream.perf.collectives import collective_us, resolve_link

    folder = text_workload(tmp_path)
    graph, _ = Workload(str(folder), link="nvlink4").load_shared()
    job = replay_job_graph(graph)
    # the host nodes (no is_cpu_op: a host op, as ASTRA-sim reads them) run 10 + 40 forward, then 60 + 50 + 30
    # backward on one thread; layer 1's all-reduce follows its weight gradient, at 190 us
    assert job.baseline_us == pytest.approx(190 + collective_us("allreduce", 1 << 20, 4, resolve_link("nvlink4")))
    assert len(job.ranks) == 4 and job.report.simulated_ranks == 1
    assert (
        graph.graph["collectives"].groups["world"].ranks == 4
        and graph.graph["collectives"].groups["world"].collectives == 2
    )
    said = [w for w in graph.graph["warnings"] if "a Chakra trace of" in w]
    assert len(said) == 1 and "share one thread" in said[0]  # what it lacks, said once for all its files
    # without a link, collectives of 0 us are kept (their simulator prices them), and said
    graph, _ = Workload(str(folder)).load()
    assert graph.graph["collectives"].pricing.model == "as the Chakra trace gives them"
    assert any("give --link" in w for w in graph.graph["warnings"])


def test_sends_and_receives_pair_by_their_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "p2p"
    folder.mkdir()
    for rank in range(2):
        with open(folder / f"p.{rank}.et", "wb") as fh:
            encodeMessage(fh, GlobalMetadata(version="1.0.0"))
            encodeMessage(
                fh,
                Node(
                    id=0,
                    name="compute",
                    type=4,
                    duration_micros=10 + 90 * rank,
                    attr=[AttributeProto(name="is_cpu_op", bool_val=False)],
                ),
            )
            encodeMessage(
                fh,
                Node(
                    id=1,
                    name="send" if rank == 0 else "recv",
                    type=5 + rank,
                    duration_micros=5,
                    data_deps=[0],
                    attr=[
                        AttributeProto(name="is_cpu_op", bool_val=False),
                        AttributeProto(name="comm_src", int32_val=0),
                        AttributeProto(name="comm_dst", int32_val=1),
                        AttributeProto(name="comm_size", int64_val=64),
                    ],
                ),
            )
    graph, _ = Workload(str(folder)).load()
    job = replay_job_graph(graph)
    assert job.baseline_us == pytest.approx(105.0)  # the send waits for its receive, posted after rank 1's 100 us


@needs_dlrm8
def test_the_cli_exports_and_simulates_a_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "et"
    assert main(["export", str(DLRM8), "--chakra", str(out)]) == 0
    said = capsys.readouterr().out
    assert "wrote 8 Chakra execution traces" in said and "--workload-configuration=" in said
    assert main(["simulate", str(DLRM8), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert main(["simulate", str(out), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["baseline_us"] == pytest.approx(before["baseline_us"], rel=TOLERANCE)
    assert [r["baseline_us"] for r in after["ranks"]] == pytest.approx(
        [r["baseline_us"] for r in before["ranks"]], rel=TOLERANCE
    )
    assert main(["run", str(out), "straggler", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["predicted_us"] < run["baseline_us"]
    # refused before any work: onto its own input, a folder of other ranks, --step on a Chakra trace
    assert main(["export", str(out), "--chakra", str(out)]) == 1
    assert "an input of this run" in capsys.readouterr().err
    assert main(["export", str(DLRM8), "--world", "2", "--chakra", str(out)]) == 1
    assert "holds other Chakra traces" in capsys.readouterr().err
    assert main(["simulate", str(out), "--step", "3"]) == 1
    assert "--step does not apply" in capsys.readouterr().err
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def _write(path: Path, nodes: list[Any], meta: Any = None) -> Path:
    with open(path, "wb") as fh:
        encodeMessage(fh, meta if meta is not None else GlobalMetadata(version="1.0.0"))
        for node in nodes:
            encodeMessage(fh, node)
    return path


def _hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    own = GlobalMetadata(
        version="1.0.0",
        attr=[
            AttributeProto(name="producer", string_val="daydream 0.1.0"),
            AttributeProto(name="daydream", string_val="{}", doc_string="json"),
        ],
    )
    task = [AttributeProto(name="kind", string_val="cpu"), AttributeProto(name="thread", string_val="cpu:1/2")]
    cases = {
        "random": (random.Random(1).randbytes(4000), ""),
        "empty": (b"", "empty"),
        "huge": (b"\xff\xff\xff\xff\x0f", "more than"),
        "zeros": (b"\x03\x0a\x01\x31" + b"\x00" * 100, "an empty message"),
    }
    out = {}
    for name, (data, said) in cases.items():
        (tmp_path / f"{name}.et").write_bytes(data)
        out[name] = (tmp_path / f"{name}.et", said)
    out["cycle"] = (
        _write(
            tmp_path / "cycle.et",
            [Node(id=1, name="a", type=4, data_deps=[2]), Node(id=2, name="b", type=4, data_deps=[1])],
        ),
        "cycle",
    )
    out["twice"] = (
        _write(tmp_path / "twice.et", [Node(id=1, name="a", type=4), Node(id=1, name="b", type=4)]),
        "appears twice",
    )
    out["type"] = (_write(tmp_path / "type.et", [Node(id=1, name="a", type=42)]), "type 42")
    out["comm_type"] = (
        _write(tmp_path / "comm_type.et", [Node(id=1, type=7, attr=[AttributeProto(name="comm_type", int64_val=77)])]),
        "comm_type 77",
    )
    out["duration"] = (
        _write(
            tmp_path / "duration.et",
            [Node(id=1, name="a", type=4, attr=[*task, AttributeProto(name="duration", double_val=-5.0)])],
            own,
        ),
        "duration -5.0",
    )
    out["json"] = (
        _write(
            tmp_path / "json.et",
            [
                Node(
                    id=1,
                    name="a",
                    type=4,
                    attr=[*task, AttributeProto(name="shapes", string_val="[[[", doc_string="json")],
                )
            ],
            own,
        ),
        "marked JSON",
    )
    out["meta"] = (
        _write(
            tmp_path / "meta.et",
            [],
            GlobalMetadata(
                version="1.0.0",
                attr=[
                    AttributeProto(name="producer", string_val="daydream 0.1.0"),
                    AttributeProto(name="daydream", string_val='{"steps": 5}', doc_string="json"),
                ],
            ),
        ),
        "does not hold a graph's",
    )
    return out


def test_a_malformed_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, (path, said) in _hostile(tmp_path).items():
        with pytest.raises(TraceError) as exc:
            read_chakra(path)
        assert str(path) in str(exc.value) and said in str(exc.value), name
        assert main(["simulate", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and str(path) in err, name


def test_a_dependency_on_a_missing_node_is_dropped_and_said(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.et", [Node(id=1, name="a", type=4, duration_micros=3, data_deps=[7])])
    graph = read_chakra(path)
    assert len(graph) == 1 and replay_graph(graph).baseline_us == 3.0
    assert any("1 dependency on nodes the file does not hold" in w for w in graph.graph["warnings"])


def test_the_cli_without_mlc_chakra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def no_chakra(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("chakra"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_chakra)
    with pytest.raises(DaydreamError, match=r"daydream-whatif\[chakra\]"):
        read_chakra(tmp_path / "x.et")


def test_a_gzip_bomb_is_refused_in_bounded_reads(tmp_path: Path) -> None:
    import gzip

    node = Node(id=1, name="a" * (1 << 20), type=4).SerializeToString()
    framed = bytes([len(node) & 0x7F | 0x80, (len(node) >> 7) & 0x7F | 0x80, len(node) >> 14]) + node
    path = tmp_path / "bomb.et"
    head = io.BytesIO()
    encodeMessage(head, GlobalMetadata(version="1.0.0"))
    path.write_bytes(
        gzip.compress(head.getvalue() + framed * 100)
    )  # 100 MiB of nodes in ~100 kB: past GZIP_RATIO_FLOOR
    with pytest.raises(TraceError, match="more than"):
        read_chakra(path)


def test_the_file_names(tmp_path: Path) -> None:
    assert export_name("/a/b/dlrm8/") == "dlrm8"
    assert export_name("resnet_kineto.json.gz") == "resnet_kineto"
    assert export_name("x/w.3.et") == "w"
    assert export_name("we ird$name.json") == "we_ird_name"
    assert chakra.rank_of_name("dlrm8.12.et") == 12 and chakra.rank_of_name("rank3.et.gz") == 3


@needs_shared
def test_a_job_written_as_the_first_ranks_of_a_smaller_world(tmp_path: Path) -> None:
    before, _ = Workload(str(DLRM8)).load()
    written = write_chakra(before, tmp_path / "et", "d", world=1)
    assert written.world == 1
    graph, _ = Workload(str(tmp_path / "et")).load()
    assert not graph.graph.get("ranks") and {a["rank"] for a in graph.nodes.values()} == {0}
    assert math.isfinite(replay_graph(graph).baseline_us)


def test_the_subprocess_entry_point_exports(tmp_path: Path) -> None:
    example = ROOT / "daydream" / "examples" / "mlp_cpu.json.gz"
    run = subprocess.run(
        [sys.executable, "-m", "daydream", "export", str(example), "--chakra", str(tmp_path / "et"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    d = json.loads(run.stdout)
    assert d["written"]["world"] == 1 and Path(d["written"]["files"][0]).is_file()


def test_a_job_with_process_groups_repeated_for_more_ranks(tmp_path: Path) -> None:
    """Two tensor-parallel pairs of a 4-rank job written as 8 ranks: each copy's pairs are groups of their own."""
    from test_multirank import _named_groups, job

    graph = job(_named_groups("aabb", {"a": [0, 1], "b": [2, 3]}, [100, 200, 300, 400]))
    written = write_chakra(graph, tmp_path / "et", "tp", world=8)
    groups = json.loads((tmp_path / "et" / COMM_GROUP_FILE).read_text())
    assert groups == written.groups == {"a": [0, 1], "a~1": [4, 5], "b": [2, 3], "b~1": [6, 7]}
    back = read_chakra(tmp_path / "et", share=False)
    assert set(back.graph["collectives"].groups) == set(groups)
    before, after = replay_job_graph(graph), replay_job_graph(back)
    assert [r.step_us for r in after.ranks] == [r.step_us for r in before.ranks] * 2
    with pytest.raises(DaydreamError, match="a multiple of 4"):
        write_chakra(graph, tmp_path / "et6", "tp", world=6)
    with pytest.raises(DaydreamError, match="leave out members of process group 'b'"):
        write_chakra(graph, tmp_path / "et2", "tp", world=2)
    assert not (tmp_path / "et2").exists()  # refused before the folder is made
    # the pairs in a world of their own size (a group of every traced rank grows with the world, as the world does)
    whole = job(_named_groups("aa", {"a": [0, 1]}, [100, 200]))
    write_chakra(whole, tmp_path / "et3", "w", world=3)
    assert json.loads((tmp_path / "et3" / COMM_GROUP_FILE).read_text()) == {"a": [0, 1, 2]}
    assert len(read_chakra(tmp_path / "et3").graph["ranks"]) == 3
