"""What an op costs from its shapes: floating-point operations and bytes moved to and from device memory.

``op_cost(op, shapes)`` prices an aten op from the Kineto "Input Dims" of its call (a list with one entry per
argument: a tensor's dims, ``[]`` for a scalar or a non-tensor argument, a list of dims for a tensor list as the
execution trace records it). An op it cannot price, or shapes that do not fit the op's signature, give ``None``:
the caller decides what to do with an unknown cost, nothing is guessed.

Conventions (the roofline model of Lin et al. [P1], see ``perf-models-lin.md``):

- bytes are the ideal traffic: every input tensor read once, every output written once (no cache reuse inside
  a GEMM's tiles, no re-reads), in the op's dtype; index tensors are int64;
- a multiply-add is 2 FLOPs; FLOPs per element of the transcendental element-wise ops are those of the
  authors' code (gelu 175, tanh 180, softmax 174, sigmoid 4; backward gelu 255, tanh 260); for the others the
  count of arithmetic operations in the formula;
- a reduction's output write is neglected (at most its input, usually a small fraction; which dims are
  reduced is not in the shapes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from daydream.trace.sizes import INDEX_BYTES, dtype_bytes


@dataclass(frozen=True)
class Cost:
    """Work of one op: ``flops`` floating-point operations and ``bytes`` of device-memory traffic."""

    flops: float
    bytes: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.bytes + other.bytes)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes if self.bytes else math.inf


def gemm_cost(m: int, n: int, k: int, dtype: str = "fp32", batch: int = 1) -> Cost:
    """``batch`` products of an (m x k) by a (k x n) matrix: 2*m*n*k FLOPs each; A, B read and C written once."""
    size = dtype_bytes(dtype)
    return Cost(2.0 * batch * m * n * k, float(batch * (m * k + k * n + m * n) * size))


def elementwise_cost(
    numel: int, dtype: str = "fp32", flops_per_element: float = 1.0, reads: int = 1, writes: int = 1
) -> Cost:
    """An element-wise kernel over ``numel`` elements reading ``reads`` and writing ``writes`` tensors of that size."""
    return Cost(float(flops_per_element) * numel, float((reads + writes) * numel * dtype_bytes(dtype)))


# FLOPs per output element. [code]: the values of the authors' code (owensgroup/ml_perf_model); the rest count
# the arithmetic operations of the formula. Keys are op names without the ``aten::`` prefix and trailing ``_``.
FLOPS_PER_ELEMENT: dict[str, float] = {
    "gelu": 175.0,
    "gelu_backward": 255.0,  # [code]
    "tanh": 180.0,
    "tanh_backward": 260.0,  # [code]
    "sigmoid": 4.0,  # [code]
    "sigmoid_backward": 3.0,  # g * y * (1 - y)
    "silu": 5.0,  # x * sigmoid(x)
    "silu_backward": 8.0,  # g * s * (1 + x * (1 - s)) with s = sigmoid(x)
    "softmax": 174.0,
    "log_softmax": 174.0,  # [code] (softmax; log-softmax has the same exp/sum/normalize passes)
    "softmax_backward_data": 4.0,  # y * (g - sum(g * y)): mul + add for the dot, sub, mul
    "log_softmax_backward_data": 4.0,  # g - exp(y) * sum(g)
    "binary_cross_entropy": 7.0,  # [code] (BCE)
    "relu": 1.0,
    "threshold": 1.0,
    "threshold_backward": 1.0,
    "clamp": 2.0,
    "clamp_min": 1.0,
    "clamp_max": 1.0,
    "hardtanh": 2.0,
    "leaky_relu": 2.0,
    "add": 1.0,
    "sub": 1.0,
    "rsub": 1.0,
    "mul": 1.0,
    "div": 1.0,
    "neg": 1.0,
    "abs": 1.0,
    "maximum": 1.0,
    "minimum": 1.0,
    "where": 1.0,
    "reciprocal": 1.0,
    "sqrt": 1.0,
    "rsqrt": 1.0,
    "exp": 1.0,
    "log": 1.0,
    "pow": 1.0,
    "sign": 1.0,
    "eq": 1.0,
    "ne": 1.0,
    "lt": 1.0,
    "le": 1.0,
    "gt": 1.0,
    "ge": 1.0,
    "addcmul": 3.0,
    "addcdiv": 3.0,
    "lerp": 3.0,  # x + w * a * b, x + w * a / b, x + w * (y - x)
    "dropout": 2.0,
    "native_dropout": 2.0,
    "native_dropout_backward": 2.0,  # compare with the mask, scale
    "fill": 0.0,
    "zero": 0.0,
    "copy": 0.0,
    "clone": 0.0,
    "contiguous": 0.0,
    "to": 0.0,
    "_to_copy": 0.0,
}

# Element-wise ops by the number of leading tensor arguments they read; the output has the broadcast shape of
# the tensors read (a scalar argument, dims [], is not read from memory).
_UNARY = frozenset(
    {
        "relu",
        "gelu",
        "sigmoid",
        "tanh",
        "silu",
        "neg",
        "abs",
        "sqrt",
        "rsqrt",
        "exp",
        "log",
        "reciprocal",
        "sign",
        "threshold",
        "clamp",
        "clamp_min",
        "clamp_max",
        "hardtanh",
        "leaky_relu",
        "dropout",
        "native_dropout",
        "clone",
        "contiguous",
        "to",
        "_to_copy",
    }
)
_BINARY = frozenset(
    {
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "maximum",
        "minimum",
        "pow",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "threshold_backward",
        "gelu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "silu_backward",
        "native_dropout_backward",
    }
)
_TERNARY = frozenset({"addcmul", "addcdiv", "lerp", "where"})
_FILL = frozenset({"fill", "zero"})
_REDUCTIONS = frozenset(
    {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var", "std"}
)
_SOFTMAX = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax"})
_SOFTMAX_BACKWARD = frozenset({"_softmax_backward_data", "_log_softmax_backward_data"})
_CONV = frozenset(
    {"convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d", "miopen_convolution"}
)

Shapes = Sequence[Any]


def _dims(x: Any) -> tuple[int, ...] | None:
    """A tensor's dims, or None when ``x`` is not a list of ints (a scalar ``[]`` gives ``()``)."""
    if not isinstance(x, (list, tuple)):
        return None
    if all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in x):
        return tuple(x)
    return None


def _tensor_list(x: Any) -> list[tuple[int, ...]] | None:
    """The dims of each tensor of a tensor-list argument (``[[a, b], [c]]``), or None."""
    if not isinstance(x, (list, tuple)) or not x or not all(isinstance(e, (list, tuple)) for e in x):
        return None
    out = [_dims(e) for e in x]
    return None if any(d is None for d in out) else out  # type: ignore[misc]


def _numel(dims: Sequence[int]) -> int:
    return math.prod(dims)


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(1, rank + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(reversed(out))


def _base_name(op: str) -> str:
    """``aten::add_`` -> ``add`` (in-place and out-of-place ops cost the same); ``_softmax`` keeps its leading
    underscore; another namespace (``fbgemm::x``) is kept whole, so it never collides with an aten op."""
    name = op.strip().rsplit(": ", 1)[-1]  # "autograd::engine::evaluate_function: MmBackward0" -> "MmBackward0"
    if name.startswith("aten::"):
        name = name[len("aten::") :]
    elif "::" in name:
        return name
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def op_cost(op: str, shapes: Shapes | None, dtype: str = "fp32", out_shapes: Shapes | None = None) -> Cost | None:
    """FLOPs and bytes of ``op`` called with arguments of these dims; None when it cannot be priced.

    ``out_shapes`` (the output dims, from an execution trace) is used where the inputs do not determine the
    output: a forward convolution. Without it a convolution is assumed to keep its input's spatial size
    (stride 1, "same" padding), since Kineto records no values for stride and padding.
    """
    if not shapes or not isinstance(shapes, (list, tuple)):
        return None
    name = _base_name(op)
    for pricer in (
        _gemm_op,
        _backward_gemm_op,
        _conv_op,
        _norm_op,
        _embedding_op,
        _softmax_op,
        _reduction_op,
        _elementwise_op,
    ):
        try:
            cost = pricer(name, list(shapes), dtype, out_shapes)
        except (ValueError, IndexError, TypeError):
            return None  # shapes that do not fit the op's signature
        if cost is not None:
            return cost if cost.bytes > 0 or cost.flops > 0 else None
    return None


def _mat(x: Any, rank: int) -> tuple[int, ...]:
    d = _dims(x)
    if d is None or len(d) != rank:
        raise ValueError("not a matrix")
    return d


def _matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of torch.matmul(a, b) with its broadcasting rules."""
    if not a or not b:
        raise ValueError("matmul of a scalar")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError("inner dims differ")
    batch_dims = _broadcast([a2[:-2], b2[:-2]])
    if batch_dims is None:
        raise ValueError("batch dims do not broadcast")
    return _numel(batch_dims), a2[-2], b2[-1], a2[-1]


def _gemm_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    size = dtype_bytes(dtype)
    if name == "mm":
        (m, k), (k2, n) = _mat(s[0], 2), _mat(s[1], 2)
        if k != k2:
            raise ValueError("inner dims differ")
        return gemm_cost(m, n, k, dtype)
    if name in ("mv", "addmv"):
        off = 1 if name == "addmv" else 0
        (m, k), (k2,) = _mat(s[off], 2), _mat(s[off + 1], 1)
        if k != k2:
            raise ValueError("inner dims differ")
        return gemm_cost(m, 1, k, dtype) + (Cost(2.0 * m, m * size) if off else Cost(0, 0))
    if name == "addmm":
        # C = beta * input + alpha * (mat1 @ mat2): the GEMM kernel reads C (the bias, already expanded into the
        # output by a separate copy kernel) and scales and adds it in its epilogue.
        (m, k), (k2, n) = _mat(s[1], 2), _mat(s[2], 2)
        if k != k2:
            raise ValueError("inner dims differ")
        return gemm_cost(m, n, k, dtype) + Cost(2.0 * m * n, float(m * n * size))
    if name == "bmm":
        (b, m, k), (b2, k2, n) = _mat(s[0], 3), _mat(s[1], 3)
        if k != k2 or b != b2:
            raise ValueError("bmm dims differ")
        return gemm_cost(m, n, k, dtype, batch=b)
    if name == "baddbmm":
        (b, m, k), (b2, k2, n) = _mat(s[1], 3), _mat(s[2], 3)
        if k != k2 or b != b2:
            raise ValueError("bmm dims differ")
        return gemm_cost(m, n, k, dtype, batch=b) + Cost(2.0 * b * m * n, float(b * m * n * size))
    if name == "matmul":
        a, b2_ = _dims(s[0]), _dims(s[1])
        if a is None or b2_ is None:
            return None
        batch, m, n, k = _matmul_dims(a, b2_)
        if len(b2_) <= 2:  # torch folds the batch dims of a into m: one GEMM, the weight read once
            return gemm_cost(batch * m, n, k, dtype)
        return gemm_cost(m, n, k, dtype, batch=batch)
    if name == "linear":
        x, w = _dims(s[0]), _mat(s[1], 2)
        if not x or x[-1] != w[1]:
            raise ValueError("linear dims differ")
        m, n, k = _numel(x[:-1]), w[0], w[1]
        cost = gemm_cost(m, n, k, dtype)
        bias = _dims(s[2]) if len(s) > 2 else None
        return cost + Cost(2.0 * m * n, float(m * n * size)) if bias else cost
    return None


# Autograd nodes priced from the FORWARD op's input dims (the Kineto event of the node itself records only the
# incoming gradient, which does not determine the GEMMs: then the shapes do not fit and the result is None).
def _backward_gemm_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    if name in ("MmBackward0", "MmBackward"):
        (m, k), (k2, n) = _mat(s[0], 2), _mat(s[1], 2)
        if k != k2:
            raise ValueError("inner dims differ")
        # grad_a = grad (m x n) @ b^T (n x k); grad_b = a^T (k x m) @ grad (m x n)
        return gemm_cost(m, k, n, dtype) + gemm_cost(k, n, m, dtype)
    if name in ("AddmmBackward0", "AddmmBackward"):
        (m, k), (k2, n) = _mat(s[1], 2), _mat(s[2], 2)
        if k != k2:
            raise ValueError("inner dims differ")
        bias_grad = Cost(float(m * n), float(m * n * dtype_bytes(dtype)))  # sum of grad over the m rows
        return gemm_cost(m, k, n, dtype) + gemm_cost(k, n, m, dtype) + bias_grad
    if name in ("BmmBackward0", "BmmBackward"):
        (b, m, k), (b2, k2, n) = _mat(s[0], 3), _mat(s[1], 3)
        if k != k2 or b != b2:
            raise ValueError("bmm dims differ")
        return gemm_cost(m, k, n, dtype, batch=b) + gemm_cost(k, n, m, dtype, batch=b)
    return None


def _conv_macs(out_nkpq: tuple[int, ...], weight: tuple[int, ...]) -> int:
    # weight is [K, C/groups, *kernel]: each output element sums C/groups * prod(kernel) products, so grouped and
    # depthwise convolutions need no separate groups argument.
    return _numel(out_nkpq) * _numel(weight[1:])


def _conv_op(name: str, s: list[Any], dtype: str, out: Any) -> Cost | None:
    size = dtype_bytes(dtype)
    if name in _CONV:
        x, w = _dims(s[0]), _dims(s[1])
        if x is None or w is None or len(x) < 3 or len(w) != len(x) or w[0] == 0:
            raise ValueError("not a convolution")
        y = _dims(out[0]) if out else None
        if y is None or len(y) != len(x):
            y = (x[0], w[0], *x[2:])  # assumed: stride 1, "same" padding (see op_cost)
        bias = (
            _dims(s[2])
            if len(s) > 2 and name in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d")
            else None
        )
        macs = _conv_macs(y, w)
        nbytes = (_numel(x) + _numel(w) + _numel(y) + (_numel(bias) if bias else 0)) * size
        return Cost(2.0 * macs, float(nbytes))
    if name in ("convolution_backward", "ConvolutionBackward0"):
        # aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, ...). grad_output gives the
        # output size, so no stride assumption is needed. Assumed: both grad_input (dgrad) and grad_weight (wgrad)
        # are computed (output_mask is not in the dims; the first layer skips dgrad), plus the bias gradient.
        g, x, w = _dims(s[0]), _dims(s[1]), _dims(s[2])
        if g is None or x is None or w is None or len(g) != len(x) or len(w) != len(x) or len(x) < 3:
            raise ValueError("not a convolution backward")
        macs = _conv_macs(g, w)
        dgrad = (_numel(g) + _numel(w) + _numel(x)) * size
        wgrad = (_numel(g) + _numel(x) + _numel(w)) * size
        bias_grad = _numel(g) * size
        return Cost(4.0 * macs + _numel(g), float(dgrad + wgrad + bias_grad))
    return None


def _norm_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    size = dtype_bytes(dtype)
    if name in ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm"):
        x = _dims(s[0])
        if not x:
            raise ValueError("no input")
        n = _numel(x)
        # weight and bias: the 1-D tensors among the next arguments (normalized_shape is an int list: dims [])
        params = sum(_numel(d) for d in (_dims(a) for a in s[1:4]) if d is not None and len(d) == 1)
        # mean 1, variance 3, normalize 2, affine 2 FLOPs per element; one read, one write (one pass, a row fits on
        # chip)
        return Cost(8.0 * n, float((2 * n + params) * size))
    if name in ("native_layer_norm_backward", "native_group_norm_backward"):
        g, x = _dims(s[0]), _dims(s[1])
        if not g or g != x:
            raise ValueError("grad and input differ")
        n = _numel(x)
        # reads grad and input, writes grad_input (weight/bias gradients are per-column sums: 2 more FLOPs each)
        return Cost(12.0 * n, float(3 * n * size))
    if name in (
        "batch_norm",
        "native_batch_norm",
        "cudnn_batch_norm",
        "_batch_norm_impl_index",
        "miopen_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
    ):
        x = _dims(s[0])
        if not x or len(x) < 2:
            raise ValueError("no input")
        n = _numel(x)
        # training: a statistics pass reads the input, the normalize pass reads it again and writes the output
        return Cost(8.0 * n, float(3 * n * size + 4 * x[1] * size))
    if name in ("native_batch_norm_backward", "cudnn_batch_norm_backward", "miopen_batch_norm_backward"):
        a, b = _dims(s[0]), _dims(s[1])
        if not a or a != b:
            raise ValueError("grad and input differ")
        n = _numel(a)
        # pass 1 reads grad and input (sums for grad_weight/grad_bias), pass 2 reads both again, writes grad_input
        return Cost(10.0 * n, float(5 * n * size))
    return None


def _embedding_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    size = dtype_bytes(dtype)
    if name in ("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"):
        # (weight [E, D], indices [n], offsets [B], ...): n rows gathered and summed into B bags
        w, idx, off = _mat(s[0], 2), _dims(s[1]), _dims(s[2])
        if idx is None or off is None or len(off) != 1:
            raise ValueError("not an embedding bag")
        n, d, bags = _numel(idx), w[1], off[0]
        return Cost(float(n * d), float(n * d * size + bags * d * size + (n + bags) * INDEX_BYTES))
    if name in ("_embedding_bag_backward", "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"):
        # (grad [B, D], indices [n], offsets/offset2bag, ...): each of the n lookups adds its bag's gradient row
        # into the weight gradient (the kernel sorts the indices first: those passes are counted as index traffic)
        g, idx = _mat(s[0], 2), _dims(s[1])
        if idx is None:
            raise ValueError("no indices")
        n, (bags, d) = _numel(idx), g
        return Cost(float(n * d), float(bags * d * size + n * d * size + 4 * n * INDEX_BYTES))
    if name == "embedding":
        w, idx = _mat(s[0], 2), _dims(s[1])
        if idx is None:
            raise ValueError("no indices")
        n, d = _numel(idx), w[1]
        return Cost(0.0, float(2 * n * d * size + n * INDEX_BYTES))
    if name == "embedding_dense_backward":
        g, idx = _dims(s[0]), _dims(s[1])
        if not g or idx is None:
            raise ValueError("not an embedding backward")
        n, d = _numel(idx), g[-1]
        return Cost(float(n * d), float(2 * n * d * size + 4 * n * INDEX_BYTES))
    return None


def _softmax_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    base = name.lstrip("_")
    if name in _SOFTMAX:
        x = _dims(s[0])
        if not x:
            raise ValueError("no input")
        return elementwise_cost(_numel(x), dtype, FLOPS_PER_ELEMENT[base], reads=1, writes=1)
    if name in _SOFTMAX_BACKWARD:
        g, y = _dims(s[0]), _dims(s[1])
        if not g or g != y:
            raise ValueError("grad and output differ")
        return elementwise_cost(_numel(g), dtype, FLOPS_PER_ELEMENT[base], reads=2, writes=1)
    return None


def _reduction_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    if name not in _REDUCTIONS:
        return None
    if name in ("max", "min") and len(s) > 1 and _dims(s[1]):
        return None  # max(a, b) of two tensors: element-wise (priced as maximum/minimum)
    x = _dims(s[0])
    if not x:
        raise ValueError("reduction of a scalar")
    n = _numel(x)
    per_element = 3.0 if name in ("var", "std", "norm", "linalg_vector_norm") else 1.0
    return Cost(per_element * n, float(n * dtype_bytes(dtype)))


def _elementwise_op(name: str, s: list[Any], dtype: str, _out: Any) -> Cost | None:
    if name.startswith("_foreach_"):
        return _foreach_op(name[len("_foreach_") :].rstrip("_"), s, dtype)
    if name in ("cat", "stack"):
        parts = _tensor_list(s[0])
        if parts is None:
            return None  # Kineto records a tensor list as []: sizes unknown
        n = sum(_numel(p) for p in parts)
        return elementwise_cost(n, dtype, 0.0, reads=1, writes=1)
    if name == "copy":  # copy_(dst, src): read src, write dst
        dst = _dims(s[0])
        if not dst:
            raise ValueError("copy of a scalar")
        return elementwise_cost(_numel(dst), dtype, 0.0, reads=1, writes=1)
    if name in _FILL:
        x = _dims(s[0])
        if x is None:
            raise ValueError("no tensor")
        return elementwise_cost(_numel(x), dtype, 0.0, reads=0, writes=1)
    if name in ("max", "min"):
        name = "maximum" if name == "max" else "minimum"
    if name in _UNARY:
        positions = [0]
    elif name in _BINARY:
        positions = [0, 1]
    elif name in _TERNARY:
        positions = [0, 1, 2]
    else:
        return None
    tensors = [d for d in (_dims(s[i]) for i in positions if i < len(s)) if d]  # [] is a scalar: not read
    if not tensors:
        return None
    out = _broadcast(tensors)
    if out is None:
        raise ValueError("shapes do not broadcast")
    size = dtype_bytes(dtype)
    flops = FLOPS_PER_ELEMENT.get(name, 1.0) * _numel(out)
    return Cost(flops, float((sum(_numel(t) for t in tensors) + _numel(out)) * size))


def _foreach_op(name: str, s: list[Any], dtype: str) -> Cost | None:
    """``_foreach_add_(self_list, other_list_or_scalar, ...)``: the element-wise op on each tensor of the lists."""
    first = _tensor_list(s[0])
    if first is None:
        return None
    lists = [first] + [t for t in (_tensor_list(a) for a in s[1:]) if t is not None and len(t) == len(first)]
    n = sum(_numel(d) for d in first)
    flops = FLOPS_PER_ELEMENT.get(name, 1.0)
    reads = 0 if name in _FILL else len(lists)
    return elementwise_cost(n, dtype, flops, reads=reads, writes=1)


def op_dims(op: str, shapes: Shapes | None, out_shapes: Shapes | None = None) -> tuple[int, int, int, int] | None:
    """The work's geometry as (batch, m, n, k), what the kernel's threads are laid out over: a matrix product's
    ``batch`` products of m x k by k x n (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``); a
    forward convolution as its implicit GEMM (m: output positions, n: output channels, k: the reduction over input
    channels and the window; the output size as :func:`op_cost` takes it); any other op as rows of its first
    tensor's last dim (1, rows, row length, 1). None where the shapes do not give it."""
    if not shapes or not isinstance(shapes, (list, tuple)):
        return None
    name, s = _base_name(op), list(shapes)
    try:
        if name in ("mm", "addmm"):
            (m, k), (_, n) = _mat(s[1 if name == "addmm" else 0], 2), _mat(s[2 if name == "addmm" else 1], 2)
            return 1, m, n, k
        if name in ("bmm", "baddbmm"):
            (b, m, k), (_, _, n) = _mat(s[1 if name == "baddbmm" else 0], 3), _mat(s[2 if name == "baddbmm" else 1], 3)
            return b, m, n, k
        if name == "matmul":
            a, b2 = _dims(s[0]), _dims(s[1])
            if a is None or b2 is None:
                return None
            batch, m, n, k = _matmul_dims(a, b2)
            return (1, batch * m, n, k) if len(b2) <= 2 else (batch, m, n, k)
        if name == "linear":
            x, w = _dims(s[0]), _mat(s[1], 2)
            return (1, _numel(x[:-1]), w[0], w[1]) if x else None
        if name in _CONV:
            x, w = _dims(s[0]), _dims(s[1])
            if x is None or w is None or len(x) < 3 or len(w) != len(x):
                return None
            y = _dims(out_shapes[0]) if out_shapes else None
            if y is None or len(y) != len(x):
                y = (x[0], w[0], *x[2:])
            return 1, y[0] * _numel(y[2:]), w[0], _numel(w[1:])
    except (ValueError, IndexError, TypeError):
        return None
    x = _dims(s[0])
    if not x:
        return None
    return 1, max(_numel(x[:-1]), 1), x[-1], 1
