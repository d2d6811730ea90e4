"""``daydream embeddings profile``: which embedding rows are hot under a GPU budget, and what that buys mini-batches.

Input: the sparse features of a training set, one row per input (sample). A file holds one or more tables:

- ``.npy``: shape (N,) is one table of one lookup per input; (N, K) is K tables, one per column (the layout of the
  DLRM/Criteo preprocessed files, ``day_*_sparse.npy``), or, with ``layout="bags"``, one table of K lookups per input.
- ``.npz``: each member is a table, (N,) or (N, P) for P lookups per input; a member ``NAME.offsets`` beside a 1-D
  ``NAME`` makes bags of varying size, as ``nn.EmbeddingBag(indices, offsets)`` takes them: N starts into the flat
  indices (input i's bag is ``NAME[offsets[i]:offsets[i + 1]]``, the last one up to the end).
- ``.pt`` (``torch.save``; needs torch): a tensor as an ``.npy`` array, or a dict of tensors as an ``.npz``.

Every table of every file must have the same N: input i is row i everywhere (FAE's inputs span all tables).

The data is read in blocks (a few MB each, never the whole file): with ``sample`` x < 1, a random x of the blocks of
4,096 inputs (FAE samples 5% of the inputs) to count each row's lookups, and another x, held out, to classify the
inputs (hot when every lookup in every table hits a hot row: the inputs counted would overstate it, having made
their own rows hot). Memory grows with the tables' rows (a count per row) and not
with the file. The hot rows come from :mod:`daydream.perf.embeddings.hot_rows` (FAE's chunked estimator and threshold
search);
``exact`` counts every input and every row instead, as a check.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import numpy as np

from daydream import progress
from daydream.errors import DaydreamError
from daydream.files import clip, input_number, open_input
from daydream.perf.embeddings import hot_rows as hr
from daydream.perf.embeddings.sharding import MAX_TABLE_ROWS  # one bound for a table's rows, profiled or sharded
from daydream.units import brief_repr

UNIT_INPUTS = 4096  # inputs per sampling unit: a random x of these units is read
READ_BYTES = 8 << 20  # bytes per read of consecutive units: bounds memory per block
DTYPE_BYTES = {
    "fp32": 4,
    "float32": 4,
    "fp16": 2,
    "float16": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "int8": 1,
    "fp64": 8,
}
MAX_SOURCES = 4096  # tables across all files: a bound on work and open files
OFFSETS_SUFFIX = ".offsets"  # an .npz member NAME.offsets: bags of NAME of varying size
# a count per row (8 bytes): the rows of a table, given (--rows) or inferred from its largest index, and of all tables,
# are bounded before a count array is sized by them (one stray index of 2e9 would take 16 GB). Criteo's largest
# table has 40M rows (its 1 TB data set, unhashed).
MAX_COUNTED_ROWS = 1 << 29
BLURRED_CUTOFF = 10  # sampled lookups below which a hot row's count is mostly sampling noise


class ArrayReader:
    """One integer array of a file, read forward in row ranges without loading it: a plain ``.npy``, a member of an
    ``.npz`` (a zip stream; skipping forward reads through it) or a torch tensor (memory-mapped by torch)."""

    def __init__(
        self,
        where: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        fortran: bool,
        stream: IO[bytes] | None,
        data_start: int,
        tensor: Any = None,
    ) -> None:
        self.where = where
        self.shape = shape
        self.dtype = dtype
        self.fortran = fortran
        self.stream = stream
        self.data_start = data_start
        self.tensor = tensor
        if len(shape) not in (1, 2) or shape[0] < 1 or (len(shape) == 2 and shape[1] < 1):
            raise DaydreamError(f"{where}: an index array has shape (inputs,) or (inputs, lookups), not {shape}")
        if dtype.kind not in "iu":
            raise DaydreamError(f"{where}: indices must be integers, not {dtype} (save them as int32 or int64)")
        if fortran and stream is not None and not stream.seekable():
            raise DaydreamError(f"{where}: a Fortran-order array inside an .npz cannot be streamed: save it C-ordered")

    @property
    def inputs(self) -> int:
        return self.shape[0]

    @property
    def width(self) -> int:
        return self.shape[1] if len(self.shape) == 2 else 1

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as an array of shape (stop - start, width)."""
        if self.tensor is not None:
            return np.asarray(self.tensor[start:stop].numpy()).reshape(stop - start, self.width)
        assert self.stream is not None
        item = self.dtype.itemsize
        count = (stop - start) * self.width
        if self.fortran and self.width > 1:  # column after column
            columns = []
            for j in range(self.width):
                self.stream.seek(self.data_start + (j * self.inputs + start) * item)
                columns.append(self._take(stop - start))
            return np.stack(columns, axis=1)
        self.stream.seek(self.data_start + start * self.width * item)
        return self._take(count).reshape(stop - start, self.width)

    def _take(self, count: int) -> np.ndarray:
        assert self.stream is not None
        data = self.stream.read(count * self.dtype.itemsize)
        if len(data) != count * self.dtype.itemsize:
            raise DaydreamError(f"{self.where}: the file ends before its header's {self.shape} array does (truncated?)")
        return np.frombuffer(data, dtype=self.dtype)


def _npy_reader(where: str, stream: IO[bytes], size: int) -> ArrayReader:
    """The array of an .npy stream of ``size`` bytes (a file, or an .npz member's uncompressed size). Its header's
    shape is checked against those bytes before anything is sized by it: a 192-byte header may claim 10^13 rows."""
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, OSError, EOFError, SyntaxError, RecursionError, MemoryError) as exc:
        raise DaydreamError(f"{where}: not a numpy array file ({type(exc).__name__}: {clip(str(exc), 200)})") from None
    start = stream.tell()
    shape = tuple(shape)
    dtype = np.dtype(dtype)
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise DaydreamError(f"{where}: its header's shape {clip(str(shape), 200)} is not a list of sizes")
    claimed = math.prod(shape) * max(dtype.itemsize, 1)
    if claimed > size - start:
        raise DaydreamError(
            f"{where}: its header says {clip(str(shape), 200)} {dtype} ({claimed:,} bytes), but "
            f"{max(size - start, 0):,} bytes follow it: truncated, or not what it claims"
        )
    return ArrayReader(where, shape, dtype, bool(fortran), stream, start)


def _torch_readers(path: Path) -> list[tuple[str, ArrayReader]]:
    try:
        import torch
    except ImportError:
        raise DaydreamError(
            f"{path}: reading .pt files needs torch (pip install torch), or save the indices with numpy"
        ) from None
    try:
        # by its path (torch memory-maps it: tensors of any size), now that the checked opener has vouched for it
        obj = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except Exception as exc:  # torch raises many kinds for a file that is not its format
        raise DaydreamError(f"{path}: not a torch file of index tensors ({type(exc).__name__}: {exc})") from None
    items = list(obj.items()) if isinstance(obj, dict) else [(path.stem, obj)]
    out = []
    for name, tensor in items:
        where = f"{path}:{name}"
        if not isinstance(tensor, torch.Tensor):
            raise DaydreamError(f"{where}: not a tensor but {type(tensor).__name__}")
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            raise DaydreamError(f"{where}: indices must be integers, not {tensor.dtype} (save them as int32 or int64)")
        dtype = np.dtype(str(tensor.dtype).removeprefix("torch."))
        out.append((str(name), ArrayReader(where, tuple(tensor.shape), dtype, False, None, 0, tensor=tensor)))
    return out


class TableSource(msgspec.Struct):
    """A table: where its lookups are in which reader (a column of it, or all of it), and, for bags of varying size,
    the reader of their offsets (``nn.EmbeddingBag``'s: where each input's bag starts in the flat indices)."""

    name: str
    reader: Any  # ArrayReader
    column: int | None  # None: the reader's whole rows are this table's lookups (one or a bag per input)
    offsets: Any = None  # ArrayReader of one start per input, or None

    @property
    def inputs(self) -> int:
        return self.offsets.inputs if self.offsets is not None else self.reader.inputs


class Lookups(NamedTuple):
    """One table's lookups for a block of inputs: the indices, flat, and where each input's start (``bounds``, one
    more than the inputs: varying bags), or ``width`` lookups per input (fixed bags)."""

    values: np.ndarray
    bounds: np.ndarray | None
    width: int

    def input_at(self, position: int) -> int:
        """The input (within the block) that the ``position``-th lookup belongs to."""
        if self.bounds is None:
            return position // self.width
        return int(np.searchsorted(self.bounds, position, side="right")) - 1

    def all_in(self, mask: np.ndarray) -> np.ndarray:
        """Per input: whether every lookup hits a row of ``mask`` (an empty bag does)."""
        values = self.values
        if values.size and values.max() >= mask.size:  # rows never counted (past the largest index seen): cold
            hit = np.zeros(values.size, dtype=bool)
            inside = values < mask.size
            hit[inside] = mask[values[inside]]
        else:
            hit = mask[values]
        if self.bounds is None:
            return hit.reshape(-1, self.width).all(axis=1)
        misses = np.concatenate(
            [[0], np.cumsum(~hit)]
        )  # reduceat mishandles empty bags; differences of a cumsum do not
        return misses[self.bounds[1:]] == misses[self.bounds[:-1]]


def open_sources(
    paths: Sequence[str | os.PathLike[str]], layout: str = "columns"
) -> tuple[list[TableSource], list[IO[bytes]]]:
    """The tables of ``paths`` and the files held open for them (the caller closes them)."""
    if layout not in ("columns", "bags"):
        raise DaydreamError(f"layout is 'columns' or 'bags', not {layout!r}")
    tables: list[TableSource] = []
    handles: list[IO[bytes]] = []
    for raw in paths:
        path = Path(raw)
        suffix = path.suffix.lower()
        if suffix in (".npy", ".npz", ".pt", ".pth"):
            f = open_input(path, "file of index data", expected="give index data as .npy, .npz or .pt files")
            handles.append(f)
        if suffix == ".npy":
            reader = _npy_reader(str(path), f, os.fstat(f.fileno()).st_size)
            if reader.width > 1 and layout == "columns" and len(tables) + reader.width > MAX_SOURCES:
                raise DaydreamError(
                    f"{path}: {reader.width:,} columns, each a table: at most {MAX_SOURCES:,} tables in all"
                )
            if reader.width > 1 and layout == "columns":
                tables += [TableSource(f"{path.stem}[{j}]", reader, j) for j in range(reader.width)]
            else:
                tables.append(TableSource(path.stem, reader, None))
        elif suffix == ".npz":
            try:
                archive = zipfile.ZipFile(f)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
                raise DaydreamError(f"{path}: not an .npz archive ({exc})") from None
            handles.append(archive)  # type: ignore[arg-type]
            readers: dict[str, ArrayReader] = {}
            members = archive.infolist()
            if len(tables) + len(members) > MAX_SOURCES:
                raise DaydreamError(
                    f"{path}: {len(members):,} members, each a table: at most {MAX_SOURCES:,} tables in all"
                )
            for member in members:
                try:
                    stream = archive.open(member)
                except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, ValueError) as exc:
                    raise DaydreamError(f"{path}:{member.filename}: cannot be read ({exc})") from None
                handles.append(stream)
                readers[member.filename.removesuffix(".npy")] = _npy_reader(
                    f"{path}:{member.filename}", stream, member.file_size
                )
            for name, reader in readers.items():
                if name.endswith(OFFSETS_SUFFIX):
                    if name.removesuffix(OFFSETS_SUFFIX) not in readers:
                        raise DaydreamError(
                            f"{path}: {name} has no table {name.removesuffix(OFFSETS_SUFFIX)!r} beside it"
                        )
                    continue
                offsets = readers.get(name + OFFSETS_SUFFIX)
                if offsets is not None and (len(reader.shape) != 1 or len(offsets.shape) != 1):
                    raise DaydreamError(
                        f"{path}: {name} with {name}{OFFSETS_SUFFIX}: both must be one-dimensional "
                        f"(flat indices and one offset per input), not {reader.shape} and {offsets.shape}"
                    )
                tables.append(TableSource(name, reader, None, offsets))
        elif suffix in (".pt", ".pth"):
            tables += [TableSource(name, reader, None) for name, reader in _torch_readers(path)]
        elif path.name.endswith(".daydream.json"):
            # the recorder counts lookups in its warm-up steps only: a few batches, far too few inputs for a hot set
            raise DaydreamError(
                f"{path}: a recording's sidecar holds the lookups of a few warm-up batches (its "
                "embeddings' hot_share), too few inputs to find hot rows: profile the training set's "
                "indices (.npy, .npz or .pt)"
            )
        else:
            raise DaydreamError(f"{path}: give index data as .npy, .npz or .pt (torch.save) files")
        if len(tables) > MAX_SOURCES:
            raise DaydreamError(f"more than {MAX_SOURCES} tables in {len(paths)} files")
    if not tables:
        raise DaydreamError("no index arrays in " + ", ".join(map(str, paths)))
    inputs = {t.inputs for t in tables}
    if len(inputs) > 1:
        sizes = ", ".join(f"{t.name}: {t.inputs:,}" for t in tables[:8])
        raise DaydreamError(
            f"the tables hold different numbers of inputs ({sizes}): input i must be row i of every table"
        )
    names = [t.name for t in tables]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise DaydreamError(f"two tables are named {dup!r}: give each file its own name")
    return tables, handles


class TableProfile(msgspec.Struct):
    name: str
    rows: int
    row_bytes: int
    pooling: float  # lookups per input
    hot_rows: float  # the estimate (exact: the count)
    hot_rows_high: float  # the upper end of its interval: what the budget is held to
    hot_bytes: float
    hot_access_fraction: float  # of the held-out inputs' lookups (exact: all lookups), those into hot rows
    small: bool  # under 1 MB: hot outright
    rows_drawn: int  # rows the estimator looked at (its last threshold)


class EmbeddingProfile(msgspec.Struct):
    __repr__ = brief_repr  # one screen, whatever it holds
    files: list[str]
    method: str  # "estimate" or "exact"
    inputs: int
    inputs_read: int  # to count lookups
    inputs_classified: int  # to find the hot inputs
    sample_fraction: float
    budget_bytes: float
    threshold: float  # t: a row is hot when it takes at least t of its table's lookups
    confidence: float
    hot_bytes: float
    hot_bytes_high: float
    hot_input_fraction: float  # inputs whose every lookup is hot
    batch: int | None
    hot_batches: int | None  # an epoch's all-hot mini-batches with FAE's input classification
    cold_batches: int | None
    hot_batch_fraction: float | None  # hot_batches / all batches
    random_hot_batch_fraction: float | None  # the same without it: p ** B
    tables: list[TableProfile]
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def _row_option(values: Sequence[int] | int | None, n: int, what: str) -> list[int | None]:
    if values is None:
        return [None] * n
    vals = [values] if isinstance(values, int) else list(values)
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise DaydreamError(f"{what}: give one value for all {n} tables or one per table, not {len(vals)}")
    for v in vals:
        if v < 1:
            raise DaydreamError(f"{what}: {v} is not a positive number")
        if what == "rows" and v > MAX_TABLE_ROWS:
            raise DaydreamError(
                f"rows: {v:,}: daydream counts each row's lookups (8 bytes a row), for tables of at "
                f"most {MAX_TABLE_ROWS:,} rows"
            )
    if what == "rows" and sum(vals) > MAX_COUNTED_ROWS:
        raise DaydreamError(
            f"rows: {sum(vals):,} in all: daydream counts at most {MAX_COUNTED_ROWS:,} rows over all tables"
        )
    return list(vals)


def row_bytes_of(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype.lower()]
    except KeyError:
        raise DaydreamError(f"dtype {dtype!r}: one of {', '.join(sorted(DTYPE_BYTES))}") from None


def _plan(inputs: int, sample: float, rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The input ranges to read: a random ``sample`` of the units to count lookups on, and as many other units to
    classify inputs on (held out: an input among those counted made its own rows look hot, so counting and
    classifying the same inputs overstates the hot inputs; where too few units are left, all that are). With
    ``sample`` 1 both are every input: the hot set is then that of all inputs, and classifying them is exact."""
    units = math.ceil(inputs / UNIT_INPUTS)
    if sample >= 1:
        return _ranges(np.arange(units), inputs), _ranges(np.arange(units), inputs)
    order = rng.permutation(units)
    n = max(1, round(sample * units))
    held_out = order[n : 2 * n] if units > n else order[:n]
    return _ranges(np.sort(order[:n]), inputs), _ranges(np.sort(held_out), inputs)


def _ranges(units: np.ndarray, inputs: int) -> list[tuple[int, int]]:
    """Units of UNIT_INPUTS inputs as input ranges, merged where consecutive."""
    ranges: list[tuple[int, int]] = []
    for u in units.tolist():
        start, stop = u * UNIT_INPUTS, min((u + 1) * UNIT_INPUTS, inputs)
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], stop)
        else:
            ranges.append((start, stop))
    return ranges


def _blocks(tables: Sequence[TableSource], ranges: Sequence[tuple[int, int]]) -> Any:
    """Per block of inputs: (start, stop, each table's :class:`Lookups`); a reader shared by tables read once."""
    width = 0.0  # bytes per input, over the readers
    for t in {id(t.reader): t for t in tables}.values():
        if t.offsets is None:
            width += t.reader.width * t.reader.dtype.itemsize
        else:  # bags of varying size: their mean size
            width += t.offsets.dtype.itemsize + t.reader.inputs / t.inputs * t.reader.dtype.itemsize
    step = max(1, int(READ_BYTES // max(width, 1)))
    for lo, hi in ranges:
        for start in range(lo, hi, step):
            stop = min(start + step, hi)
            cache: dict[int, np.ndarray] = {}
            out = []
            for t in tables:
                if t.offsets is not None:
                    out.append(_bags(t, start, stop))
                    continue
                block = cache.get(id(t.reader))
                if block is None:
                    block = cache[id(t.reader)] = t.reader.read(start, stop)
                if t.column is not None:
                    out.append(Lookups(block[:, t.column], None, 1))
                else:
                    out.append(Lookups(block.reshape(-1), None, block.shape[1]))
            yield start, stop, out


def _bags(table: TableSource, start: int, stop: int) -> Lookups:
    """Inputs [start, stop) of a table of varying bags: their offsets, then the flat indices they span."""
    total = table.reader.inputs  # lookups in all
    starts = table.offsets.read(start, min(stop + 1, table.inputs)).reshape(-1).astype(np.int64)
    bounds = starts if stop < table.inputs else np.append(starts, total)
    if bounds[0] < 0 or bounds[-1] > total or np.any(np.diff(bounds) < 0):
        raise DaydreamError(
            f"{table.name}: the offsets of inputs {start:,}-{stop - 1:,} are not rising starts within "
            f"its {total:,} indices ({table.offsets.where})"
        )
    values = (
        table.reader.read(int(bounds[0]), int(bounds[-1])).reshape(-1)
        if bounds[-1] > bounds[0]
        else np.empty(0, np.int64)
    )
    return Lookups(values, bounds - bounds[0], 0)


def _check(table: TableSource, block: Lookups, start: int, rows: int | None) -> None:
    values = block.values
    if not values.size:
        return
    low = values.min()
    if low < 0:
        at = block.input_at(int(np.argmax(values < 0))) + start
        raise DaydreamError(f"{table.name}: negative index {int(low)} at input {at:,} ({table.reader.where})")
    high = values.max()
    if rows is None and high >= MAX_TABLE_ROWS:  # no row count given: the largest index sizes the count array
        at = block.input_at(int(np.argmax(values >= MAX_TABLE_ROWS))) + start
        raise DaydreamError(
            f"{table.name}: index {int(high):,} at input {at:,}: daydream counts each row's lookups, for "
            f"tables of at most {MAX_TABLE_ROWS:,} rows; an index past that is wrong data, or a table "
            f"too large to profile ({table.reader.where})"
        )
    if rows is not None and high >= rows:
        at = block.input_at(int(np.argmax(values >= rows))) + start
        raise DaydreamError(
            f"{table.name}: index {int(high)} at input {at:,} is out of range for {rows:,} rows ({table.reader.where})"
        )


def _add_counts(counts: np.ndarray, flat: np.ndarray) -> np.ndarray:
    if flat.size * 8 < counts.size:  # a small block into a big table: no count array the table's size per block
        rows, times = np.unique(flat, return_counts=True)
        if rows.size and rows[-1] >= counts.size:
            counts = np.concatenate([counts, np.zeros(int(rows[-1]) + 1 - counts.size, dtype=counts.dtype)])
        counts[rows] += times
        return counts
    add = np.bincount(flat, minlength=counts.size)
    if add.size > counts.size:
        counts = np.concatenate([counts, np.zeros(add.size - counts.size, dtype=counts.dtype)])
    counts += add
    return counts


class ProfileOptions(msgspec.Struct, frozen=True):
    """How :func:`profile` reads and counts (the command's options past the budget, dims and batch): ``dtype`` of the
    rows; ``sample``: the share of inputs counted; ``rows``: each table's row count (one for all or one per table;
    checked; default: its largest index + 1); ``layout``: "columns" (an input per row, a table per column) or "bags";
    ``exact``: every input read and every row counted; ``confidence`` of the estimator's bound; ``seed`` of its
    draws; ``classify_all``: the hot inputs counted over every input (FAE's classifier's pass) rather than estimated
    on a held-out sample."""

    dtype: str = "fp32"
    sample: float = 0.05
    rows: Sequence[int] | int | None = None
    layout: str = "columns"
    exact: bool = False
    confidence: float = hr.CONFIDENCE
    seed: int = 0
    classify_all: bool = False


def profile(
    paths: Sequence[str | os.PathLike[str]],
    budget_bytes: float,
    dim: Sequence[int] | int,
    batch: int | None = None,
    options: ProfileOptions | None = None,
) -> EmbeddingProfile:
    """Profile the index data in ``paths`` (module docstring): the hot rows under ``budget_bytes`` with rows of
    ``dim`` elements (one dim for all tables or one per table), the hot inputs and mini-batches of ``batch``, read
    and counted as ``options`` say (:class:`ProfileOptions`; default: a 5% sample of FP32 rows)."""
    o = options or ProfileOptions()
    dtype, sample, rows, layout, exact, confidence, seed, classify_all = (
        o.dtype,
        o.sample,
        o.rows,
        o.layout,
        o.exact,
        o.confidence,
        o.seed,
        o.classify_all,
    )
    if not 0 < sample <= 1:
        raise DaydreamError(f"sample: a fraction of the inputs in (0, 1] (e.g. 5%), not {sample:g}")
    if not 0 <= seed < 2**63:
        raise DaydreamError(f"seed: a whole number from 0 to 2^63 - 1, not {seed}")
    if not 0.5 <= confidence < 1:
        raise DaydreamError(f"confidence: between 0.5 and 1 (e.g. 0.999), not {confidence:g}")
    if batch is not None and batch < 1:
        raise DaydreamError(f"batch: at least 1 input, not {batch}")
    if not math.isfinite(budget_bytes) or budget_bytes <= 0:
        raise DaydreamError(f"budget: a positive size (e.g. 512MB), not {budget_bytes:g}")
    element = row_bytes_of(dtype)
    tables, handles = open_sources(paths, layout)
    try:
        with progress.counted("reading indices") as update:
            return _profile(
                paths,
                tables,
                budget_bytes,
                dim,
                element,
                sample,
                batch,
                rows,
                exact,
                confidence,
                seed,
                classify_all,
                update,
            )
    finally:
        for h in reversed(handles):
            h.close()


def _profile(
    paths: Sequence[str | os.PathLike[str]],
    tables: list[TableSource],
    budget_bytes: float,
    dim: Sequence[int] | int,
    element: int,
    sample: float,
    batch: int | None,
    rows: Sequence[int] | int | None,
    exact: bool,
    confidence: float,
    seed: int,
    classify_all: bool,
    update: Callable[[float, float], None],
) -> EmbeddingProfile:
    """:func:`profile` on open sources, saying how far it is through ``update(done, total)``."""
    dims = _row_option(dim, len(tables), "dim")
    row_counts = _row_option(rows, len(tables), "rows")
    smallest_row = min(int(d or 0) for d in dims) * element
    if budget_bytes < smallest_row:  # before reading anything
        raise DaydreamError(f"the budget ({budget_bytes:,.0f} bytes) is smaller than one row ({smallest_row:,} bytes)")
    rng = np.random.default_rng(seed)
    inputs = tables[0].inputs
    ranges, classify = _plan(inputs, 1.0 if exact else sample, rng)
    if classify_all:  # FAE's input classifier: one pass over every input
        classify = _ranges(np.arange(math.ceil(inputs / UNIT_INPUTS)), inputs)
    to_read = sum(hi - lo for lo, hi in ranges)
    to_classify = sum(hi - lo for lo, hi in classify)
    total = to_read + to_classify
    done = 0
    counts = [np.zeros(r or 0, dtype=np.int64) for r in row_counts]
    lookups = [0] * len(tables)
    for start, stop, blocks in _blocks(tables, ranges):
        for i, (table, block) in enumerate(zip(tables, blocks)):
            _check(table, block, start, row_counts[i])
            counts[i] = _add_counts(counts[i], block.values)
            counted = sum(c.size for c in counts)
            if counted > MAX_COUNTED_ROWS:
                raise DaydreamError(
                    f"the tables' largest indices make {counted:,} rows to count: daydream counts at "
                    f"most {MAX_COUNTED_ROWS:,} over all tables (give --rows to check the indices)"
                )
            lookups[i] += block.values.size
        done += stop - start
        update(done, total)
    warnings: list[str] = []
    table_counts = []
    for table, c, d, r in zip(tables, counts, dims, row_counts):
        if r is None and c.size == 0:
            c = np.zeros(1, dtype=np.int64)
        table_counts.append(hr.TableCounts(table.name, c, int(d) * element))  # type: ignore[arg-type]
    chosen = hr.choose_threshold(
        table_counts, budget_bytes, np.random.default_rng(seed + 1), exact=exact, confidence=confidence
    )
    if chosen.unranked_room and not exact:
        # the sample's every row is hot with budget to spare: rows no sampled input looked up would be hot too
        # (counting everything says which), so the estimate would leave room unused and hot inputs uncounted
        exact_profile = _profile(
            paths, tables, budget_bytes, dim, element, 1.0, batch, rows, True, confidence, seed, classify_all, update
        )
        note = (
            f"every row the {to_read / inputs:.1%} sample looked up fits the budget with "
            f"{size_text(budget_bytes - chosen.bytes_high)} to spare, and rows it never saw cannot be ranked: "
            "every input was counted instead (as --exact)"
        )
        return msgspec.structs.replace(exact_profile, warnings=[note, *exact_profile.warnings])
    masks = [hr.hot_mask(t, chosen.threshold) for t in table_counts]
    hot_inputs = 0
    # the lookups into hot rows, counted on the held-out inputs: on the counted ones the share is in-sample (their
    # rows were chosen for being looked up there)
    hot_lookups = [0] * len(tables)
    held_lookups = [0] * len(tables)
    for start, stop, blocks in _blocks(tables, classify):
        hot = np.ones(stop - start, dtype=bool)
        for i, (mask, block) in enumerate(zip(masks, blocks)):
            _check(tables[i], block, start, row_counts[i])
            hot &= block.all_in(mask)
            inside = block.values[block.values < mask.size]
            hot_lookups[i] += int(np.count_nonzero(mask[inside]))
            held_lookups[i] += block.values.size
        hot_inputs += int(hot.sum())
        done += stop - start
        update(done, total)
    blurred = [
        t for t in table_counts if not t.small and t.accesses and hr.cutoff(t, chosen.threshold) < BLURRED_CUTOFF
    ]
    if blurred and not exact and sample < 1 and chosen.threshold > 0:
        # a row's sampled count is about Poisson: under 10 lookups, +-30% or more, so the hot set's edge is noise
        names = ", ".join(t.name for t in blurred[:6]) + (f" and {len(blurred) - 6} more" if len(blurred) > 6 else "")
        least = min(hr.cutoff(t, chosen.threshold) for t in blurred)
        warnings.append(
            f"{names}: a hot row needs as few as {least:.1f} lookups in the {to_read / inputs:.1%} of the "
            "inputs read, so rows near the cutoff are told apart by chance; a larger sample sharpens "
            "the hot set"
        )
    if row_counts[0] is None:
        warnings.append("row counts taken as each table's largest index + 1 (give --rows to check the indices)")
    p = hot_inputs / to_classify
    table_rows = [
        TableProfile(
            name=t.name,
            rows=t.rows,
            row_bytes=t.row_bytes,
            pooling=lookups[i] / to_read,
            hot_rows=est.estimate,
            hot_rows_high=est.high,
            hot_bytes=est.estimate * t.row_bytes,
            hot_access_fraction=(
                hot_lookups[i] / held_lookups[i] if held_lookups[i] else hr.hot_access_fraction(t, masks[i])
            ),
            small=t.small,
            rows_drawn=est.drawn,
        )
        for i, (t, est) in enumerate(zip(table_counts, chosen.tables))
    ]
    hot_batches = cold_batches = None
    fae_fraction = random_fraction = None
    if batch is not None:
        hot_batches, cold_batches = hr.fae_batches(inputs, round(p * inputs), batch)
        fae_fraction = hr.fae_batch_hot_fraction(inputs, round(p * inputs), batch)
        random_fraction = hr.random_batch_hot_fraction(p, batch)
    return EmbeddingProfile(
        files=[str(p) for p in paths],
        method="exact" if exact else "estimate",
        inputs=inputs,
        inputs_read=to_read,
        inputs_classified=to_classify,
        sample_fraction=to_read / inputs,
        budget_bytes=float(budget_bytes),
        threshold=chosen.threshold,
        confidence=confidence,
        hot_bytes=chosen.bytes_estimate,
        hot_bytes_high=chosen.bytes_high,
        hot_input_fraction=p,
        batch=batch,
        hot_batches=hot_batches,
        cold_batches=cold_batches,
        hot_batch_fraction=fae_fraction,
        random_hot_batch_fraction=random_fraction,
        tables=table_rows,
        warnings=warnings,
    )


def size_text(nbytes: float) -> str:
    """Bytes in decimal multiples, three digits (``1.21 MB``)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def parse_size(text: str, what: str = "--budget") -> float:
    """``512MB``, ``1.5GiB``, ``4096`` (bytes) as bytes."""
    from daydream.dsl.parse import BYTE_UNITS

    units = {unit.lower(): scale for unit, scale in BYTE_UNITS.items()}  # 512mb, 300kB: no bits here to confuse
    t = text.strip()
    number = t.rstrip("".join({c for unit in BYTE_UNITS for c in unit + unit.lower()})).strip()
    unit = t[len(number) :].strip().lower() or "b"
    try:
        value = input_number(number) * units[unit]
    except (ValueError, KeyError):
        raise DaydreamError(f"{what} {text!r}: give a size such as 512MB or 1GiB ({', '.join(BYTE_UNITS)})") from None
    if not math.isfinite(value) or value <= 0:
        raise DaydreamError(f"{what} {text!r}: give a positive size, e.g. 512MB")
    return value


def parse_fraction(text: str, what: str = "--sample") -> float:
    """``5%`` or ``0.05`` as 0.05."""
    t = text.strip()
    try:
        value = input_number(t[:-1]) / 100 if t.endswith("%") else input_number(t)
    except ValueError:
        raise DaydreamError(f"{what} {text!r}: give a share such as 5% or 0.05") from None
    if not 0 < value <= 1:
        raise DaydreamError(f"{what} {text!r}: give a share above 0 and at most 100%")
    return value


def parse_counts(text: str, what: str) -> list[int]:
    """``64`` or ``64,32,16`` (one per table) as whole numbers."""
    try:
        values = [int(input_number(part, whole=True)) for part in text.split(",")]
    except ValueError as exc:
        raise DaydreamError(
            f"{what} {clip(text, 100)!r}: give a whole number, or one per table separated by commas ({exc})"
        ) from None
    return values
