"""Names as people read them (daydream.names): demangled, without signature, shortened in the middle."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from daydream.names import demangled, kernel_label, kernel_short, middle

# A Composable Kernel convolution of the MI300X ResNet-18 trace (TraceLens), whole as the profiler wrote it; GNU's
# c++filt returns it unchanged
CK_PREFIX = "_ZN2ck16tensor_operation6device12_GLOBAL__N_1"


def test_aten_kernels_in_an_anonymous_namespace_keep_their_name() -> None:
    name = (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*)"
    )
    assert kernel_label(name) == "at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    assert (
        kernel_label("void f<T>(float*, int)") == "f<T>"
        and kernel_label("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn"
    )


def test_names_that_are_not_mangled_or_do_not_demangle_stay() -> None:
    assert demangled("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"
    truncated = "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22Implicit"
    assert demangled(truncated) == truncated  # a profiler cut it: shown shortened, not guessed at


def test_mangled_kernels_of_a_real_trace_read_as_source(shared_traces: Path) -> None:
    pytest.importorskip("cpp_demangle", reason="cpp-demangle has no wheel for this platform")
    path = shared_traces / "tracelens/mi300_train_resnet18.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    mangled = sorted({e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith(CK_PREFIX)})
    assert len(mangled) == 2 and all(len(n) > 1500 for n in mangled)
    labels = [kernel_label(n) for n in mangled]
    assert labels[0].startswith("ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_")
    assert all("(anonymous namespace)::kernel_grouped_conv_fwd" in label and "<" in label for label in labels)
    # shortened for a table: the kernel's qualified name whole, its template arguments in their middle
    short = kernel_short(mangled[0], 120)
    assert (
        len(short) == 120
        and short.startswith(labels[0].split("<")[0] + "<ck::Gridwise")
        and short.endswith(labels[0][-10:])
    )
    assert middle(labels[0], 60) == kernel_short(mangled[0], 60)  # no room for the qualified name: the label's middle


def test_tracks_are_named_as_a_reader_names_them() -> None:
    from daydream.names import track_label

    assert track_label("cpu:2910249/2919752", "backward") == "CPU thread 2919752 (backward)"
    assert track_label("cpu:2910249/-549452224") == "CPU thread -549452224"
    assert track_label("gpu:0/7", "gemm") == "GPU 0 stream 7 (gemm)"
    assert track_label("cpu:1/DataLoader workers") == "CPU DataLoader workers"
    assert track_label("inserted") == "inserted"


def test_the_timeline_figure_names_its_tracks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's timeline rows say which thread or stream and what it mostly does (the issue: raw track names
    such as cpu:2910249/-549452224 and gpu:0/7)."""
    import matplotlib.axes
    from whatif_graph import iteration

    from daydream.api.replay import replay_graph
    from daydream.presentation import plots

    labels: list[str] = []
    original = matplotlib.axes.Axes.set_yticks

    def spy(self: matplotlib.axes.Axes, ticks: object, labels_: object = None, **kw: object) -> object:
        labels.extend(labels_ or [])
        return original(self, ticks, labels_, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "set_yticks", spy)
    plots.timeline_figure(replay_graph(iteration()).timeline, "baseline", str(tmp_path), "t")
    assert "GPU 0 stream 7 (gemm)" in labels and "GPU 0 stream 20 (comm)" in labels, labels
    assert any(label.startswith("CPU thread ") for label in labels), labels
