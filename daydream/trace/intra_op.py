"""Which CPU ops PyTorch runs across its intra-op threads (``torch.set_num_threads``): the one table of that rule.

The graph builder reads it to split a CPU op's time into the part that ran on one thread and the part that ran
across the threads (a task's ``parallel_us``); the ``threads`` transform re-times the latter for another thread count.

- **Matrix products, convolutions and recurrent layers** (``aten::mm``, ``addmm``, ``bmm``, ``mkldnn_convolution``,
  ``mkldnn_rnn_layer``...): the BLAS or oneDNN library threads every call; the op's own time is the library's.
- **Element-wise ops and reductions** (TensorIterator kernels: ``add_``, ``sqrt``, ``clamp_min``,
``threshold_backward``,
  ``sum``, ``copy_``...): ``at::parallel_for`` splits the elements across threads only when there are more than
  ``at::internal::GRAIN_SIZE`` (32768) of them, else the calling thread runs them all. The count is the largest input's
  (the output of an element-wise op is the broadcast of its inputs).
- **Random numbers** (``bernoulli_``, which dropout calls, ``uniform_``, ``normal_``): the default CPU generator fills
  a tensor on the calling thread, to keep its sequence (measured on a 2-core AMD EPYC host, nn.TransformerEncoderLayer
  recorded by torch.profiler alone: dropout's ``bernoulli_`` 0.92x its 2-thread time on one thread, ``all`` 1.74x;
  PyTorch threads ``bernoulli_`` with MKL on Intel CPUs only, which a trace does not say: counted single-threaded).
- Everything else runs on the calling thread: views and metadata (``t``, ``view``, ``empty``), composite ops whose own
  time is dispatch (``linear``, ``matmul``: their work is in the ops they call, counted there), autograd bookkeeping.

Only an op's own time (minus the ops it calls) counts, so a composite op is never counted twice. Measured on a
2-core host (validation/traces: threads1 against base), ops this rule calls parallel ran 1.6-1.9x slower on one
thread, the others within 10% of their 2-thread time; an LSTM language model recorded with torch.profiler alone
(a program the rule was not written on), its oneDNN LSTM layers 1.83x (forward) and 1.87x (backward).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

# at::internal::GRAIN_SIZE: TensorIterator kernels with this many elements or fewer run on the calling thread.
GRAIN_SIZE = 32768

_LIBRARY_THREADED = frozenset(
    {
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "addbmm",
        "mv",
        "addmv",
        "dot",
        "vdot",
        "_mkldnn_matmul",
        "mkldnn_convolution",
        "_mkldnn_convolution",
        "mkldnn_linear",
        "_slow_conv2d_forward",
        "_slow_conv2d_backward",
        "convolution_backward",
        "_convolution_backward",
        "mkldnn_convolution_backward",
        "slow_conv3d_forward",
        "slow_conv_transpose2d",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "_weight_int8pack_mm",
        "_int_mm",
        # oneDNN's recurrent layers (nn.LSTM / nn.GRU on the CPU): one op per layer and direction, its GEMMs inside
        "mkldnn_rnn_layer",
        "mkldnn_rnn_layer_backward",
        "mkldnn_rnn",
    }
)

# TensorIterator (and a few parallel_for) kernels: element-wise, reductions, copies, fills, norms, softmax.
_ELEMENT_WISE = frozenset(
    {
        "add",
        "add_",
        "sub",
        "sub_",
        "rsub",
        "mul",
        "mul_",
        "div",
        "div_",
        "neg",
        "neg_",
        "abs",
        "abs_",
        "sqrt",
        "sqrt_",
        "rsqrt",
        "rsqrt_",
        "exp",
        "exp_",
        "log",
        "log_",
        "pow",
        "pow_",
        "reciprocal",
        "reciprocal_",
        "sign",
        "clamp",
        "clamp_",
        "clamp_min",
        "clamp_min_",
        "clamp_max",
        "clamp_max_",
        "maximum",
        "minimum",
        "lerp",
        "lerp_",
        "addcdiv",
        "addcdiv_",
        "addcmul",
        "addcmul_",
        "where",
        "masked_fill",
        "masked_fill_",
        "threshold",
        "threshold_",
        "threshold_backward",
        "relu",
        "relu_",
        "gelu",
        "gelu_backward",
        "silu",
        "silu_",
        "silu_backward",
        "sigmoid",
        "sigmoid_",
        "sigmoid_backward",
        "tanh",
        "tanh_",
        "tanh_backward",
        "hardtanh",
        "hardtanh_backward",
        "leaky_relu",
        "leaky_relu_backward",
        "elu",
        "elu_backward",
        "softplus",
        "copy_",
        "fill_",
        "zero_",
        "native_dropout",
        "native_dropout_backward",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_not",
        "bitwise_and",
        "isnan",
        "all",
        "any",
        "sum",
        "mean",
        "prod",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "var_mean",
        "cumsum",
        "_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "nll_loss_forward",
        "nll_loss_backward",
        "mse_loss",
        "mse_loss_backward",
        "binary_cross_entropy",
        "binary_cross_entropy_backward",
        "index_select",
        "gather",
        "scatter_add_",
        "index_add_",
        "embedding_dense_backward",
        "_embedding_bag",
        "_embedding_bag_backward",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool2d_backward",
        "upsample_nearest2d",
        "upsample_bilinear2d",
    }
)


def numel(dims: Any) -> int:
    """Elements of one input given its dims ([] for a scalar: 1); 0 for what is not a tensor's dims."""
    if not isinstance(dims, (list, tuple)):
        return 0
    n = 1
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            return 0  # a nested list (a TensorList) or a non-dimension: not one tensor
        n *= d
    return n


@lru_cache(maxsize=4096)
def threading_kind(name: str) -> str | None:
    """``library`` (always threaded), ``elementwise`` (threaded above the grain size) or None (one thread)."""
    base = name.removeprefix("aten::")
    if base == name:
        return None  # not an ATen op: a Python range, an autograd node, a custom op
    if base in _LIBRARY_THREADED:
        return "library"
    if base in _ELEMENT_WISE:
        return "elementwise"
    return None


def runs_across_threads(name: str, shapes: Any) -> bool:
    """Whether an op's own time ran across PyTorch's intra-op threads (the module's rule), from its name and its
    inputs' dims as the trace records them (``Input Dims``; None where recorded without shapes)."""
    kind = threading_kind(name)
    if kind == "library":
        return True
    if kind != "elementwise" or not isinstance(shapes, (list, tuple)):
        return False
    return max((numel(s) for s in shapes), default=0) > GRAIN_SIZE
