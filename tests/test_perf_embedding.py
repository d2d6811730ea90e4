"""The batched embedding-bag heuristic of Lin et al. (HiPC 2022), plain and L2-aware, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from daydream.errors import DaydreamError
from daydream.perf.embeddings.embedding_bag import (
    BagModel,
    cached_rows,
    embedding_bag_us,
    group_bytes,
    hit_rate,
    tables_at_once,
)
from daydream.perf.kernels.devices import get_device

V100 = get_device("v100-sxm2-32gb")  # 900 GB/s DRAM, 6 MiB L2, 80 SMs, L2 2048 B/clk at 1530 MHz
V100_L2_GBPS = 2048 * 1530 / 1e3


def test_group_bytes_by_hand() -> None:
    # L=4, D=64: indices ceil(16/32)*32 = 32, outputs ceil(256/32)*32 = 256, forward weights 4 * 256 (the factor L)
    assert group_bytes(4, 64) == {"table_offsets": 32, "offsets": 64, "indices": 32, "outputs": 256, "weights": 1024}
    assert group_bytes(4, 64, backward=True)["weights"] == 2048  # ceil(2*4*4*64/32)*32
    # D=20 is not a whole number of 32-byte sectors: each row rounds up in the forward, the backward rounds once
    assert group_bytes(3, 20)["weights"] == 3 * 96
    assert group_bytes(3, 20)["outputs"] == 96
    assert group_bytes(3, 20, backward=True)["weights"] == 480  # ceil(2*4*3*20/32)*32 = 15*32
    assert group_bytes(9, 64)["indices"] == 64  # ceil(36/32)*32


def test_plain_model_by_hand() -> None:
    # B=256, T=8: 2048 groups x (32+64+32+256+1024) bytes at 900 GB/s
    assert embedding_bag_us(256, 100_000, 8, 4, 64, V100, model=BagModel(l2_aware=False)) == pytest.approx(
        2048 * 1408 / 900e9 * 1e6
    )
    assert embedding_bag_us(256, 100_000, 8, 4, 64, V100, model=BagModel(l2_aware=False)) == pytest.approx(
        3.20398, rel=1e-5
    )
    assert embedding_bag_us(
        256, 100_000, 8, 4, 64, "v100", backward=True, model=BagModel(l2_aware=False)
    ) == pytest.approx(2048 * (32 + 64 + 32 + 256 + 2048) / 900e9 * 1e6)
    assert embedding_bag_us(
        256, 100_000, 8, 4, 64, V100, model=BagModel(l2_aware=False, dram_gbps=800)
    ) == pytest.approx(2048 * 1408 / 800e9 * 1e6)


def test_hit_rate_is_the_ratio_of_binomials() -> None:
    assert hit_rate(5, 10, 2) == pytest.approx(math.comb(5, 2) / math.comb(10, 2)) == pytest.approx(2 / 9)
    assert hit_rate(2211, 2500, 3) == pytest.approx(math.comb(2211, 3) / math.comb(2500, 3))
    assert hit_rate(3, 10, 4) == 0.0  # fewer cached rows than lookups in a bag
    assert hit_rate(10, 10, 4) == 1.0
    # large tables: the product stays finite where the binomials would not fit a float
    assert 0 < hit_rate(2_000_000, 10_000_000, 80) < 1e-50


def test_cached_rows_by_hand() -> None:
    # 80 SMs x 32 warps resident = 2560 groups; a batch of 256 -> 10 tables at once
    assert tables_at_once(256, 80, 32) == 10
    assert tables_at_once(100_000, 80, 32) == 1
    # each keeps floor(0.9 * 6 MiB / (10 tables * 64 * 4 bytes)) = floor(2211.84) rows
    assert cached_rows(V100.l2_bytes, 100_000, 64, 10) == 2211
    assert cached_rows(V100.l2_bytes, 1000, 64, 10) == 1000  # a small table fits whole


def test_l2_aware_model_by_hand() -> None:
    # B=256, E=2500, T=8, L=2, D=64, 32 rows per block: X = 2211 cached rows, p = 2211/2500 * 2210/2499
    p = 2211 / 2500 * 2210 / 2499
    l2 = 32 + 64 + p * 512  # table offsets, offsets, hits of the 2 x 256-byte rows
    dram = 32 + 256 + (1 - p) * 512  # indices, output, misses
    l2_t, dram_t = 2048 * l2 / (V100_L2_GBPS * 1e9) * 1e6, 2048 * dram / 900e9 * 1e6
    got = embedding_bag_us(256, 2500, 8, 2, 64, V100, model=BagModel(rows_per_block=32))
    assert got == pytest.approx(l2_t + dram_t)  # the paper's sum
    assert embedding_bag_us(
        256, 2500, 8, 2, 64, V100, model=BagModel(rows_per_block=32, combine="max")
    ) == pytest.approx(max(l2_t, dram_t))
    # the hit rate moves traffic from DRAM to the faster L2: below the plain model
    assert got < embedding_bag_us(256, 2500, 8, 2, 64, V100, model=BagModel(l2_aware=False))


def test_l2_aware_small_table_all_hits() -> None:
    got = embedding_bag_us(256, 1000, 8, 2, 64, V100, model=BagModel(rows_per_block=32))
    assert got == pytest.approx(2048 * ((96 + 512) / (V100_L2_GBPS * 1e9) + 288 / 900e9) * 1e6)


def test_l2_aware_backward_by_hand() -> None:
    p = 2211 / 2500 * 2210 / 2499
    w = 2 * 4 * 2 * 64  # ceil(2*4*L*D/32)*32 with L=2, D=64: 1024
    expected = 2048 * ((96 + p * w) / (V100_L2_GBPS * 1e9) + (288 + (1 - p) * w) / 900e9) * 1e6
    assert embedding_bag_us(
        256, 2500, 8, 2, 64, V100, backward=True, model=BagModel(rows_per_block=32)
    ) == pytest.approx(expected)


def test_l2_bandwidth_needed_where_the_catalog_lacks_it() -> None:
    h100 = get_device("h100")
    with pytest.raises(DaydreamError, match=r"no L2 bandwidth for h100-sxm: give BagModel\(l2_gbps="):
        embedding_bag_us(256, 2500, 8, 2, 64, h100)
    assert embedding_bag_us(256, 2500, 8, 2, 64, h100, model=BagModel(l2_gbps=7000.0)) > 0


@pytest.mark.parametrize("bad", [{"batch": 0}, {"pooling": -1}, {"dim": 2.5}])
def test_bad_arguments_are_user_errors(bad: dict) -> None:
    args = {"batch": 256, "rows": 2500, "tables": 8, "pooling": 2, "dim": 64} | bad
    with pytest.raises(DaydreamError, match="must be a positive integer"):
        embedding_bag_us(device=V100, **args)
    with pytest.raises(DaydreamError, match="combine is 'sum' or 'max'"):
        embedding_bag_us(256, 2500, 8, 2, 64, V100, model=BagModel(combine="avg"))  # type: ignore[arg-type]
