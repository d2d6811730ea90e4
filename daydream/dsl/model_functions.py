"""The performance models as .whatif functions: ``allreduce(bytes, ranks = 8, link = "nvlink4")`` and friends.

Imported by :mod:`daydream.dsl` so every script can call them; each impl gets the graph being changed first (for
the trace's device), then the script's arguments, and raises DaydreamError for bad ones.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.dsl.functions import Cost, is_whole, number_argument, register_function, type_name
from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of
from daydream.graph.select import Selection, in_time_order
from daydream.perf.cpu.host import (
    OBSERVED_EFFICIENCY,
    parallel_time_factor,
    recorded_host,
    recorded_thread_speedup,
    usable_cores,
)

_DEFAULT_LINK = "nvlink4"


def _ranks(value: Any, fn: str) -> int:
    n = number_argument(value, fn, "ranks")  # a number, finite
    if not is_whole(n) or not 1 <= n <= 2**31:
        raise DaydreamError(f"{fn}(): ranks must be a whole number from 1 to 2**31, got {value}")
    return int(n)


def _dimension(value: Any, fn: str, what: str) -> int:
    """A size (a tensor dimension, a count) as a whole number: finite, a fraction cut as int() cuts it, at most 2**53
    (sizes past it are no tensor, and their products would not stay exact or finite)."""
    n = number_argument(value, fn, what)
    if abs(n) > 2**53:
        raise DaydreamError(f"{fn}(): {what} must be at most 2**53, got {value}")
    return int(n)


def _link(value: Any, fn: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DaydreamError(
            f'{fn}(): link is a preset name ("nvlink4") or a bus bandwidth in GB/s, not {type_name(value)}'
        )
    return value


def _gpus_per_node(value: Any, fn: str) -> int:
    g = number_argument(value, fn, "gpus_per_node")
    if not is_whole(g) or not 1 <= g <= 2**20:
        raise DaydreamError(f"{fn}(): gpus_per_node is a whole number >= 1, got {value}")
    return int(g)


def _topology(graph: nx.DiGraph, fn: str, link: Any, inter: Any, gpus_per_node: Any, nics_per_node: Any) -> Any:
    """The link to price over: ``link`` as given, or with ``inter`` a topology of nodes; ``link = "auto"``: the
    trace's device's own intra-node link."""
    from daydream.perf.collectives import Topology, intra_node_link, resolve_link

    g = _gpus_per_node(gpus_per_node, fn)
    nics = number_argument(nics_per_node, fn, "nics_per_node")
    if not is_whole(nics) or not 0 <= nics <= 2**20:
        raise DaydreamError(f"{fn}(): nics_per_node is a whole number >= 0 (0: one per GPU), got {nics_per_node}")
    intra = _link(link, fn)
    if isinstance(intra, str) and intra.strip().lower() == "auto":
        from daydream.perf.kernels.devices import device_of_graph

        device = device_of_graph(graph)
        if device is None:
            raise DaydreamError(
                f'{fn}(): link = "auto" is the link of the trace\'s GPU, and the trace names none the device catalog '
                'holds; name the link ("nvlink4", "pcie4", or a bus bandwidth in GB/s)'
            )
        intra = intra_node_link(device, g)
    if inter is None:
        return intra
    return Topology(resolve_link(intra), resolve_link(_link(inter, fn)), g, int(nics))


def _collective(name: str) -> Any:
    def impl(
        graph: nx.DiGraph,
        nbytes: Any,
        ranks: Any = 8,
        link: Any = _DEFAULT_LINK,
        latency: Any = None,
        inter: Any = None,
        gpus_per_node: Any = 8,
        nics_per_node: Any = 0,
    ) -> float:
        from daydream.perf.collectives import Topology, collective_us, topology_collective_us

        n = _ranks(ranks, name)
        size = number_argument(nbytes, name, "bytes")
        over = _topology(graph, name, link, inter, gpus_per_node, nics_per_node)
        if n == 1:
            return 0.0  # one rank has nothing to exchange: NCCL returns at once
        lat = None if latency is None else number_argument(latency, name, "latency")
        if isinstance(over, Topology):
            return topology_collective_us(name, size, n, over, lat)
        return collective_us(name, size, n, over, lat)

    return impl


def _collective_any(graph: nx.DiGraph, name: Any, nbytes: Any, *args: Any, **kwargs: Any) -> float:
    if not isinstance(name, str):
        raise DaydreamError(
            f'collective(): the first argument names the collective ("allgather"), not {type_name(name)}'
        )
    from daydream.perf.collectives.nccl_tests import normalize_collective

    return _collective(normalize_collective(name))(graph, nbytes, *args, **kwargs)


def _device_link(graph: nx.DiGraph, gpus_per_node: Any = 8) -> str:
    from daydream.perf.collectives import intra_node_link

    return intra_node_link(_device(graph, None, "device_link"), _gpus_per_node(gpus_per_node, "device_link")).name


# units of a call of a model's formula (a collective, the roofline, a lookup in the device catalog): its presets,
# catalogs and checks take 20-60 us a call on a loaded 2-core machine (bench/bench_budget.py)
_MODEL_CALL = 50
_TOPOLOGY_KEYWORDS = ("ranks", "link", "latency", "inter", "gpus_per_node", "nics_per_node")
_COLLECTIVE_DOC = (
    '{name}(BYTES, ranks = 8, link = "nvlink4", latency = none, inter = none, gpus_per_node = 8, nics_per_node = 0): '
    "microseconds for one {name} by the nccl-tests formula, latency + {factor} x BYTES / bus bandwidth of the link "
    '(a preset: nvlink2..5, pcie3..5, ib-edr/hdr/ndr, eth-10g/25g/100g/400g; a bus bandwidth in GB/s; "auto": the '
    "trace's GPU's own NVLink or PCIe); 0 on one rank. With inter (a preset, one NIC's), the ranks fill nodes of "
    "gpus_per_node GPUs joined by link, nodes joined by nics_per_node NICs (0: one per GPU) of inter "
    "(daydream.perf.collectives.topology_collective_us)"
)
for _name, _factor in [
    ("allreduce", "2(n-1)/n"),
    ("allgather", "(n-1)/n"),
    ("reducescatter", "(n-1)/n"),
    ("alltoall", "(n-1)/n"),
    ("broadcast", "1"),
]:
    register_function(
        _name,
        _collective(_name),
        1,
        7,
        _COLLECTIVE_DOC.format(name=_name, factor=_factor),
        keywords=_TOPOLOGY_KEYWORDS,
        cost=Cost(per_call=_MODEL_CALL),
    )
register_function(
    "collective",
    _collective_any,
    2,
    8,
    'collective(NAME, BYTES, ranks = 8, link = "nvlink4", ...): any collective by name (sendrecv, reduce, ...), '
    "the arguments of allreduce()",
    keywords=_TOPOLOGY_KEYWORDS,
    cost=Cost(per_call=_MODEL_CALL),
)
register_function(
    "device_link",
    _device_link,
    0,
    1,
    "device_link(gpus_per_node = 8): the name of the link between the GPUs of one node of the trace's GPU: its NVLink "
    "(AMD: Infinity Fabric) where that joins them all, else its PCIe",
    keywords=("gpus_per_node",),
    cost=Cost(per_call=_MODEL_CALL),
)


# ---- kernels and devices ----------------------------------------------------------------------------------------


def _text(value: Any, fn: str, what: str) -> str:
    if not isinstance(value, str):
        raise DaydreamError(f"{fn}(): {what} must be a string, not {type_name(value)}")
    return value


def _device(graph: nx.DiGraph, value: Any, fn: str) -> Any:
    """The catalog entry named by ``value``, or the trace's own GPU when ``value`` is none."""
    from daydream.perf.kernels.devices import device_of_graph, get_device

    if value is None:
        found = device_of_graph(graph)
        if found is None:
            traced = graph.graph.get("device")
            why = f"its GPU {traced!r} is not in the device catalog" if traced else "the trace names no GPU"
            raise DaydreamError(f'{fn}(): {why}; name one, e.g. device = "h100" (daydream models devices lists them)')
        return found
    return get_device(_text(value, fn, "device"))


def _calibration(graph: nx.DiGraph, dtype: str) -> Any:
    """The graph's per-class roofline calibration (kept with the graph's derived indexes, once per dtype: it reads the
    kernels as first met, not as edited since), or None where it cannot be had."""
    from daydream.perf.kernels.roofline import calibrate

    cache = derived.cached(graph, "roofline_calibration", ()) or derived.keep(graph, "roofline_calibration", {}, ())
    if dtype not in cache:
        try:
            cache[dtype] = calibrate(graph, dtype)
        except DaydreamError:
            cache[dtype] = None
    return cache[dtype]


def _roofline(graph: nx.DiGraph, flops: Any, nbytes: Any, device: Any = None, dtype: Any = "fp32") -> float:
    from daydream.perf.kernels.costs import Cost
    from daydream.perf.kernels.roofline import roofline_us

    cost = Cost(number_argument(flops, "roofline", "flops"), number_argument(nbytes, "roofline", "bytes"))
    return roofline_us(cost, _device(graph, device, "roofline"), _text(dtype, "roofline", "dtype"))


def _gemm(graph: nx.DiGraph, m: Any, n: Any, k: Any, dtype: Any = "fp32", device: Any = None, batch: Any = 1) -> float:
    from daydream.perf.kernels.costs import gemm_cost
    from daydream.perf.kernels.roofline import roofline_us

    dims = [_dimension(x, "gemm", what) for x, what in ((m, "m"), (n, "n"), (k, "k"), (batch, "batch"))]
    if min(dims) < 1:
        raise DaydreamError(f"gemm(): m, n, k and batch must be >= 1, got {dims}")
    dt = _text(dtype, "gemm", "dtype")
    if device == "cpu":
        return _cpu_gemm(dims, dt)
    dev = _device(graph, device, "gemm")
    bound = roofline_us(gemm_cost(dims[0], dims[1], dims[2], dt, batch=dims[3]), dev, dt, "gemm")
    cal = _calibration(graph, "fp32")
    entry = cal.entry("gemm") if cal is not None else None
    # The trace's GEMMs tell how far from the roofline they ran (and their fixed cost); that carries to other
    # shapes, devices and dtypes. Without priced GEMMs in the trace the roofline itself is the (optimistic) answer.
    return entry.predict_us(bound) if entry is not None else bound


# the precisions the bundled CPU GEMM model was measured in (kernels/data/cpu/gemm.csv)
_CPU_DTYPES = {"fp32": "float32", "fp64": "float64"}


def _cpu_gemm(dims: list[int], dtype: str) -> float:
    """A GEMM on the CPU: the bundled model of the CPU's measured GEMMs (daydream.perf.kernels.mlp; `daydream calibrate`
    refits
    it for another host), in fp32 or fp64."""
    from daydream.perf.kernels import mlp

    if dtype not in _CPU_DTYPES:
        raise DaydreamError(f'gemm(): the CPU GEMM model knows fp32 and fp64, not {dtype!r} (device = "cpu")')
    m, n, k, batch = dims
    return float(mlp.predict("gemm", {"batch": batch, "m": m, "n": n, "k": k, "dtype": _CPU_DTYPES[dtype]}))


def _memcpy(graph: nx.DiGraph, nbytes: Any, direction: Any = "h2d", device: Any = None) -> float:
    from daydream.perf.kernels.roofline import memcpy_us

    size = number_argument(nbytes, "memcpy", "bytes")
    way = _text(direction, "memcpy", "direction")
    if way.lower() not in ("h2d", "d2h", "d2d"):
        # checked before the device, which a wrong direction should not be blamed on
        raise DaydreamError(f'memcpy(): direction is "h2d", "d2h" or "d2d", not {direction!r}')
    return memcpy_us(size, way, _device(graph, device, "memcpy"))


def _embedding_bag(
    graph: nx.DiGraph,
    batch: Any,
    rows: Any,
    tables: Any,
    pooling: Any,
    dim: Any,
    device: Any = None,
    backward: Any = False,
) -> float:
    from daydream.perf.embeddings.embedding_bag import BagModel, embedding_bag_us

    args = [
        _dimension(x, "embedding_bag", w)
        for x, w in ((batch, "batch"), (rows, "rows"), (tables, "tables"), (pooling, "pooling"), (dim, "dim"))
    ]
    dev = _device(graph, device, "embedding_bag")
    return embedding_bag_us(
        *args, dev, backward=bool(backward), model=BagModel(l2_aware=dev.l2_bytes_per_clk is not None)
    )


def _per_table(value: Any, n: int, fn: str, what: str) -> list[float] | None:
    """A per-table argument: none (read it from the trace), one number for every table, or a list of one per table."""
    if value is None:
        return None
    if isinstance(value, list):
        if len(value) != n:
            raise DaydreamError(f"{fn}(): {what} lists {len(value)} tables, but there are {n} (one value per table)")
        return [number_argument(v, fn, f"{what}[{i}]") for i, v in enumerate(value)]
    return [number_argument(value, fn, what)] * n


def _fused_step(graph: nx.DiGraph, step_ops: Any) -> float:
    from daydream.perf.cpu.optimizer_step import fused_cpu_step_us, step_optimizer

    fn = "fused_step"
    if not isinstance(step_ops, Selection):
        raise DaydreamError(f"{fn}() takes a selection of one optimizer step's CPU ops, not {type_name(step_ops)}")
    nodes = attrs_of(graph)
    tasks = [nodes[t] for t in in_time_order(graph, step_ops)]
    optimizers = {step_optimizer(a.get("region")) for a in tasks}
    if len(optimizers) != 1 or None in optimizers:
        raise DaydreamError(
            f"{fn}(): the selection holds {len(tasks)} tasks of {len(optimizers - {None})} optimizer "
            "steps (`Optimizer.step#...` ranges); it takes the ops of one"
        )
    ops = [(a["name"], a.get("shapes"), a["duration"]) for a in tasks if a["kind"] == "cpu"]
    return fused_cpu_step_us(ops, optimizers.pop())


def _embedding_tables(
    graph: nx.DiGraph, lookups: Any, rows: Any = None, dims: Any = None, pooling: Any = None, batch: Any = None
) -> list[list[float]]:
    from daydream.perf.embeddings.embedding_bag import bag_shape

    fn = "embedding_tables"
    if not isinstance(lookups, Selection):
        raise DaydreamError(f"{fn}() takes a selection of embedding-bag ops first, not {type_name(lookups)}")
    tasks = in_time_order(graph, lookups)
    # the tables are the lookups when the trace has them; given as lists alone, the lists say how many
    n = len(tasks) or next((len(v) for v in (rows, dims, pooling) if isinstance(v, list)), 0)
    if n == 0:
        raise DaydreamError(
            f"{fn}(): no embedding-bag op in the selection, and no list of rows, dims or pooling to say "
            "how many tables there are"
        )
    nodes = attrs_of(graph)
    traced = [bag_shape(nodes[t].get("shapes")) for t in tasks] if tasks else [None] * n
    given = [_per_table(v, n, fn, what) for v, what in ((rows, "rows"), (dims, "dims"), (pooling, "pooling"))]
    given.append(None if batch is None else [number_argument(batch, fn, "batch")] * n)
    columns = []
    for i, (what, values) in enumerate(zip(("rows", "dims", "pooling", "batch"), given)):
        if values is None:
            missing = next((k for k, t in enumerate(traced) if t is None), None)
            if missing is not None:
                task = tasks[missing] if tasks else None
                where = (
                    f"the input dims of task {task} ({nodes[task].get('name')!r}) do not say it"
                    if tasks
                    else "no lookup"
                )
                raise DaydreamError(
                    f"{fn}(): {what} of table {missing}: {where} (record with shapes, as daydream record "
                    f"does, or give {what} = ...)"
                )
            values = [t[i] for t in traced]  # type: ignore[index]
        for k, v in enumerate(values):
            if v <= 0 or (what != "pooling" and not is_whole(v)):
                kind = "a number > 0" if what == "pooling" else "a whole number >= 1"
                raise DaydreamError(f"{fn}(): {what} of table {k} must be {kind}, not {v:g}")
        columns.append(values)
    return [[int(r), int(d), p, int(b)] for r, d, p, b in zip(*columns)]


def _fae_schedule(graph: nx.DiGraph, batches: Any, hot_fraction: Any, switch_every: Any = None) -> list[int]:
    from daydream.perf.embeddings.fae import batch_counts, swap_count

    fn = "fae_schedule"
    run = None if switch_every is None else number_argument(switch_every, fn, "switch_every")
    hot, cold = batch_counts(number_argument(batches, fn, "batches"), number_argument(hot_fraction, fn, "hot_fraction"))
    return [hot, cold, swap_count(hot, cold, run)]  # type: ignore[arg-type]


def _fae_swap(graph: nx.DiGraph, hot_bytes: Any, device: Any = None, round_trip: Any = True) -> float:
    from daydream.perf.embeddings.fae import swap_us

    if not isinstance(round_trip, bool):
        raise DaydreamError(f"fae_swap(): round_trip is true or false, not {type_name(round_trip)}")
    return swap_us(number_argument(hot_bytes, "fae_swap", "hot_bytes"), _device(graph, device, "fae_swap"), round_trip)


def _fae_epoch_args(fn: str, values: tuple[Any, ...]) -> list[float]:
    names = ("T_cold", "T_hot", "batches", "hot_fraction", "swaps", "the swap time")
    return [number_argument(v, fn, what) for v, what in zip(values, names)]


def _fae_epoch(graph: nx.DiGraph, *values: Any) -> float:
    from daydream.perf.embeddings.fae import epoch_us

    return epoch_us(*_fae_epoch_args("fae_epoch", values))  # type: ignore[arg-type]


def _fae_speedup(graph: nx.DiGraph, *values: Any) -> float:
    from daydream.perf.embeddings.fae import speedup

    return speedup(*_fae_epoch_args("fae_speedup", values))  # type: ignore[arg-type]


def _dtype_speedup(
    graph: nx.DiGraph, kernel_class: Any, source: Any = "fp32", target: Any = "bf16", device: Any = None
) -> float:
    from daydream.perf.kernels.roofline import dtype_speedup

    fn = "dtype_speedup"
    cls = _text(kernel_class, fn, "the kernel class") if kernel_class is not None else "other"
    return dtype_speedup(
        _device(graph, device, fn), _text(source, fn, "source dtype"), _text(target, fn, "target dtype"), cls
    )


def _device_speedup(
    graph: nx.DiGraph, kernel_class: Any, target: Any, source: Any = None, dtype: Any = "fp32"
) -> float:
    from daydream.perf.kernels.roofline import device_speedup

    fn = "device_speedup"
    cls = _text(kernel_class, fn, "the kernel class") if kernel_class is not None else "other"
    return device_speedup(_device(graph, source, fn), _device(graph, target, fn), cls, _text(dtype, fn, "dtype"))


def _device_time(
    graph: nx.DiGraph, target: Any, name: Any, kernel_class: Any, duration: Any, op: Any, shapes: Any, dtype: Any = None
) -> float:
    from daydream.perf.kernels.roofline import Calibration, move_us

    fn = "device_time"
    src = _device(graph, None, fn)
    calibration = _calibration(graph, "fp32") or Calibration(device=src, dtype="fp32", classes={})
    attrs = {
        "name": _text(name, fn, "the kernel name") if name is not None else "",
        "class": _text(kernel_class, fn, "the kernel class") if kernel_class is not None else "other",
        "duration": number_argument(duration, fn, "duration"),
        "op": _text(op, fn, "the op") if op is not None else None,
        "shapes": shapes,
    }
    dst = _device(graph, target, fn)
    # each swap counted beside the graph (a copy starts with none): the interval's device part (uncertainty.device_part)
    swaps = derived.cached(graph, "device_swaps", ()) or derived.keep(graph, "device_swaps", {}, ())
    tally = swaps.setdefault(dst.key, {})
    return move_us(attrs, calibration, dst, None if dtype is None else _text(dtype, fn, "dtype"), tally)


def compute_dtype(graph: nx.DiGraph) -> str | None:
    """The precision most of the graph's GEMM-like kernel time computes in, as the kernels' names tell
    (:func:`daydream.perf.kernels.roofline.kernel_dtype`: ``..._bf16_...``, Tensile's ``Cijk_..._BBS_``, ``sgemm``);
    None
    where no such kernel's name tells."""
    from daydream.perf.kernels.roofline import MATMUL_CLASSES, kernel_dtype

    time: dict[str, float] = {}
    for a in attrs_of(graph).values():
        if (
            a.get("kind") == "gpu"
            and a.get("class") in MATMUL_CLASSES
            and (dt := kernel_dtype(str(a.get("name") or "")))
        ):
            time[dt] = time.get(dt, 0.0) + float(a.get("duration") or 0.0)
    return max(time, key=time.__getitem__) if time else None


def _trace_device(graph: nx.DiGraph) -> str | None:
    from daydream.perf.kernels.devices import device_of_graph

    found = device_of_graph(graph)
    return found.key if found is not None else None


def trace_ranks(graph: nx.DiGraph) -> int:
    """The traced job's world size (1 where the trace has no distributed info)."""
    n = graph.graph.get("world_size")
    return n if isinstance(n, int) and n >= 1 else 1


def _intra_op_factor(
    graph: nx.DiGraph, threads: Any, cores: Any = None, recorded: Any = None, efficiency: Any = None
) -> float:
    fn = "intra_op_factor"
    threads, recorded, cores, same_host = _thread_counts(graph, fn, threads, cores, recorded)
    return parallel_time_factor(
        threads,
        recorded,
        cores,
        recorded_thread_speedup(graph.graph.get("recording")) if same_host else None,
        None if efficiency is None else number_argument(efficiency, fn, "efficiency"),
    )


def _intra_op_factor_range(graph: nx.DiGraph, threads: Any, cores: Any = None, recorded: Any = None) -> list[float]:
    fn = "intra_op_factor_range"
    threads, recorded, cores, same_host = _thread_counts(graph, fn, threads, cores, recorded)
    measured = recorded_thread_speedup(graph.graph.get("recording")) if same_host else None
    if measured is not None:
        factor = parallel_time_factor(threads, recorded, cores, measured)
        return [factor, factor]
    return sorted(parallel_time_factor(threads, recorded, cores, efficiency=e) for e in OBSERVED_EFFICIENCY)


def _thread_counts(
    graph: nx.DiGraph, fn: str, threads: Any, cores: Any, recorded: Any
) -> tuple[float, float, float | None, bool]:
    """(threads, recorded threads, cores, whether the host is the recording's) of an intra-op thread function's
    arguments, the sidecar's where not given."""
    traced_threads, traced_cores = recorded_host(graph.graph.get("recording"))
    if recorded is None:
        if traced_threads is None:
            raise DaydreamError(
                f"{fn}(): the trace does not say how many intra-op threads it ran with (no daydream record sidecar "
                "next to it): give them, e.g. recorded = 8"
            )
        recorded = traced_threads
    # the host's measured scaling prices the recording's own host; another number of cores is another host
    same_host = cores is None or cores == traced_cores
    if cores is None:
        cores = traced_cores
    return (
        number_argument(threads, fn, "threads"),
        number_argument(recorded, fn, "recorded"),
        None if cores is None else number_argument(cores, fn, "cores"),
        same_host,
    )


def _recorded_threads(graph: nx.DiGraph) -> int | None:
    return recorded_host(graph.graph.get("recording"))[0]


def _recorded_cores(graph: nx.DiGraph) -> float | None:
    threads, cores = recorded_host(graph.graph.get("recording"))
    return cores if threads is None else usable_cores(threads, cores)


# what a call's work costs besides the 1 per call and per item of its arguments and result (Function), as
# bench/bench_budget.py measured it: a walk of the graph's kernels, of a selection's ops; a model's formula through
# its presets, catalogs and checks (20-60 us a call on a loaded 2-core machine)
_COSTS: dict[str, Cost] = {
    **{
        name: Cost(per_call=_MODEL_CALL)
        for name in (
            "recorded_threads",
            "recorded_cores",
            "intra_op_factor",
            "intra_op_factor_range",
            "roofline",
            "gemm",
            "memcpy",
            "embedding_bag",
            "fae_schedule",
            "fae_swap",
            "fae_epoch",
            "fae_speedup",
            "dtype_speedup",
            "device_speedup",
            "device_time",
            "trace_ranks",
        )
    },
    "compute_dtype": Cost(per_task=2, cached=True),
    "trace_device": Cost(per_call=_MODEL_CALL, cached=True),
    "embedding_tables": Cost(per_item=5),
    "fused_step": Cost(per_item=2),
}

for _name, _impl, _lo, _hi, _doc, _keys in [
    (
        "recorded_threads",
        _recorded_threads,
        0,
        0,
        "recorded_threads(): the intra-op threads the trace ran with (the daydream record sidecar), none if unknown",
        (),
    ),
    (
        "recorded_cores",
        _recorded_cores,
        0,
        0,
        (
            "recorded_cores(): the cores the recorded process could run on (the "
            "sidecar; else one per recorded thread), none if unknown"
        ),
        (),
    ),
    (
        "intra_op_factor",
        _intra_op_factor,
        1,
        4,
        (
            "intra_op_factor(THREADS, cores = none, recorded = none, efficiency = none): how much longer the CPU ops'"
            " threaded work (parallel_us) takes on THREADS intra-op threads than on the recording's (`recorded`, none:"
            " the sidecar's), on `cores` cores (none: the sidecar's, else one per recorded thread); `efficiency`, the"
            " speedup per doubling of the threads (0.5 to 1), in place of the host's measured scaling (the sidecar's)"
            " or the unmeasured default 0.9"
        ),
        ("cores", "recorded", "efficiency"),
    ),
    (
        "intra_op_factor_range",
        _intra_op_factor_range,
        1,
        3,
        (
            "intra_op_factor_range(THREADS, cores = none, recorded = none): [LOW, HIGH], intra_op_factor at the lowest"
            f" and highest efficiency hosts showed where the host's scaling is not measured ({OBSERVED_EFFICIENCY[0]:g}"
            f" and {OBSERVED_EFFICIENCY[1]:g} per doubling), the measured factor twice where it is"
        ),
        ("cores", "recorded"),
    ),
    (
        "roofline",
        _roofline,
        2,
        4,
        (
            'roofline(FLOPS, BYTES, device = none, dtype = "fp32"): microseconds at the device\'s '
            "peak: max(FLOPS / peak FLOP/s, BYTES / memory bandwidth); device none = the trace's GPU"
        ),
        ("device", "dtype"),
    ),
    (
        "gemm",
        _gemm,
        3,
        6,
        (
            'gemm(M, N, K, dtype = "fp32", device = none, batch = 1): microseconds for a GEMM: the roofline of 2MNK'
            ' flops, at the efficiency and fixed cost the trace\'s own GEMMs showed; device = "cpu": the bundled model'
            " of a CPU's measured GEMMs (fp32, fp64)"
        ),
        ("dtype", "device", "batch"),
    ),
    (
        "memcpy",
        _memcpy,
        1,
        3,
        (
            'memcpy(BYTES, direction = "h2d", device = none): microseconds for a copy over PCIe '
            "(h2d, d2h) or within device memory (d2d)"
        ),
        ("direction", "device"),
    ),
    (
        "embedding_bag",
        _embedding_bag,
        5,
        7,
        (
            "embedding_bag(BATCH, ROWS, TABLES, POOLING, DIM, device = none, backward = "
            "false): microseconds for a batched EmbeddingBag (Lin et al.'s heuristic with the L2 hit rate)"
        ),
        ("device", "backward"),
    ),
    (
        "embedding_tables",
        _embedding_tables,
        1,
        5,
        (
            "embedding_tables(SEL, rows = none, dims = none, pooling = none, batch = none): one [ROWS, DIM, POOLING,"
            " BATCH] per embedding-bag op of SEL in time order, from its recorded input dims (weight [ROWS, DIM];"
            " indices and offsets: BATCH bags of POOLING lookups on average); rows, dims, pooling (one number for every"
            " table or a list of one per table) and batch replace what the dims say; with SEL empty, the lists say how"
            " many tables"
        ),
        ("rows", "dims", "pooling", "batch"),
    ),
    (
        "fused_step",
        _fused_step,
        1,
        1,
        (
            "fused_step(SEL): microseconds of torch's fused CPU kernel (fused=True) for the for-loop optimizer step"
            " whose CPU ops SEL holds: its passes over the parameters at the rate the step's in-place ops made theirs"
            " (daydream.perf.optimizer_step)"
        ),
        (),
    ),
    (
        "fae_schedule",
        _fae_schedule,
        2,
        3,
        (
            "fae_schedule(BATCHES, HOT_FRACTION, switch_every = none): FAE's epoch of BATCHES mini-batches,"
            " HOT_FRACTION of them hot: [N_HOT, N_COLD, SWAPS], N_HOT rounded to the nearest batch, SWAPS the"
            " hot<->cold switches of a schedule that starts cold and alternates runs of switch_every batches of each"
            " kind (1: FAE's R(1); none: all cold, then all hot, R(100))"
        ),
        ("switch_every",),
    ),
    (
        "fae_swap",
        _fae_swap,
        1,
        3,
        (
            "fae_swap(HOT_BYTES, device = none, round_trip = true): microseconds of one FAE hot<->cold switch: the hot"
            " rows over PCIe by the memcpy model, written back D2H and refreshed H2D (round_trip false: one copy per"
            " switch)"
        ),
        ("device", "round_trip"),
    ),
    (
        "fae_epoch",
        _fae_epoch,
        6,
        6,
        (
            "fae_epoch(T_COLD, T_HOT, BATCHES, HOT_FRACTION, SWAPS, SWAP_US): microseconds of "
            "an FAE epoch, N_cold x T_COLD + N_hot x T_HOT + SWAPS x SWAP_US (counts as fae_schedule gives them)"
        ),
        (),
    ),
    (
        "fae_speedup",
        _fae_speedup,
        6,
        6,
        (
            "fae_speedup(T_COLD, T_HOT, BATCHES, HOT_FRACTION, SWAPS, SWAP_US): the "
            "all-cold (hybrid) epoch, BATCHES x T_COLD, over the FAE epoch of fae_epoch"
        ),
        (),
    ),
    (
        "dtype_speedup",
        _dtype_speedup,
        1,
        4,
        (
            'dtype_speedup(CLASS, source = "fp32", target = "bf16", device = none): how much faster a kernel class runs'
            " in another dtype: GEMM / conv / attention by the ratio of peaks, others by bytes"
        ),
        ("source", "target", "device"),
    ),
    (
        "device_speedup",
        _device_speedup,
        2,
        4,
        (
            'device_speedup(CLASS, TARGET, source = none, dtype = "fp32"): how much faster a kernel class runs on'
            " TARGET than on the trace's GPU: compute peaks for GEMM-like classes, memory bandwidth for the rest, PCIe"
            " for copies"
        ),
        ("source", "dtype"),
    ),
    (
        "device_time",
        _device_time,
        6,
        7,
        (
            "device_time(TARGET, NAME, CLASS, DURATION, OP, SHAPES, dtype = none): microseconds a traced kernel takes"
            " on TARGET: FLOPs and bytes from its op's shapes, the ratio of its rooflines there and here above the"
            " fixed time the trace's kernels of its class showed, each GPU in its own precision (the kernel name's,"
            " else fp32; TF32 becomes FP32 where the target has none; dtype: the target's); kernels without a priced op"
            " by their class's ratio (device_speedup)"
        ),
        ("dtype",),
    ),
    ("trace_device", _trace_device, 0, 0, "trace_device(): the catalog name of the trace's GPU, none if unknown", ()),
    (
        "compute_dtype",
        compute_dtype,
        0,
        0,
        (
            "compute_dtype(): the precision most of the trace's GEMM, convolution and attention kernel time computes"
            " in, as the kernels' names tell (fp32, tf32, bf16, fp16, fp8), none if no name tells"
        ),
        (),
    ),
    ("trace_ranks", trace_ranks, 0, 0, "trace_ranks(): the traced job's world size (1 without distributed info)", ()),
]:
    register_function(_name, _impl, _lo, _hi, _doc, keywords=_keys, cost=_COSTS.get(_name, Cost()))
