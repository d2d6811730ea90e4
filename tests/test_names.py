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
    name = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*)"
    assert kernel_label(name) == "at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    assert kernel_label("void f<T>(float*, int)") == "f<T>" and kernel_label("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn"


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
    assert len(short) == 120 and short.startswith(labels[0].split("<")[0] + "<ck::Gridwise") and short.endswith(labels[0][-10:])
    assert middle(labels[0], 60) == kernel_short(mangled[0], 60)  # no room for the qualified name: the label's middle
