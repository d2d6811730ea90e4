"""What each .whatif statement does to a graph, on the hand-built iteration of whatif_graph.py.

Every expected time is worked out by hand from the timeline in whatif_graph's docstring.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from whatif_graph import BASELINE_US, CPU, S7, iteration

from daydream.api.whatif import run_whatif
from daydream.dsl import Session
from daydream.dsl.parse import parse_script
from daydream.errors import CheckFailed, NotApplicable, ScriptError
from daydream.graph import add_dependency, add_task
from daydream.graph.edit import check_threads
from daydream.graph.select import Selection


def session(**kw: object) -> Session:
    return Session(iteration(), **kw)  # type: ignore[arg-type]


def names(s: Session, expr: str) -> list[str]:
    s.execute(f"let shown_ = {expr}")
    sel = s.scope.pop("shown_")
    assert isinstance(sel, Selection)
    return sorted(s.graph.nodes[n]["name"] for n in sel)


def test_unchanged_graph_predicts_the_baseline() -> None:
    s = session()
    assert s.baseline_us == BASELINE_US and s.predicted_us == BASELINE_US and s.measured_us == BASELINE_US


def test_amp_example_from_the_issue() -> None:
    s = session()
    s.execute("""
param compute_speedup = 2
param memory_speedup = 2
let gemm = select gpu where class in ["gemm", "conv"]
scale gemm by 1 / compute_speedup
scale (select gpu) - gemm - (select comm) by 1 / memory_speedup
""")
    # K1 50 [12,62], relu 10 [62,72], K3 100 [72,172], allreduce 50 [172,222], adam 15 [222,237], sync [237,240]
    assert s.predicted_us == 240.0


def test_fused_optimizer_example_from_the_issue() -> None:
    s = session()
    effects = s.execute("""
let step = select where phase == "optimizer"
insert gpu "fused_adam" after last(step & gpu) duration sum((step & gpu).duration) / 4
remove step
""")
    # the fused kernel (7.5 us) waits for the all-reduce as adam did: [382, 389.5]; its launch follows L4
    assert s.predicted_us == 389.5
    assert [(e.kind, e.added, e.removed) for e in effects] == [("insert", 2, 0), ("remove", 0, 3)]
    assert sorted(a["name"] for _, a in s.graph.nodes(data=True) if a["kind"] != "cpu") == [
        "fused_adam",
        "ncclAllReduce",
        "relu_kernel",
        "sm80_gemm_bwd",
        "sm80_gemm_fwd",
    ]
    assert nx.is_directed_acyclic_graph(s.graph)
    check_threads(s.graph)


def test_select_by_kind_attribute_regex_and_ranges() -> None:
    s = session()
    assert names(s, "select comm") == ["ncclAllReduce"]
    assert len(names(s, "gpu")) == 5 and len(names(s, "kernel")) == 4 and len(names(s, "cpu")) == 6
    assert names(s, 'select gpu where name ~ "gemm" and duration >= 150us') == ["sm80_gemm_bwd"]
    assert names(s, 'select where layer ~ "^model\\.fc"') == [
        "cudaLaunchKernel",
        "cudaLaunchKernel",
        "sm80_gemm_bwd",
        "sm80_gemm_fwd",
    ]
    assert names(s, "select gpu where bytes > 1MB") == ["ncclAllReduce"]  # none > 1MB is false, not an error
    assert names(s, 'select gpu where class not in ["gemm", "comm"] and name !~ "relu"') == ["multi_tensor_apply_adam"]
    assert names(s, "select where stream == 20") == ["ncclAllReduce"]
    assert names(s, 'select kernel where phase == "backward" or duration < 25us') == ["relu_kernel", "sm80_gemm_bwd"]


def test_set_algebra_and_neighbours() -> None:
    s = session()
    assert names(s, '(select gpu) - kernel | (select where name ~ "Sync")') == [
        "cudaDeviceSynchronize",
        "ncclAllReduce",
    ]
    assert names(s, 'gpu & (select where phase == "forward")') == ["relu_kernel", "sm80_gemm_fwd"]
    s.execute('let adam = select where name ~ "adam"')
    assert names(s, "parents(adam)") == ["cudaLaunchKernel", "ncclAllReduce", "sm80_gemm_bwd"]
    assert names(s, "children(adam)") == ["cudaDeviceSynchronize"]
    assert names(s, "launches(adam)") == ["cudaLaunchKernel"]
    assert names(s, "kernels(first(cpu))") == ["sm80_gemm_fwd"]
    assert names(s, "last(gpu, 2)") == ["multi_tensor_apply_adam", "ncclAllReduce"]
    assert names(s, "(select kernel)[1]") == ["relu_kernel"]


def test_values_projection_functions_and_print() -> None:
    printed: list[str] = []
    s = session(on_print=printed.append)
    s.execute("""
let gemm = select gpu where class == "gemm"
print gemm.duration, sum(gemm.duration), mean(gemm.duration), max(gemm.duration), count(gemm)
print 2ms / 1us, 1KiB, ceil(2.2), round(2.567, 1), 7 % 4, 2 ** 3, -(1 + 2) * 3
print gemm.layer[0], "a" + "b", [1, 2] == [1, 2], none == none, 3 in [1, 3], "gem" in "gemm"
for f in [2, 3] { print f * 2 }
for i in range(2) { print i }
""")
    assert printed == [
        "[100, 200] 300 150 200 2",
        "2000 1024 3 2.6 3 8 -9",
        "model.fc1 ab true true true true",
        "4",
        "6",
        "0",
        "1",
    ]


def test_scale_by_a_per_task_factor_and_set() -> None:
    s = session()
    s.execute("scale comm by bytes / 2MB")  # 4 MB -> factor 2: all-reduce 100 [332,432], adam [432,462], sync [462,465]
    assert s.predicted_us == 465.0
    s = session()
    s.execute("set (select comm).duration = 10us")  # [332,342], adam [342,372], sync [372,375]
    assert s.predicted_us == 375.0
    s.execute('set (select gpu).tag = name + "!"')
    assert s.graph.nodes[8]["tag"] == "ncclAllReduce!"
    assert names(s, 'select where tag ~ "nccl"') == ["ncclAllReduce"]


def test_remove_with_launches_stitches_the_order() -> None:
    s = session()
    effects = s.execute('remove (select gpu where name ~ "relu") with launches')
    assert effects[0].removed == 2
    # CPU L1 [0,10] L3 [10,20] L4 [20,30] L5 [30,40]; K1 [12,112], K3 [112,312], K4 [312,362], adam [362,392], sync
    # [392,395]
    assert s.predicted_us == 395.0
    check_threads(s.graph)


def test_remove_keeps_what_a_removed_task_waited_for() -> None:
    s = session()
    s.execute("remove comm")  # adam waited for the all-reduce; now it waits for what the all-reduce waited for
    assert s.predicted_us == BASELINE_US - 50
    assert nx.is_directed_acyclic_graph(s.graph)


def test_insert_cpu_task_before_the_first_call_delays_everything() -> None:
    s = session()
    s.execute('insert cpu "dataloader_wait" before first(cpu) duration 1ms')
    assert s.predicted_us == BASELINE_US + 1000
    check_threads(s.graph)


def test_insert_comm_on_another_stream_waits_for_its_anchor() -> None:
    s = session()
    s.execute(
        'insert comm "extra_allreduce" after last(select gpu where class == "gemm") duration 100us on 30 with bytes'
        " = 1MB"
    )
    new = [a for _, a in s.graph.nodes(data=True) if a["name"] == "extra_allreduce"][0]
    assert new["thread"] == "gpu:0/30" and new["bytes"] == 1e6 and new["phase"] == "backward" and new["stream"] == 30
    assert s.predicted_us == 432.0  # after the backward gemm [332, 432]; the sync does not wait for stream 30
    check_threads(s.graph)


def test_queued_inserts_run_first_ready_first_or_by_priority() -> None:
    # Transfers on a new stream 30, without launch calls, queued (no place in the stream's order): a (100 us) and b
    # (10 us) after K1 (ends 112), c (10 us) after K2 (ends 132). The default policy: a and b are ready at once, a
    # (inserted first) runs [112, 212]; then b (ready at 112) before c (ready at 132): b [212, 222], c [222, 232].
    def run(policy: str) -> dict[str, tuple[float, float]]:
        s = session()
        s.execute('let k1 = select where name == "sm80_gemm_fwd"')
        s.execute('let a = insert comm "a" after k1 duration 100us on 30 launch none queued with prio = 2, gap = 0')
        s.execute('let b = insert comm "b" after k1 duration 10us on 30 launch none queued with prio = 3')
        s.execute(
            'let c = insert comm "c" after (select where name == "relu_kernel") on 30 queued launch none duration 10us'
            " with prio = 1"
        )
        s.execute(policy)
        assert s.predicted_us == BASELINE_US and len(s.graph) == len(iteration()) + 3  # no launch calls
        check_threads(s.graph)
        for name in "abc":
            (node,) = s.scope[name]
            a = s.graph.nodes[node]
            assert a["name"] == name and a["queued"] and a["thread"] == "gpu:0/30"
            assert not [v for v, e in s.graph.adj[node].items() if e["kind"] in ("stream", "thread")]
        t = s.predict()
        return {
            s.graph.nodes[n]["name"]: (t.start[i], t.end[i])
            for i, n in enumerate(t.nodes)
            if s.graph.nodes[n]["name"] in "abc"
        }

    assert run("schedule earliest") == {"a": (112, 212), "b": (212, 222), "c": (222, 232)}
    # by priority (smallest first): at 212 c (1) goes before b (3)
    assert run("schedule priority prio") == {"a": (112, 212), "c": (212, 222), "b": (222, 232)}


def test_an_insert_next_to_a_queued_task_takes_its_place_in_time_and_waits() -> None:
    s = session()
    s.execute('let q = insert comm "q" after first(kernel) duration 100us on 30 launch none queued')
    s.execute('let d = insert comm "d" after q duration 5us on 30 launch none')  # chained on stream 30, waits for q
    (q,), (d,) = s.scope["q"], s.scope["d"]
    assert s.graph.edges[q, d]["kind"] == "sync" and not s.graph.nodes[d].get("queued")
    check_threads(s.graph)
    t = s.predict()
    assert t.start[t.nodes.index(d)] == 212  # K1 ends 112, q [112, 212]
    # queued before a task: that task waits for it (the final sync, which started at 412, now waits for a 500 us
    # call queued on a thread of its own after K1: [112, 612])
    s.execute('let pre = insert cpu "pre" before last(cpu) duration 500us on "cpu:9/9" queued')
    s.execute("wait pre for first(kernel)")
    (pre,) = s.scope["pre"]
    assert s.graph.has_edge(pre, next(n for n, a in s.graph.nodes(data=True) if a["name"] == "cudaDeviceSynchronize"))
    assert s.predicted_us == 615
    check_threads(s.graph)
    with pytest.raises(ScriptError, match="cannot set 'queued'"):
        s.execute("set q.queued = false")
    with pytest.raises(ScriptError, match="two 'queued' clauses"):
        s.execute('insert comm "x" after q duration 1us queued queued')
    with pytest.raises(ScriptError, match=r"or none: no launch call\); got -1"):
        s.execute('insert comm "x" after q duration 1us on 31 launch -1')


def test_insert_refuses_a_cycle_and_leaves_the_graph_as_it_was() -> None:
    s = session()
    before = sorted(s.graph.edges)
    with pytest.raises(ScriptError, match="would close a dependency cycle") as exc:
        # placed by time after the final sync, but the relu kernel (which the sync waits for) must wait for it
        s.execute('insert cpu "x" before (select kernel where name ~ "relu") duration 1us')
    assert str(exc.value).startswith("<repl>:1:1: ")
    assert sorted(s.graph.edges) == before


def test_remove_refuses_to_orphan_a_kernel() -> None:
    s = session()
    with pytest.raises(ScriptError, match="without its launch") as exc:
        s.execute('remove launches(select gpu where name ~ "relu")')
    assert "<repl>:1:1:" in str(exc.value)


def test_schedule_policies_order_tasks_that_share_a_thread_without_an_order_edge() -> None:
    g = nx.DiGraph()
    g.graph["measured_us"] = 0.0
    launch = add_task(g, "launch", "cpu", CPU, 10, start=0.0)
    small = add_task(g, "small", "gpu", S7, 5, start=20.0, bytes=1)
    big = add_task(g, "big", "gpu", S7, 50, start=10.0, bytes=9)
    add_dependency(g, launch, small, "launch")
    add_dependency(g, launch, big, "launch")

    def order(script: str) -> list[str]:
        s = Session(g)
        s.execute(script)
        tl = s.predict()
        return [
            tl.attrs(i)["name"]
            for i in sorted(range(len(tl.nodes)), key=lambda i: tl.start[i])
            if tl.attrs(i)["kind"] == "gpu"
        ]

    assert order("schedule priority -bytes") == ["big", "small"]
    assert order("schedule priority bytes") == ["small", "big"]
    assert order("schedule priority duration") == ["small", "big"]
    assert order("schedule earliest") in (["small", "big"], ["big", "small"])


def test_loop_by_group_runs_once_per_group() -> None:
    s = session()
    effects = s.execute("for part in select gpu by layer {\n  scale part by 0.5\n}")
    assert [(e.kind, e.tasks, e.runs) for e in effects] == [("scale", 5, 3)]
    assert s.predicted_us == 215.0
    assert "part" not in s.scope


def test_include_params_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "half.whatif").write_text("param factor = 0.5\nscale gpu by factor\n")
    main = tmp_path / "main.whatif"
    main.write_text(
        '"""Half the GPU time."""\ninclude "half.whatif"\nassert predicted < baseline, "should be faster"\n'
    )
    result = run_whatif(iteration(), [str(main)])
    assert result.predicted_us == 215.0 and result.speedup == pytest.approx(415 / 215)
    with pytest.raises(
        CheckFailed,
        match=(
            r"main.whatif:3: assertion failed: predicted < baseline: predicted is 415, baseline is 415 \(should be"
            r" faster\)"
        ),
    ):
        run_whatif(iteration(), [str(main)], params={"factor": "1"})  # as -p factor=1 gives it
    with pytest.raises(
        ScriptError,
        match=(
            r"unknown parameter factr .params.: the scripts declare factor \(each also as SCRIPT\.NAME\); did you mean"
            r" 'factor'.$"
        ),
    ):
        run_whatif(iteration(), [str(main)], params={"factr": 1})


def test_input_graph_is_never_modified() -> None:
    g = iteration()
    before = {n: dict(a) for n, a in g.nodes(data=True)}
    edges = sorted(g.edges)
    result = run_whatif(g, [], params=None)
    s = Session(result.graph, copy=False)  # go on editing the run's own graph: a copy of the input
    s.execute(
        'remove (select gpu where name ~ "relu") with launches\nscale gpu by 0.1\ninsert gpu "k" after first(gpu)'
        " duration 1us"
    )
    assert {n: dict(a) for n, a in g.nodes(data=True)} == before and sorted(g.edges) == edges


def test_empty_selection_is_a_warning_with_the_statement() -> None:
    s = session()
    s.execute('scale (select gpu where name ~ "no_such_kernel") by 2\nlet e = (select comm) - gpu\nremove e')
    assert s.warnings == [
        '<repl>:1: `(select gpu where name ~ "no_such_kernel")` matches no task',
        "<repl>:3: `e` holds no task: remove does nothing",
    ]


@pytest.mark.parametrize(
    ("script", "message", "where"),
    [
        ("scale gpu by -1", "a scale factor must be a finite number >= 0; got -1", "<repl>:1:14:"),
        (
            "scale gpu by bytes / 1MB",
            "a scale factor must be a finite number >= 0; got none for task gpu 'sm80_gemm_fwd'",
            "<repl>:1:14:",
        ),
        ("scale 3 by 2", "scale needs a selection of tasks, not a number", "<repl>:1:7:"),
        ('insert gpu "k" after gpu duration 1us', "insert after needs one task, the selection holds 5", "<repl>:1:22:"),
        ('insert gpu "k" after first(gpu) duration "x"', "a duration is a number of microseconds >= 0", "<repl>:1:42:"),
        (
            "print sum(gpu)",
            "sum() takes a list of numbers; for a selection's durations write sum(SEL.duration)",
            "<repl>:1:7:",
        ),
        ("print 1 / 0", "division by zero", "<repl>:1:7:"),
        ('print "a" < 1', "cannot compare a string and a number with '<'", "<repl>:1:7:"),
        ("print gpu + 1", "cannot add a selection and a number", "<repl>:1:7:"),
        ("print [1][3]", "index 3 is out of range: the list holds 1 items", "<repl>:1:7:"),
        ('print select where name ~ "("', "bad regular expression '('", "<repl>:1:27:"),
        ("set (select gpu).duration = -5", "duration must be a number of microseconds >= 0", "<repl>:1:29:"),
        ("for x in 3 { print x }", "a loop runs over a selection or a list, not a number", "<repl>:1:10:"),
        ("print first(gpu, 1.5)", "first(): a count must be a whole number >= 0", "<repl>:1:7:"),
    ],
)
def test_runtime_errors_name_the_statement(script: str, message: str, where: str) -> None:
    s = session()
    with pytest.raises(ScriptError) as exc:
        s.execute(script)
    text = str(exc.value)
    assert text.startswith(where) and message in text, text
    assert "^" in text.splitlines()[2]


def test_assert_on_an_empty_selection_fails() -> None:
    s = session()
    s.execute("assert select comm")
    with pytest.raises(CheckFailed, match='assertion failed: select where name == "nope"'):
        s.execute('assert select where name == "nope"')


def test_each_input_warns_for_its_own_empty_selection() -> None:
    s = session()
    s.execute('let a = select where name == "zz"')
    s.execute('let b = select where name == "yy"')
    assert s.warnings == [
        '<repl>:1: `select where name == "zz"` matches no task',
        '<repl>:1: `select where name == "yy"` matches no task',
    ]


def test_gpu_task_before_a_kernel_without_launch_gets_its_launch_before_the_next_launch() -> None:
    g = iteration()
    relu = next(n for n, a in g.nodes(data=True) if a["name"] == "relu_kernel")
    g.remove_edge(next(u for u in g.predecessors(relu) if g.edges[u, relu]["kind"] == "launch"), relu)
    s = Session(g)
    s.execute('insert gpu "k" before (select where name == "relu_kernel") duration 1us')
    launch = next(n for n, a in s.graph.nodes(data=True) if a["name"] == "cudaLaunchKernel" and a["start"] == 112.0)
    # the relu kernel has no launch: the new call goes just before the next kernel's launch (L3, the backward gemm's)
    succ = [v for v in s.graph.successors(launch) if s.graph.edges[launch, v]["kind"] == "thread"]
    assert [s.graph.nodes[v]["start"] for v in succ] == [20.0]
    check_threads(s.graph)


def test_wait_adds_cross_stream_dependencies() -> None:
    s = session()
    effects = s.execute("""
insert comm "early" after first(select where name == "sm80_gemm_fwd") duration 50us on 20
wait (select where name == "relu_kernel") for select where name == "early"
""")
    # early waits for the forward gemm: [112, 162]; its launch call (10 us, the median) goes after L1 and delays
    # the later calls by 10 us. relu now waits for it: [162, 182], the backward gemm [182, 382], the all-reduce
    # after it on stream 20 [382, 432], adam [432, 462], the sync [462, 465].
    assert s.predicted_us == 465.0
    assert [(e.kind, e.added) for e in effects] == [("insert", 2), ("wait", 1)]
    assert effects[1].describe() == "added 1 wait"
    again = s.execute('wait (select where name == "relu_kernel") for select where name == "early"')
    assert again[0].added == 0  # already waiting: nothing new
    check_threads(s.graph)


def test_wait_refuses_a_cycle_and_leaves_the_graph_as_it_was() -> None:
    s = session()
    before = sorted(s.graph.edges)
    with pytest.raises(
        ScriptError,
        match=r"^<repl>:1:1: that wait would close a dependency cycle: gpu 'relu_kernel' on gpu:0/7 at ts 112\.0 us",
    ):
        # the all-reduce follows the backward gemm, which follows relu on stream 7
        s.execute('wait (select where name == "relu_kernel") for select comm')
    assert sorted(s.graph.edges) == before
    with pytest.raises(ScriptError, match="cannot wait for itself"):
        s.execute("wait (select comm) for select comm")
    with pytest.raises(ScriptError, match=r"^<repl>:1:6: wait needs a selection of tasks, not a number"):
        s.execute("wait 3 for select comm")


def test_if_else_runs_one_branch() -> None:
    s = session()
    s.execute("""
param ranks = 1
if ranks > 1 {
    scale gpu by 0.5
} else {
    scale (select where name == "relu_kernel") by 0
}
if select where name == "nothing" { scale gpu by 0 }
""")
    assert s.predicted_us == 395.0  # only relu went (20 us off the stream); the empty selection is false
    t = session(params={"ranks": 8})
    t.execute("param ranks = 1\nif ranks > 1 { scale kernel by 0.5 }")
    # K1 50 [12,62], relu 10 [62,72], K3 100 [72,172], allreduce [172,222], adam 15 [222,237], sync [237,240]
    assert t.predicted_us == 240.0


def test_every_whatif_example_in_the_docs_checks() -> None:
    import re

    docs = Path(__file__).resolve().parent.parent / "docs"
    blocks = [
        (md.name, b)
        for md in sorted(docs.glob("*.md"))
        for b in re.findall(r"```whatif\n(.*?)```", md.read_text(), re.S)
    ]
    assert len(blocks) >= 17
    for name, block in blocks:
        Session(iteration()).check(parse_script(block, name), True)


def test_a_string_param_takes_unquoted_text() -> None:
    s = session(params={"link": "eth-10g", "n": "2 * 3", "quoted": '"a" + "b"'})
    s.execute('param link = "nvlink4"\nparam n = 1\nparam quoted = "x"\nprint link, n, quoted')
    assert s.printed == ["eth-10g 6 ab"]


def test_runs_and_input_bytes() -> None:
    s = session()
    s.execute(
        "let r = runs(select gpu where stream == 7)\nprint count(r), count(r[0]), r[0].name, count(runs(select gpu"
        ' where name ~ "gemm"))'
    )
    # stream 7 runs fwd gemm -> relu -> bwd gemm -> adam back to back: one run; the two gemms are not neighbours
    assert s.printed[0] == "1 4 ['sm80_gemm_fwd', 'relu_kernel', 'sm80_gemm_bwd', 'multi_tensor_apply_adam'] 2"
    s.graph.nodes[next(n for n, a in s.graph.nodes(data=True) if a["name"] == "relu_kernel")]["shapes"] = [
        [64, 1024],
        [],
    ]
    s.execute(
        'print input_bytes(select where name == "relu_kernel"), input_bytes(select gpu, element_bytes = 2),'
        " input_bytes(select comm)"
    )
    assert s.printed[1] == "262144 131072 none"


def repeated_calls(*calls: tuple[str, ...]) -> nx.DiGraph:
    """One CPU thread of op calls in order, each call a run of tasks sharing a ``top_op_id`` (one per name given)."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0)
    t = 0.0
    for call_id, call in enumerate(calls):
        for name in call:
            add_task(g, name, "cpu", CPU, 1.0, start=t, top_op_id=call_id)
            t += 1
    return g


@pytest.mark.parametrize(
    ("calls", "blocks"),
    [
        # emb, then A B C four times, the head: four blocks
        ("eABCABCABCABCh", ["ABC"] * 4),
        # the run starts one call early (the embedding ends as a block does) and ends one late (the final norm begins
        # as a block does): whole blocks centred in it
        ("CABCABCABCA", ["ABC"] * 3),
        # ABABABAB: four blocks of AB, not two of ABAB (the shorter block covering as much)
        ("ABABABAB", ["AB"] * 4),
        # the run that covers the most calls wins: BCD twice (6 calls) over A four times (4)
        ("AAAABCDBCD", ["BCD"] * 2),
        # the block wherever it occurs, what lies between two occurrences with the one before (a downsampling block
        # between a ResNet's stages): from the first occurrence to the end of the last
        ("sABCABCABCXYZABCABCh", ["ABC", "ABC", "ABCXYZ", "ABC", "ABC"]),
        ("sABCXABCABCh", ["ABCX", "ABC", "ABC"]),
        # nothing repeats back to back
        ("ABCDABC", []),
        ("", []),
    ],
)
def test_repeats_finds_the_longest_run_of_repeated_op_calls(calls: str, blocks: list[str]) -> None:
    g = repeated_calls(*[(c,) for c in calls])
    s = Session(g)
    s.execute("let found = repeats(select cpu)")
    found = s.scope["found"]
    assert ["".join(g.nodes[n]["name"] for n in sorted(b, key=lambda n: g.nodes[n]["start"])) for b in found] == blocks


def test_repeats_reaches_out_to_every_back_to_back_repeat() -> None:
    # a ResNet-18's shape: a stem, a first stage of two blocks AB AB, then stages of a downsampling block CD and a
    # block AB, and a head. The groups CDAB repeat more than the blocks do and are taken for the blocks; the stretch
    # still reaches back to the first stage, whose blocks repeat too, and leaves the stem and the head out.
    calls = "sABABCDABCDABCDABh"
    g = repeated_calls(*[(c,) for c in calls])
    s = Session(g)
    s.execute("let found = repeats(select cpu)")
    covered = "".join(
        g.nodes[n]["name"] for n in sorted((n for b in s.scope["found"] for n in b), key=lambda n: g.nodes[n]["start"])
    )
    assert covered.startswith("ABABCD") and covered in calls[1:-1] and len(covered) >= len(calls) - 3


def test_repeats_knows_a_call_by_all_its_tasks() -> None:
    # calls of two tasks: (x, y) (x, y) repeat; (x, z) differs from (x, y) though its first task is the same
    g = repeated_calls(("x", "y"), ("x", "y"), ("x", "z"))
    s = Session(g)
    s.execute("print count(repeats(select cpu)), count(repeats(select cpu)[0])")
    assert s.printed == ["2 2"]
    with pytest.raises(ScriptError, match=r"repeats\(\) takes a selection"):
        s.execute("let r = repeats(3)")


def test_repeats_knows_a_call_by_its_outermost_op() -> None:
    # a GPU trace's blocks: the same ops, other kernels where the shapes differ (a wider stage picks another kernel)
    g = repeated_calls(("conv_k1",), ("relu_k",), ("conv_k2",), ("relu_k",), ("conv_k3",), ("relu_k",))
    for _, a in g.nodes(data=True):
        a["top_op"] = "aten::conv2d" if a["name"].startswith("conv") else "aten::relu"
    s = Session(g)
    s.execute("print count(repeats(select cpu))")
    assert s.printed == ["3"]


def test_an_inserted_task_may_take_its_name_from_an_expression() -> None:
    s = session()
    s.execute(
        'let k = select where name == "relu_kernel"\ninsert gpu (k.name[0] + "_again") after k duration k.duration[0]'
    )
    assert names(s, 'select where name ~ "again"') == ["relu_kernel_again"]
    with pytest.raises(ScriptError, match=r"a task's name is a non-empty string; got 3"):
        s.execute("insert gpu 3 after first(kernel) duration 1us")


def test_scale_samples_states_the_samples_a_step_processes(tmp_path: Path) -> None:
    # `samples` is 1 until a script scales it; the factors of several scripts multiply; the step's time is untouched
    twice = tmp_path / "twice.whatif"
    twice.write_text("scale gpu by 2\nscale samples by 2\nassert samples == 2\n")
    three = tmp_path / "three.whatif"
    three.write_text("print samples\nscale samples by 3\n")
    result = run_whatif(iteration(), [twice, three])
    assert result.printed == ["2"] and result.samples == 6
    assert result.throughput == pytest.approx(6 * result.speedup) and result.throughput > 1 > result.speedup
    assert [e.describe() for e in result.effects if e.kind == "samples"] == [
        "samples per step x2",
        "samples per step x3",
    ]
    untouched = run_whatif(iteration(), [])
    assert (
        untouched.samples == 1 and untouched.throughput == untouched.speedup == 1
    )  # no change of samples: throughput is the speedup


@pytest.mark.parametrize(
    "script, message",
    [
        ("scale samples by 0", "samples scale by a finite number > 0"),
        ("scale samples by -2", "samples scale by a finite number > 0"),
        ('scale samples by "2"', "samples scale by a finite number > 0"),
        ("let samples = 2", "let 'samples': samples is a built-in name"),
        ("scale samples by duration", "'duration' is a task attribute"),  # one number for the step, not one per task
    ],
)
def test_scale_samples_takes_one_positive_number(script: str, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        session().execute(script)


def test_require_says_the_script_does_not_apply(tmp_path: Path) -> None:
    script = tmp_path / "needs_comm.whatif"
    script.write_text(
        'scale comm by 0.5\nrequire select memcpy, "the step copies nothing: nothing to overlap"\nscale gpu by 2\n'
    )
    with pytest.raises(NotApplicable) as err:
        run_whatif(iteration(), [script])
    assert (
        str(err.value) == "needs_comm does not apply to this trace: the step copies nothing: nothing to overlap "
        f"({script}:2: select memcpy)"
    )
    assert (err.value.script, err.value.reason, err.value.exit_code) == (
        "needs_comm",
        "the step copies nothing: nothing to overlap",
        3,
    )
    assert isinstance(err.value, CheckFailed)  # what catches a failed assert catches it too
    with pytest.raises(
        NotApplicable, match=r"^the input does not apply to this trace: count\(memcpy\) > 0 does not hold \(<repl>:1: "
    ):
        session().execute("require count(memcpy) > 0")
    s = session()
    s.execute('require count(comm) > 0, "needs an all-reduce"')  # holds: nothing happens
    assert s.predicted_us == BASELINE_US


def test_on_a_stream_number_next_to_a_cpu_call_takes_the_one_device_of_the_graph_as_it_is_now() -> None:
    from daydream.graph import add_task

    s = Session(iteration())
    insert = 'insert gpu "{}" after (select where name == "cudaDeviceSynchronize") duration 1us on 9'
    s.execute(insert.format("a"))
    assert {a["thread"] for a in s.graph.nodes.values() if a["name"] == "a"} == {"gpu:0/9"}
    add_task(s.graph, "other", "gpu", "gpu:1/7", 5.0, start=0.0)  # a second device
    with pytest.raises(ScriptError, match="'on STREAM' needs the device"):
        s.execute(insert.format("b"))
    s.execute('remove (select where name == "other")')  # one device again
    s.execute(insert.format("c"))
    assert {a["thread"] for a in s.graph.nodes.values() if a["name"] == "c"} == {"gpu:0/9"}
