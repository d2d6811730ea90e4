"""Reading a trace file's text within limits, and decoding it: how :func:`~daydream.trace.load.load_trace`, the
columnar scanner (:mod:`daydream.trace.columns`), the execution trace (:mod:`daydream.trace.et`) and the recording
sidecar (:mod:`daydream.trace.recording`) read their files, below all of them.

Whatever a file holds, reading it either succeeds or raises :class:`TraceError` with a one-line message naming the
file (and the event, field or byte offset where known): never a traceback, a hang, or memory without bound. The
limits that guarantee it (docs/graph.md, "Limits"):

- ``MAX_TRACE_BYTES`` (4 GiB): the JSON text read, after decompression; four times the largest trace benchmarked
  (1M events, about 300 MB of JSON), which takes about a GB of memory to simulate. Longer text is refused as it is
  read ("is more than N bytes", "decompresses to more than N bytes").
- ``MAX_LEADING_WHITESPACE`` (64 MiB): leading whitespace is dropped as it is read, so a file of whitespace costs no
  memory, and after this much of it the file is refused ("empty file (no events)"), so it costs little time.
- ``MAX_GZIP_RATIO`` (256) and ``GZIP_RATIO_FLOOR`` (64 MiB): a compressed file (gzip or xz) is decompressed as a
  stream and refused once its text passes 256 times the file's size (or 64 MiB, whichever is more). Real traces
  compress 10-50 times; a gzip bomb (9 MB that expand to 2 GB) is refused after a second or two, in bounded memory.
- ``MAX_XZ_MEMORY`` (128 MiB): what an xz file's decoder may take (its dictionary, which the file states: xz's
  largest preset needs 65 MiB); a file that asks for more is refused before it is decoded.
- Only regular files are read: a FIFO, a device (``/dev/zero``), a socket or a directory is refused before it is
  opened (and the file is opened non-blocking, so a FIFO swapped in cannot block); a symlink loop is named as one.
- The events are decoded a batch (``BATCH_BYTES`` of text) at a time as the file is read
  (:mod:`daydream.trace.batches`); text that cannot be cut into batches that decode is read and decoded whole, for
  the decoder's messages. ``MAX_EVENTS`` (2**25): the events ``traceEvents`` may hold; a kept event costs about 450
  bytes, so at most ~15 GB.
- ``MAX_JSON_VALUES`` (2**27): the JSON values text decoded at once may hold, counted (conservatively, as its ``,``,
  ``{`` and ``[`` bytes) before it is decoded: the decoded text costs memory per value (50-100 bytes), so a file of
  tiny values (``{},{},...``) cannot decode into tens of GB. 1M events hold about 13M.
- ``MAX_NESTING`` (64): how deeply the values the loader keeps may nest (an op's ``Input Dims``, ``Input type``,
  ``distributedInfo``, an execution trace's shapes and types, the recording sidecar); real traces nest 3 or 4
  levels. A value nested deeper is refused naming the event and field, so nothing downstream (printing, comparing,
  exporting) can run out of recursion depth; text nested too deeply to decode at all (about 900 levels, anywhere)
  is refused with the byte offset where it first nests deeper than the limit.
- ``MAX_SIDECAR_BYTES`` (256 MiB): the recording sidecar next to a trace (a few hundred kB for a large model).
- ``MAX_TIME_US`` (1e18 us, 31,700 years): a complete event whose ``ts`` or ``dur`` lies beyond it is skipped like
  one without a valid ``ts``/``dur`` (with a warning), so that traced times and their sums stay finite.

Invalid UTF-8 (a stray 0xFF in a name) is read as U+FFFD, with a warning naming the byte offset of the first: the
trace is still usable, only that name is changed. An empty ``traceEvents`` (or a bare ``[]``) is "no events".
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import gzip
import lzma
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from daydream import progress
from daydream.errors import TraceError, did_you_mean
from daydream.files import FILE_KINDS, open_input
from daydream.memory_limit import describe_limit, memory_limit
from daydream.trace.batches import EventBatches, Unsplittable
from daydream.trace.job import rank_from_name, rank_trace_files
from daydream.trace.schema import EVENTS_DECODER, TRACE_DECODER, TraceFile
from daydream.workers import read_ahead

try:  # ISA-L's inflate: the same stream API as zlib's, 4-5x faster (a 1M-event trace's 20 MB: 0.10 s against 0.45 s)
    from isal import isal_zlib as _inflate_module

    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate_module.error)
except ImportError:  # a platform isal ships no wheel for (pyproject.toml): zlib, slower and the same
    _inflate_module = zlib  # type: ignore[no-redef]
    _INFLATE_ERRORS = (zlib.error,)


GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"

# Limits on what a trace file can make the loader do (the module docstring says why each is what it is).
MAX_TRACE_BYTES = 4 << 30  # bytes of JSON text read, after decompression
MAX_JSON_VALUES = 1 << 27  # JSON values in that text (counted as its ',', '{' and '[' bytes)
MAX_NESTING = 64  # levels of nesting of a value the loader keeps
MAX_TIME_US = 1e18  # |ts| and dur of a complete event, in microseconds
MAX_GZIP_RATIO = 256  # a compressed file (gzip, xz) may expand this many times its size (real traces: 10-20), ...
GZIP_RATIO_FLOOR = 64 << 20  # ... or to this many bytes, whichever is more
MAX_XZ_MEMORY = 128 << 20  # an xz file's decoder (its dictionary and state): xz -9 needs 65 MiB
MAX_LEADING_WHITESPACE = 64 << 20  # whitespace before the JSON text starts: past it, the file holds no events
MAX_SIDECAR_BYTES = 256 << 20  # the recording sidecar: a few hundred kB for a large model

MAX_EVENTS = 1 << 25  # events in traceEvents (a kept event costs about 450 bytes: at most ~15 GB)
# What a trace's event costs at the peak of `daydream simulate`, loaded, built and simulated, on top of its text
# (measured by bench/bench_limits.py memory, docs/limits.md: 1,250 bytes on 2M tiny events, about 1,300 on real
# traces), with its text and BASE_BYTES: a trace's text is refused as it is read once its events so far would pass
# memory_limit()
BYTES_PER_EVENT = 1_400
BASE_BYTES = 128 << 20  # the interpreter and what it imports, before any trace (0.10 GiB at the peak of a small one)

_READ_CHUNK = 4 << 20  # bytes read (or decompressed) at a time
_READ_COMPRESSED = 4 << 20  # bytes of a compressed file read at a time
BATCH_BYTES = 4 << 20  # text decoded at a time (about 20k events)
MAX_PENDING_BYTES = 64 << 20  # text held without an event boundary confirmed: past it, the text is read whole
_EMPTY_TRACE = "empty file (no events), expected Kineto trace JSON"
_JSON_SPACE = b" \t\n\r"
_FIRST_BYTE = re.compile(rb"[^ \t\n\r]")
# a JSON string (skipped whole, so brackets inside it do not count) or a bracket: for the offset of deep nesting
_NESTING_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_NESTING_SCAN_BYTES = 64 << 20  # the offset of too-deep nesting is searched for in this many bytes at most
T = TypeVar("T")


def read_trace_bytes(path: str | os.PathLike[str], limit: int | None = None) -> bytearray:
    """The JSON text of a trace file, decompressed if it is gzip or xz, without its leading whitespace.

    Reads regular files only, at most ``limit`` bytes of text (default ``MAX_TRACE_BYTES``; a compressed file also at
    most ``MAX_GZIP_RATIO`` times its size), and refuses text that cannot be JSON (its first byte is not ``{`` or ``[``)
    as soon as it is read. :class:`TraceError` for anything else.
    """
    p = os.fspath(path)
    cap = MAX_TRACE_BYTES if limit is None else limit
    return read_json_text(p, cap, b"{[", _EMPTY_TRACE)


def read_json_text(p: str, limit: int, starts: bytes, empty: str) -> bytearray:
    """The whole text of :func:`_text_chunks`, refused past MAX_JSON_VALUES values as it is read."""
    text = bytearray()
    values = -1  # counted once the text is long enough to hold too many: each value takes a byte
    for chunk in _text_chunks(p, limit, starts, empty):
        text += chunk
        if values >= 0:
            values += values_in(chunk)
        elif len(text) > MAX_JSON_VALUES:
            values = values_in(text)
        if values > MAX_JSON_VALUES:
            raise TraceError(
                f"{p}: holds more than {MAX_JSON_VALUES:,} JSON values; daydream reads traces of at most that many",
                path=p,
            )
    return text


def _text_chunks(p: str, limit: int, starts: bytes, empty: str) -> Iterator[bytes]:
    """The JSON text of the file ``p`` a chunk at a time, decompressed if it is gzip or xz (known by their first
    bytes, whatever the name), leading whitespace dropped, with progress shown as the file is read.
    :class:`TraceError` as soon as what is read cannot be a trace: past ``limit`` bytes of text (a compressed file:
    past MAX_GZIP_RATIO times its size), a first byte not in ``starts``, no text (``empty`` says what was expected),
    an unreadable or corrupt file."""
    _check_regular_file(p)  # first: a missing file's message names the closest files and ranks
    with open_input(p, "trace file", TraceError, "daydream reads trace files only") as fh:
        kind = "gzip"
        try:
            st = os.fstat(fh.fileno())
            head = fh.read(len(XZ_MAGIC))
            kind = "gzip" if head[:2] == GZIP_MAGIC else "xz" if head == XZ_MAGIC else ""
            fh.seek(0)
            with progress.task(f"reading {p}", total=st.st_size) as advance:  # bytes of the file, compressed or not
                if not kind:
                    too_large = f"{p}: is more than {limit:,} bytes; daydream reads traces up to that size"
                    chunks = iter(lambda: fh.read(_READ_CHUNK), b"")
                else:
                    bomb = max(GZIP_RATIO_FLOOR, MAX_GZIP_RATIO * st.st_size)
                    if bomb < limit:
                        too_large = (
                            f"{p}: decompresses to more than {bomb:,} bytes, over {MAX_GZIP_RATIO} times its "
                            f"{st.st_size:,} bytes: not a trace (a {kind} bomb?)"
                        )
                        limit = bomb
                    else:
                        too_large = (
                            f"{p}: decompresses to more than {limit:,} bytes; daydream reads traces up to that size"
                        )
                    chunks = _gunzip_chunks(fh) if kind == "gzip" else _unxz_chunks(fh)
                yield from _checked(p, _read_so_far(chunks, fh, advance), limit, too_large, starts, empty)
        except OSError as exc:
            raise TraceError(f"{p}: cannot read: {exc.strerror or exc}", path=p) from None
        except lzma.LZMAError as exc:
            if "memory" in str(exc).lower():
                raise TraceError(
                    f"{p}: its xz data needs more than {MAX_XZ_MEMORY >> 20} MiB to decode (xz's largest preset needs "
                    f"65 MiB): not a trace daydream reads; recompress it with `xz -9` or less",
                    path=p,
                ) from None
            raise TraceError(f"{p}: corrupt or truncated xz data ({exc})", path=p) from None
        except (EOFError, gzip.BadGzipFile, *_INFLATE_ERRORS) as exc:
            raise TraceError(f"{p}: corrupt or truncated {kind} data ({exc})", path=p) from None


def _check_regular_file(p: str) -> None:
    """Refuse, before opening it, a path that is missing, a directory, or not a regular file (a FIFO would block
    the open, a device like /dev/zero never ends)."""
    try:
        st = os.stat(p)
    except OSError as exc:
        raise TraceError(_os_message(p, exc), path=p) from None
    except ValueError:  # an embedded NUL byte
        raise TraceError(f"{p!r}: not a valid file name", path=p) from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{p}: is a directory, expected a trace file", path=p)
    if not stat.S_ISREG(st.st_mode):
        kind = FILE_KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise TraceError(f"{p}: is {kind}, not a regular file; daydream reads trace files only", path=p)


def _os_message(p: str, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"{p}: no such file" + missing_path_hint(p)
    if exc.errno == errno.ELOOP:
        return f"{p}: too many levels of symbolic links (a symlink loop?)"
    if exc.errno == errno.ENOTDIR:
        return f"{p}: no such file (a part of the path is not a directory)"
    return f"{p}: cannot read: {exc.strerror or exc}"


def missing_path_hint(path: str | os.PathLike[str]) -> str:
    """For a trace path that does not exist (``dlrm8/rank9.json.gz``, ``dlrm8x``): the closest names in its folder
    and, where that folder holds a job's rank traces, which ranks it holds; "" when there is nothing to say."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        names = sorted(e.name for e in parent.iterdir())[:10_000]  # a huge folder: enough of it to suggest from
    except OSError:
        return ""
    try:
        found = rank_trace_files(parent)
    except TraceError:
        found = []
    numbers = [rank_from_name(f) for f in found]
    if len(found) > 1 and None not in numbers and len(set(numbers)) == len(numbers):
        # a job's folder (rank0.json.gz, rank1.json.gz...): which ranks it holds, and that the folder is the job; the
        # file of the rank the name says (rnk0.json: rank0.json.gz), and none for a rank the folder lacks (rank9)
        have = (
            f"{parent} holds the traces of ranks {min(numbers)}-{max(numbers)} ({Path(found[0]).name} ..."
            f" {Path(found[-1]).name})"
        )
        rank = rank_from_name(p)
        hint = did_you_mean(p.name, names) if rank is None else None
        if rank in numbers:
            hint = f"did you mean '{Path(found[numbers.index(rank)]).name}'?"
        return "; " + "; ".join(x for x in (hint, f"{have}: give the folder to simulate the job") if x)
    hint = did_you_mean(p.name, names)
    return f"; {hint}" if hint else ""


def _read_so_far(chunks: Iterator[bytes], fh: Any, advance: Callable[[float], None]) -> Iterator[bytes]:
    """``chunks``, reporting after each how far into the file ``fh`` the reading is (for a compressed file, compressed
    bytes: the file's size is the known total)."""
    done = 0
    for chunk in chunks:
        at = fh.tell()
        advance(at - done)
        done = at
        yield chunk


def _gunzip_chunks(fh: Any) -> Iterator[bytes]:
    """The decompressed text of a gzip file (of one member or several, concatenated), at most _READ_CHUNK bytes at
    a time. ISA-L (or zlib) inflates a large block in one call that releases the GIL, so a thread reading ahead
    (:func:`~daydream.workers.read_ahead`) inflates while the main thread decodes; gzip.GzipFile's 128 kB steps would
    each wait for the GIL."""
    inflate = _inflate_module.decompressobj(wbits=31)
    started = False  # a member is being inflated (its header seen)
    while data := fh.read(_READ_COMPRESSED):
        while data:
            if not started:
                data = data.lstrip(b"\0")  # zeros padding a member, as gzip.GzipFile skips them
                if not data:
                    break
            started = True
            out = inflate.decompress(data, _READ_CHUNK)
            if out:
                yield out
            data = inflate.unconsumed_tail
            if inflate.eof:  # a member ends; what follows is the next member
                data = inflate.unused_data + data
                inflate = _inflate_module.decompressobj(wbits=31)
                started = False
        while not inflate.eof and started and (out := inflate.decompress(b"", _READ_CHUNK)):
            yield out
    if started and not inflate.eof:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")


def _unxz_chunks(fh: Any) -> Iterator[bytes]:
    """The decompressed text of an xz file (of one stream or several, concatenated, with the zero padding xz allows
    between them), at most _READ_CHUNK bytes at a time; the decoder refuses (LZMAError) a stream that needs more than
    MAX_XZ_MEMORY. Like zlib's, lzma's decoder releases the GIL, so reading ahead overlaps decoding."""

    def decoder() -> lzma.LZMADecompressor:
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=MAX_XZ_MEMORY)

    unxz = decoder()
    started = False  # a stream is being decoded (its header seen)
    while data := fh.read(_READ_COMPRESSED):
        while data:
            if not started:
                data = data.lstrip(b"\0")  # padding between streams
                if not data:
                    break
            started = True
            out = unxz.decompress(data, _READ_CHUNK)
            data = b""
            while True:  # the decoder holds what it has not decoded yet: drain it a chunk at a time
                if out:
                    yield out
                if unxz.eof:  # a stream ends; what follows is padding or the next stream
                    data, unxz, started = unxz.unused_data, decoder(), False
                    break
                if unxz.needs_input:
                    break
                out = unxz.decompress(b"", _READ_CHUNK)
    if started:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")


def _checked(p: str, chunks: Iterator[bytes], limit: int, too_large: str, starts: bytes, empty: str) -> Iterator[bytes]:
    """The chunks, leading whitespace dropped as it comes. Refused (:class:`TraceError`) as soon as the first byte is
    not one of ``starts``, past ``limit`` bytes (whitespace included; ``too_large`` says so), or when there is no text
    at all (``empty`` says what an empty text is)."""
    total = events = 0
    started = False
    memory = memory_limit()
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise TraceError(too_large, path=p)
        events += chunk.count(b'"ph"')  # every event has one (and a name may: an over-estimate, never an under-one)
        if memory is not None and (need := BASE_BYTES + events * BYTES_PER_EVENT + total) > memory:
            raise TraceError(
                f"{p}: about {events:,} events in its first {total:,} bytes of text would need about "
                f"{need / 2**30:,.1f} GiB to load, build and simulate (about {BYTES_PER_EVENT:,} bytes an event), over "
                f"the limit of {memory / 2**30:,.1f} GiB ({describe_limit()}; docs/limits.md)",
                path=p,
            )
        if not started:
            chunk = chunk.lstrip(_JSON_SPACE)
            if not chunk:
                if total > MAX_LEADING_WHITESPACE:
                    raise TraceError(f"{p}: {empty} (its first {total:,} bytes are all whitespace)", path=p)
                continue
            if chunk[0] not in starts:
                raise TraceError(not_json(p, chunk), path=p)
            started = True
        yield chunk
    if not started:
        raise TraceError(f"{p}: {empty}", path=p)


def values_in(text: bytes | bytearray | memoryview) -> int:
    """An upper bound on the JSON values that begin in ``text``: its commas and opening brackets."""
    if isinstance(text, memoryview):
        text = text.tobytes()
    return text.count(b",") + text.count(b"{") + text.count(b"[")


def decode_json(raw: bytes | bytearray, path: str, decode: Callable[[Any], T], warnings: list[str] | None = None) -> T:
    """``decode(raw)``, with what no JSON decoder error says plainly made a :class:`TraceError` naming ``path``:
    nesting too deep to decode (with its byte offset). Invalid UTF-8 is read as U+FFFD, with a warning (appended to
    ``warnings``) naming the byte offset of the first. msgspec's own DecodeError and ValidationError pass through:
    the caller words them."""
    try:
        return decode(raw)
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        if not is_invalid_utf8(exc):
            raise
    except RecursionError:
        raise TraceError(_too_deep_message(raw, path), path=path) from None
    fixed, offset = _replace_invalid_utf8(raw)
    if warnings is not None:
        warnings.append(f"{path}: invalid UTF-8 (first at byte {offset:,}) read as U+FFFD")
    try:
        return decode(fixed)
    except RecursionError:
        raise TraceError(_too_deep_message(fixed, path), path=path) from None
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:  # not expected once replaced; a message, not a traceback
        if not is_invalid_utf8(exc):
            raise
        raise TraceError(f"{path}: not valid UTF-8 text ({getattr(exc, 'reason', exc)})", path=path) from None


def is_invalid_utf8(exc: Exception) -> bool:
    """Whether a decoder's error says the text is not UTF-8: msgspec before 0.23 let Python's UnicodeDecodeError
    through; from 0.23 it checks the bytes itself and raises its DecodeError, "Invalid UTF-8 encoded string"."""
    return isinstance(exc, UnicodeDecodeError) or (
        isinstance(exc, msgspec.DecodeError) and str(exc).startswith("Invalid UTF-8")
    )


def _too_deep_message(raw: bytes | bytearray, path: str) -> str:
    """Where the text nests more than MAX_NESTING levels (searched for in its first _NESTING_SCAN_BYTES)."""
    depth = 0
    for m in _NESTING_TOKEN.finditer(raw, 0, _NESTING_SCAN_BYTES):
        c = raw[m.start()]
        if c in b"[{":
            depth += 1
            if depth > MAX_NESTING:
                return f"{path}: JSON nested too deeply at byte {m.start():,} (more than {MAX_NESTING} levels)"
        elif c in b"]}":
            depth -= 1
    return f"{path}: JSON nested too deeply to read (more than {MAX_NESTING} levels)"


def _replace_invalid_utf8(raw: bytes | bytearray) -> tuple[bytearray, int]:
    """The text with every invalid UTF-8 sequence replaced by U+FFFD, and the byte offset of the first (found and
    fixed a chunk at a time: a large trace is not decoded into one string)."""
    view = memoryview(raw)
    step = 1 << 22
    first = -1
    pos = 0
    while pos < len(raw):  # the first invalid byte
        try:
            _, used = codecs.utf_8_decode(view[pos : pos + step], "strict", pos + step >= len(raw))
        except UnicodeDecodeError as exc:
            first = pos + exc.start
            break
        pos += used if used else step
    first = max(first, 0)
    fixed = bytearray(view[:first])
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for pos in range(first, len(raw), step):
        fixed += decoder.decode(view[pos : pos + step], pos + step >= len(raw)).encode("utf-8")
    return fixed, first


def nesting_exceeds(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether a decoded JSON value (lists and dicts) nests more than ``limit`` levels (a scalar: 0; ``[1]``: 1).
    Iterative: a value of any depth is measured without recursion."""
    if type(value) is list and limit >= 2:  # the usual case, an op's Input Dims: a list of flat lists
        for x in value:
            if type(x) is list:
                for y in x:
                    if type(y) is list or type(y) is dict:
                        return _nesting_exceeds(value, limit)
            elif type(x) is dict:
                return _nesting_exceeds(value, limit)
        return False
    return _nesting_exceeds(value, limit)


def _nesting_exceeds(value: Any, limit: int) -> bool:
    if type(value) is not list and type(value) is not dict:
        return False
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        for x in v.values() if type(v) is dict else v:
            if type(x) is list or type(x) is dict:
                stack.append((x, depth + 1))
    return False


# how a .whatif script starts (its docstring, a comment, a statement): a script given where a trace goes
_SCRIPT_START = re.compile(rb'("""|#|(param|let|select|scale|set|remove|insert|include|require|for|if)\b)')


def not_json(path: object, text: bytes | bytearray) -> str:
    """Why a file that is not JSON is no trace: a .whatif script named where the trace goes is said to be one, with
    the command that takes it."""
    if str(path).endswith(".whatif") or _SCRIPT_START.match(bytes(text[:16])):
        return (
            f"{path}: a .whatif script, not a trace (Kineto JSON): `daydream run TRACE {path}` runs it on a trace, "
            f"`daydream check {path}` checks it alone"
        )
    return f"{path}: not JSON (starts with {_start_of(bytes(text[:16]))}, where a trace starts with '{{' or '[')"


def _start_of(head: bytes) -> str:
    """What a file starts with, in words, never its bytes: the file may be any file a name or symlink leads to
    (/etc/passwd as a rank's trace), and an error message is no way to read it."""
    head = head.lstrip()
    first = head[:1]
    if not first:
        return "white space only"
    if first in (b"{", b"["):
        return repr(first.decode())
    if first == b'"':
        return "a JSON string"
    if first.isdigit() or first == b"-":
        return "a number"
    if head.startswith((b"true", b"false", b"null")):
        return "true, false or null"
    if first[0] < 0x20 or first[0] >= 0x7F:
        return f"binary data (byte 0x{first[0]:02x})"
    return "text"


def decode_trace(raw: bytes | bytearray, path: str, warnings: list[str] | None = None) -> TraceFile:
    """Decode JSON text into the typed schema, mapping decoder errors to one-line messages (see
    :func:`decode_json`; warnings about the text go to ``warnings``)."""
    m = _FIRST_BYTE.search(raw)
    if m is None:
        raise TraceError(f"{path}: empty file (no events), expected Kineto trace JSON", path=path)
    first = raw[m.start() : m.start() + 1]
    try:
        if first == b"[":  # Chrome trace "array format": a bare list of events
            return TraceFile(traceEvents=decode_json(raw, path, EVENTS_DECODER.decode, warnings))
        if first != b"{":
            raise TraceError(not_json(path, raw[m.start() :]), path=path)
        return decode_json(raw, path, TRACE_DECODER.decode, warnings)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        if "missing required field `traceEvents`" in msg:
            raise TraceError(f"{path}: not a Kineto trace: the JSON object has no 'traceEvents'", path=path) from None
        raise TraceError(
            f"{path}: malformed trace: {_describe_validation(msg)}", path=path, event=event_index(msg)
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: not valid JSON: {exc}", path=path, offset=byte_offset(exc)) from None


def event_index(message: str) -> int | None:
    """The index of the event (or execution-trace node) a decoder's message is about: msgspec says "... - at
    `$.traceEvents[12].ts`"; None where it names none."""
    m = re.search(r"\$\.(?:traceEvents|nodes)\[(\d+)\]", message)
    return int(m.group(1)) if m else None


def byte_offset(exc: BaseException) -> int | None:
    """The byte of the text a JSON decoder's error is at ("... (byte 41)"); None where it says none."""
    m = re.search(r"\(byte (\d+)\)", str(exc))
    return int(m.group(1)) if m else None


def _describe_validation(msg: str) -> str:
    # msgspec says "Expected `float`, got `str` - at `$.traceEvents[12].ts`"; keep it, named plainly.
    return msg.replace("$.traceEvents", "traceEvents")


def decode_in_batches(spath: str, decode: Callable[[memoryview], Any], take: Callable[[Any], None]) -> TraceFile | None:
    """Read the trace file ``spath`` (:func:`read_trace_bytes`'s checks, inflated ahead by a thread), its events
    ``decode``-d a batch at a time as the text is read (:mod:`daydream.trace.batches`; ``decode`` as
    :class:`~daydream.trace.batches.EventBatches` calls it), each batch's result given to ``take``; the text of a
    batch is dropped once decoded, so memory grows with what ``take`` keeps, not with the text. Returns the rest of
    the document (its ``traceEvents`` empty); None where the text cannot be cut into batches that decode (malformed,
    invalid UTF-8, nested too deeply, a structure the cutting does not expect): the caller reads it whole."""
    batches = EventBatches(decode, BATCH_BYTES, MAX_PENDING_BYTES)
    rest: list[bytes] = []
    document: TraceFile | None = None
    with contextlib.closing(read_ahead(_text_chunks(spath, MAX_TRACE_BYTES, b"{[", _EMPTY_TRACE))) as chunks:
        try:
            # decoded by a thread of its own, a batch ahead of ``take``: a decoder that releases the GIL (the compiled
            # scanner) runs while the batch before is taken, on the second core
            with contextlib.closing(read_ahead(_decoded(chunks, batches, rest), depth=1)) as decoded:
                for events in decoded:
                    take(events)
            if not batches.array_format:
                document = decode_batch(rest[0], TRACE_DECODER.decode)
            elif rest[0].strip(_JSON_SPACE) == b"[]":  # nothing but whitespace after the array
                document = TraceFile(traceEvents=[])
        except Unsplittable:
            return None
    if document is None or document.traceEvents:  # the rest is not a trace, or holds a second traceEvents
        return None
    return document


def _decoded(chunks: Iterator[bytes], batches: EventBatches, rest: list[bytes]) -> Iterator[Any]:
    """The batches of events ``chunks`` hold, decoded, the last one too; the rest of the document put in ``rest``."""
    for chunk in chunks:
        batches.feed(chunk)
        yield from batches.decoded()
    events, tail = batches.end()
    rest.append(tail)
    yield events


def decode_batch(text: bytes | memoryview, decode: Callable[[Any], Any] = EVENTS_DECODER.decode) -> Any:
    """``decode(text)``; None where it is not JSON (a batch cut inside an event); :class:`Unsplittable` where what
    is wrong is more than the cut (a value of the wrong type, invalid UTF-8, nesting too deep) or the text holds
    more values than MAX_JSON_VALUES: reading the text whole says so."""
    if len(text) > MAX_JSON_VALUES and values_in(text) > MAX_JSON_VALUES:
        raise Unsplittable("too many values")
    try:
        return decode(text)
    except (msgspec.ValidationError, RecursionError):
        raise Unsplittable("not decodable") from None
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        if is_invalid_utf8(exc):  # not a cut inside an event: the whole text's reading says where
            raise Unsplittable("not UTF-8") from None
        return None
