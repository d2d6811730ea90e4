"""Traces compressed with xz (``*.json.xz``): read as gzip ones are, within the same limits, and found where a job's
ranks, a recording sidecar or an execution trace are looked for. The validation corpus is stored so (about half of
gzip's bytes), which keeps the repository small enough to travel to a lent GPU."""

from __future__ import annotations

import binascii
import gzip
import io
import json
import lzma
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from synth import make_trace

import daydream.trace.reading as reading
from daydream import TraceError
from daydream.trace.job import rank_trace_files, trace_stem
from daydream.trace.load import find_execution_trace, load_trace
from daydream.trace.recording import recording_path

ROOT = Path(__file__).resolve().parents[1]


def _doc(rank: int = 0, world: int = 1) -> dict[str, Any]:
    trace = make_trace()
    return {
        "schemaVersion": 1,
        "deviceProperties": trace["deviceProperties"],
        "traceEvents": trace["traceEvents"],
        "distributedInfo": {"rank": rank, "world_size": world},
    }


def _events(trace: Any) -> list[Any]:
    return [trace.cpu_ops, trace.runtime, trace.gpu, trace.annotations, trace.syncs, trace.event_count]


def test_an_xz_trace_loads_as_its_gzip_twin(tmp_path: Path) -> None:
    data = json.dumps(_doc()).encode()
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(data))
    (tmp_path / "t.json.xz").write_bytes(lzma.compress(data))
    (tmp_path / "named_plainly.json").write_bytes(lzma.compress(data))  # known by its bytes, not its name
    gz, xz, plain = (load_trace(tmp_path / n) for n in ("t.json.gz", "t.json.xz", "named_plainly.json"))
    assert len(gz.gpu) == 15
    assert _events(xz) == _events(gz) == _events(plain)


def test_xz_streams_padding_and_truncation(tmp_path: Path) -> None:
    data = json.dumps(_doc()).encode()
    cut = len(data) // 3
    padded = lzma.compress(data[:cut]) + b"\0" * 8 + lzma.compress(data[cut:]) + b"\0" * 100
    assert b"".join(reading._unxz_chunks(io.BytesIO(padded))) == data
    path = tmp_path / "t.json.xz"
    path.write_bytes(padded)
    assert len(load_trace(path).gpu) == 15
    whole = lzma.compress(data)
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    for bad in (whole[:-50], bytes(flipped), whole + b"not xz", whole[:12]):
        path.write_bytes(bad)
        with pytest.raises(TraceError, match=r"t.json.xz: corrupt or truncated xz data"):
            load_trace(path)


def test_large_text_comes_a_chunk_at_a_time() -> None:
    """The decoder's output is drained in chunks of at most _READ_CHUNK: a file that expands a thousandfold is never
    held whole by the reader."""
    text = b"[" + b"0," * (5 << 20) + b"0]"
    chunks = list(reading._unxz_chunks(io.BytesIO(lzma.compress(text))))
    assert b"".join(chunks) == text
    assert len(chunks) >= 3 and max(map(len, chunks)) <= reading._READ_CHUNK


def test_an_xz_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """2 GiB of one JSON string in under a MB: refused by the expansion ratio, as a gzip bomb is."""
    bomb = tmp_path / "bomb.json.xz"
    block = lzma.compress(b"a" * (64 << 20), preset=9)
    bomb.write_bytes(lzma.compress(b'["') + block * 32)
    assert bomb.stat().st_size < 1 << 20
    start = time.perf_counter()
    with pytest.raises(TraceError, match=r"bomb.json.xz: decompresses to more than [\d,]+ bytes, over 256 times its"):
        load_trace(bomb)
    assert time.perf_counter() - start < 20


def _with_dictionary(packed: bytes, props: int) -> bytes:
    """An xz stream whose first block says its LZMA2 dictionary is ``props`` (40: 4 GiB), its header's CRC32 made
    right, so that only the decoder's memory limit stands in the way."""
    data = bytearray(packed)
    header_size = (data[12] + 1) * 4  # the block header follows the 12-byte stream header
    header = data[12 : 12 + header_size]
    assert header[2:4] == b"\x21\x01", "an LZMA2 filter with one byte of properties"
    header[4] = props
    header[-4:] = struct.pack("<I", binascii.crc32(bytes(header[:-4])))
    data[12 : 12 + header_size] = header
    return bytes(data)


def test_an_xz_file_that_asks_for_gigabytes_of_dictionary_is_refused(tmp_path: Path) -> None:
    data = json.dumps(_doc()).encode()
    path = tmp_path / "huge.json.xz"
    path.write_bytes(_with_dictionary(lzma.compress(data), 26))  # 64 MiB, as xz -9: read
    assert len(load_trace(path).gpu) == 15
    path.write_bytes(_with_dictionary(lzma.compress(data), 40))  # 4 GiB
    with pytest.raises(TraceError, match=r"huge.json.xz: its xz data needs more than 128 MiB to decode"):
        load_trace(path)


def test_names_with_xz(tmp_path: Path) -> None:
    assert trace_stem("rank0.json.xz") == "rank0" and trace_stem("a.json") == "a" and trace_stem("a.et") is None
    assert recording_path("out/rank0.json.xz") == str(Path("out/rank0.daydream.json"))
    job = tmp_path / "job"
    job.mkdir()
    for rank in (0, 1):
        (job / f"rank{rank}.json.xz").write_bytes(lzma.compress(json.dumps(_doc(rank, 2)).encode()))
    (job / "rank0.et.json.xz").write_bytes(b"{}")
    (job / "rank0.daydream.json").write_text("{}")
    assert [Path(f).name for f in rank_trace_files(job)] == ["rank0.json.xz", "rank1.json.xz"]
    assert find_execution_trace(str(job / "rank0.json.xz")) == str(job / "rank0.et.json.xz")


def test_the_validation_corpus_is_xz() -> None:
    """The corpus's traces are stored as xz (validation/compact_traces.py), and the cases name them so: a gzip trace
    committed by mistake would grow the repository past what travels to a lent GPU (64 MiB)."""
    traces = ROOT / "validation" / "traces"
    if not traces.is_dir():
        pytest.skip("no validation corpus in this installation")
    assert not sorted(traces.rglob("*.json.gz"))
    cases = (ROOT / "validation" / "cases.toml").read_text()
    assert ".json.gz" not in cases and cases.count(".json.xz") > 100
