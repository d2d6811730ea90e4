"""Kernel classes from kernel names: what a performance model or a what-if needs to know of a kernel.

The names come from cuBLAS/cuDNN/CUTLASS/ATen/Triton/NCCL on NVIDIA and rocBLAS/hipBLASLt/MIOpen/RCCL on AMD.
Order matters: the first matching class wins.
"""

from __future__ import annotations

import re
from functools import lru_cache

KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cls, re.compile(pattern, re.IGNORECASE))
    for cls, pattern in (
        ("comm", r"nccl|rccl|allreduce|all_reduce|allgather|reducescatter|alltoall|sendrecv"),
        ("attention", r"flash|fmha|attention|attn|sdpa|mha_"),
        # FBGEMM's embedding kernels name the fbgemm namespace in their template arguments: not GEMMs
        ("embedding", r"embedding_codegen|bounds_check_indices|fbgemm_gpu::.*(lookup|embedding)"),
        ("copy", r"fbgemm_gpu::permute|fbgemm_gpu::.*(jagged|pack)"),
        # MIOpen names its other kernels after the library too (MIOpenBatchNormFwdTrainSpatial, MIOpenSoftmax, ...)
        (
            "conv",
            r"conv|wgrad|dgrad|implicit_gemm|cudnn::detail::|winograd|fft2d|MIOpen(?!BatchNorm|LayerNorm|GroupNorm|Softmax|Pool|LRN|Activ)|igemm|scudnn",
        ),
        (
            "gemm",
            r"(?<!fb)gemm|gemv|cutlass|sm\d+_xmma|ampere_|volta_|turing_|hopper_|Cijk_|matmul|dot_kernel|cublas|splitKreduce|nvjet",
        ),
        (
            "embedding",
            r"embedding|embedding_bag|EmbeddingBag|index_select|indexSelect|gather_kernel|scatter_kernel|index_put|indexing_backward|unique|sort",
        ),
        (
            "norm",
            r"batch_norm|batchnorm|bn_fw|bn_bw|layer_norm|layernorm|group_norm|rms_norm|rmsnorm|welford|instance_norm",
        ),
        ("softmax", r"softmax"),
        ("optimizer", r"multi_tensor_apply|adam|sgd|lamb(?!da)|fused_optimizer|FusedAdam"),  # not `lambda`
        (
            "reduction",
            r"reduce_kernel|reduction|reduce|sum_kernel|norm_kernel|argmax|cub::|DeviceReduce|DeviceScan|nll_loss|cross_entropy|mean_kernel",
        ),
        ("pooling", r"pool"),
        # cuDNN's and MIOpen's layout changes around a convolution (nchwToNhwcKernel) and MIOpen's tensor ops
        ("copy", r"copy|cat_|CatArray|transpose|permute|contiguous|nchwToNhwc|nhwcToNchw"),
        (
            "elementwise",
            r"elementwise|vectorized|unrolled|pointwise|triton_|kernelPointwiseApply|activation|relu|gelu|silu|sigmoid|tanh|dropout|fill|add|mul|div|where|clamp|"
            r"scalePackedTensor|SubTensorOp|MIOpenActiv",
        ),
    )
)


@lru_cache(maxsize=65536)
def classify_kernel(name: str, kind: str = "kernel") -> str:
    """The class of a GPU task: gemm, conv, attention, elementwise, reduction, norm, softmax, embedding,
    optimizer, pooling, copy, comm, memcpy, memset or other."""
    if kind in ("memcpy", "memset"):
        return kind
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return cls
    return "other"


COMM_RE = re.compile(r"nccl|rccl", re.IGNORECASE)


@lru_cache(maxsize=65536)
def is_comm_kernel(name: str) -> bool:
    """Whether a kernel belongs to a collective-communication library (a ``comm`` task)."""
    return COMM_RE.search(name) is not None


# PyTorch's fused foreach / fused optimizer kernels (and apex's): one thread block a chunk of a tensor
MULTI_TENSOR_APPLY_RE = re.compile(r"multi_tensor_apply_kernel")


@lru_cache(maxsize=65536)
def is_multi_tensor_apply(name: str) -> bool:
    """Whether a kernel is a ``multi_tensor_apply_kernel`` launch (its grid counts chunks of the tensors it covers)."""
    return MULTI_TENSOR_APPLY_RE.search(name) is not None


COLLECTIVE_RE = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|AllToAll|Send|Recv)", re.IGNORECASE
)


def collective_of(name: str) -> str | None:
    """The collective a communication kernel performs, from its name (``ncclKernel_AllReduce_RING_LL_Sum_float``)."""
    m = COLLECTIVE_RE.search(name)
    return m.group(1).lower() if m else None
