"""`daydream embeddings profile`: FAE's hot-row estimator against exact counting, the input and mini-batch arithmetic
worked by hand, the file formats, streaming, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from daydream.api import embeddings
from daydream.api.embeddings import ProfileOptions, parse_fraction, parse_size, profile
from daydream.commands.cli import main
from daydream.errors import DaydreamError
from daydream.perf.embeddings import hot_rows as hr

EXACT = ProfileOptions(exact=True)
ROWS = 200_000
INPUTS = 2_000_000
ROW_BYTES = 64  # dim 16, fp32


def zipf_indices(a: float, n: int, rows: int, rng: np.random.Generator) -> np.ndarray:
    """n lookups into ``rows`` rows with P(k-th most popular) ~ (k + 1) ** -a, the popular rows scattered (as hashed
    ids are in real data)."""
    weights = (np.arange(rows) + 1.0) ** -a
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return rng.permutation(rows)[np.searchsorted(cdf, rng.random(n))].astype(np.int32)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", "embeddings", "profile", *args], capture_output=True, text=True, timeout=120
    )


def assert_error(capsys: pytest.CaptureFixture[str], args: list[str], *words: str) -> None:
    """The command, in this process (the subprocess path is tested above): exit 1 and a message saying what."""
    code = main(["embeddings", "profile", *args])
    err = capsys.readouterr().err
    assert code == 1, (code, err)
    assert "Traceback" not in err
    for w in words:
        assert w in err, err


# --- the estimator against exact counting ---------------------------------------------------------------------------


@pytest.mark.parametrize("skew", [0.7, 0.9, 1.05, 1.2])
def test_estimate_within_ten_percent_of_exact_and_never_over_budget(skew: float) -> None:
    rng = np.random.default_rng(int(skew * 100))
    lookups = zipf_indices(skew, INPUTS, ROWS, rng)
    full = hr.TableCounts("t", np.bincount(lookups, minlength=ROWS), ROW_BYTES)
    sampled = hr.TableCounts("t", np.bincount(lookups[rng.random(INPUTS) < 0.05], minlength=ROWS), ROW_BYTES)
    for table in (full, sampled):  # every input counted, and FAE's 5% input sample
        for budget_share in (0.01, 0.05):
            budget = budget_share * ROWS * ROW_BYTES
            for seed in range(3):
                chosen = hr.choose_threshold([table], budget, np.random.default_rng(seed))
                exact = hr.exact_hot_rows(table, chosen.threshold)
                estimate = chosen.tables[0].estimate
                # the paper's check (its Fig. 10): the chunked estimate against counting every row of the same counts
                assert abs(estimate - exact) <= 0.10 * exact, (skew, budget_share, seed, estimate, exact)
                # the upper bound holds the budget: the hot set really fits
                assert exact * ROW_BYTES <= budget, (skew, budget_share, seed, exact * ROW_BYTES, budget)
                # and the budget is used: within 10% of the hot set that exact counting would pick
                best = hr.choose_threshold([table], budget, np.random.default_rng(seed), exact=True)
                assert exact * ROW_BYTES >= 0.9 * best.bytes_estimate, (skew, budget_share, exact, best.bytes_estimate)


def test_sampled_inputs_find_the_hot_rows_of_all_inputs() -> None:
    """FAE's premise (its Fig. 7): a 5% input sample keeps the access signature. Where the cutoff is tens of sampled
    lookups, the hot set from the sample is within 10% of the one from every input."""
    rng = np.random.default_rng(3)
    lookups = zipf_indices(1.05, INPUTS, ROWS, rng)
    full = hr.TableCounts("t", np.bincount(lookups, minlength=ROWS), ROW_BYTES)
    sampled = hr.TableCounts("t", np.bincount(lookups[rng.random(INPUTS) < 0.05], minlength=ROWS), ROW_BYTES)
    threshold = 20 / sampled.accesses  # 20 sampled lookups: 400 of all
    from_sample, from_all = hr.exact_hot_rows(sampled, threshold), hr.exact_hot_rows(full, threshold)
    assert abs(from_sample - from_all) <= 0.10 * from_all, (from_sample, from_all)


def test_estimator_by_hand() -> None:
    """Four tables' worth of hand-countable cases: a table under 1 MB is hot outright; a threshold that no row reaches;
    a large table counted exactly once every row is drawn."""
    small = hr.TableCounts("small", np.array([5, 0, 1, 0]), 64)  # 256 bytes: hot outright
    assert hr.exact_hot_rows(small, 0.9) == 4
    assert hr.estimate_hot_rows(hr.RowSampler(small, np.random.default_rng(0)), 0.9) == hr.HotRows(4, 4, 4, 0)
    counts = np.zeros(40_000, dtype=np.int64)  # 40,000 rows of 64 B: 2.56 MB, a large table
    counts[:100] = 50  # 100 rows with 50 lookups each (5,000), and 5,000 rows with one each
    counts[100:5100] = 1
    big = hr.TableCounts("big", counts, 64)
    assert big.accesses == 10_000 and not big.small
    assert hr.cutoff(big, 0.004) == 40.0
    assert hr.exact_hot_rows(big, 0.004) == 100  # 50 >= 40; 1 < 40
    assert hr.exact_hot_rows(big, 0.0001) == 5100  # cutoff 1
    assert hr.hot_access_fraction(big, hr.hot_mask(big, 0.004)) == 0.5
    assert (
        hr.hot_mask(big, 0.005).sum() == hr.exact_hot_rows(big, 0.005) == 100
    )  # a count at the cutoff is hot: k >= tT
    # 35 chunks of 1,024 = 35,840 of the 40,000 rows; doubling reaches every row, and the count is exact
    est = hr.estimate_hot_rows(hr.RowSampler(big, np.random.default_rng(0)), 0.004)
    assert (est.low, est.high) == (est.estimate, est.estimate) == (100, 100) and est.drawn == 40_000
    # a budget of 100 rows picks the 100 hot rows, one of 99 rows fits nothing above one lookup... but rows seen
    chosen = hr.choose_threshold([big], 100 * 64, np.random.default_rng(0), exact=True)
    assert chosen.tables[0].estimate == 100 and chosen.bytes_estimate == 6400
    with pytest.raises(DaydreamError, match="smaller than one row"):
        hr.choose_threshold([big], 63, np.random.default_rng(0))
    with pytest.raises(DaydreamError, match="under 1 MB"):
        hr.choose_threshold([small, big], 100, np.random.default_rng(0))


def test_no_hot_row_drawn_is_bounded_by_the_zero_count_bound() -> None:
    """A rare hot set the chunks miss: estimate 0, but the upper bound is -ln(0.001) / drawn of the rows, not 0."""
    counts = np.zeros(10_000_000, dtype=np.int64)
    counts[:3] = 1000
    table = hr.TableCounts("rare", counts, 4)
    est = hr.estimate_hot_rows(hr.RowSampler(table, np.random.default_rng(1)), 0.1)
    assert est.estimate == 0 and est.drawn == 35 * 1024
    assert est.high == pytest.approx(-np.log(0.001) / (35 * 1024) * 10_000_000)


def test_mini_batches_by_hand() -> None:
    # 10 inputs, 7 hot, batches of 3: two hot batches (6 inputs); the 7th hot input rides with the 3 cold ones: 2 cold
    assert hr.fae_batches(10, 7, 3) == (2, 2)
    assert hr.fae_batch_hot_fraction(10, 7, 3) == 0.5
    assert hr.fae_batches(9, 9, 3) == (3, 0) and hr.fae_batches(9, 0, 3) == (0, 3)
    assert hr.random_batch_hot_fraction(0.99, 1024) == pytest.approx(3.39e-5, rel=1e-2)  # the paper's 0.99^1024
    with pytest.raises(DaydreamError):
        hr.fae_batches(10, 5, 0)


# --- files, end to end ----------------------------------------------------------------------------------------------


def hand_data(tmp_path: Path) -> Path:
    """Two tables of 8 inputs; table a has 100,000 rows (6.4 MB at dim 16: large), table b 4 rows (small)."""
    a = np.array([0, 0, 0, 0, 1, 1, 2, 99_999], dtype=np.int64)
    b = np.array([[0, 1], [1, 2], [3, 3], [0, 0], [1, 1], [2, 2], [0, 3], [1, 0]], dtype=np.int32)
    path = tmp_path / "hand.npz"
    np.savez(path, a=a, b=b)
    return path


def test_profile_by_hand(tmp_path: Path) -> None:
    """Exact: a budget of 2 rows of a (plus b, hot outright: 4 x 64 B) holds rows 0 and 1 of a (4 and 2 of the 8
    lookups: threshold between 1/8 and 2/8); inputs 0-5 touch only them: 6 of 8 hot; batches of 2: 3 hot, 1 cold."""
    result = profile(
        [hand_data(tmp_path)], 2 * 64 + 4 * 64, 16, batch=2, options=ProfileOptions(rows=[100_000, 4], exact=True)
    )
    a, b = result.tables
    assert (a.name, a.rows, a.hot_rows, a.hot_bytes, a.pooling) == ("a", 100_000, 2, 128, 1)
    assert (b.name, b.rows, b.hot_rows, b.small, b.pooling) == ("b", 4, 4, True, 2)
    assert a.hot_access_fraction == 6 / 8 and b.hot_access_fraction == 1
    assert result.hot_bytes == 128 + 256
    assert result.hot_input_fraction == 6 / 8
    assert (result.hot_batches, result.cold_batches, result.hot_batch_fraction) == (3, 1, 0.75)
    assert result.random_hot_batch_fraction == 0.75**2
    d = result.to_dict()
    assert {"name", "rows", "hot_rows", "hot_bytes", "hot_access_fraction"} <= set(d["tables"][0])
    assert {"tables", "hot_bytes", "hot_batch_fraction"} <= set(d)


def test_bags_of_varying_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nn.EmbeddingBag's (indices, offsets): table b's bags [0 1] [] [2] [0 0 5] [5] (40,000 rows: large), table a
    one lookup each (2 rows: small, hot outright, 128 B). The other 64 B of the budget hold one row of b: row 0, 3 of
    its 7 lookups. Only input 1, an empty bag, touches no cold row of b: 1 of 5 inputs hot."""
    b = np.array([0, 1, 2, 0, 0, 5, 5], dtype=np.int64)
    offsets = np.array([0, 2, 2, 3, 6], dtype=np.int64)
    np.savez(tmp_path / "bags.npz", b=b, **{"b.offsets": offsets}, a=np.array([0, 1, 0, 1, 0]))
    for read_bytes in (8 << 20, 8):  # one block, and blocks of one input
        monkeypatch.setattr(embeddings, "READ_BYTES", read_bytes)
        result = profile(
            [tmp_path / "bags.npz"], 64 + 2 * 64, 16, batch=1, options=ProfileOptions(rows=[40_000, 2], exact=True)
        )
        by_name = {t.name: t for t in result.tables}
        assert set(by_name) == {"a", "b"} and by_name["b"].pooling == 7 / 5 and by_name["a"].small
        assert by_name["b"].hot_rows == 1 and by_name["b"].hot_access_fraction == 3 / 7
        assert result.hot_input_fraction == 1 / 5, read_bytes
    # the same bags of equal size as an (N, P) member and as offsets agree
    fixed = np.array([[0, 1], [2, 0], [5, 5]])
    np.savez(tmp_path / "fixed.npz", t=fixed)
    np.savez(tmp_path / "ragged.npz", t=fixed.reshape(-1), **{"t.offsets": np.array([0, 2, 4])})
    a, c = (profile([tmp_path / n], 1e6, 16, batch=2, options=EXACT).to_dict() for n in ("fixed.npz", "ragged.npz"))
    assert a.pop("files") != c.pop("files") and a == c
    np.savez(tmp_path / "down.npz", t=b, **{"t.offsets": np.array([0, 3, 2, 4, 6])})
    with pytest.raises(DaydreamError, match="not rising"):
        profile([tmp_path / "down.npz"], 1e6, 16)
    np.savez(tmp_path / "lone.npz", **{"t.offsets": offsets})
    with pytest.raises(DaydreamError, match="no table 't'"):
        profile([tmp_path / "lone.npz"], 1e6, 16)
    np.savez(tmp_path / "neg.npz", t=np.array([0, 1, 2, -1]), **{"t.offsets": np.array([0, 1, 3])})
    with pytest.raises(DaydreamError, match="negative index -1 at input 2"):
        profile([tmp_path / "neg.npz"], 1e6, 16)


@pytest.fixture(scope="module")
def criteo_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DLRM-preprocessed-style (N, 3) int32 file: three tables of 200,000 rows, one lookup each, three skews."""
    rng = np.random.default_rng(7)
    data = np.stack([zipf_indices(a, INPUTS, ROWS, rng) for a in (0.9, 1.05, 1.2)], axis=1)
    path = tmp_path_factory.mktemp("idx") / "day_0_sparse.npy"
    np.save(path, data)
    return path


def test_formats_agree(criteo_like: Path, tmp_path: Path) -> None:
    """The same indices as one (N, 3) .npy, three 1-D .npy files, a Fortran-order .npy and an .npz: one profile."""
    data = np.load(criteo_like)[:300_000]
    np.save(tmp_path / "c.npy", data)
    for j in range(3):
        np.save(tmp_path / f"c[{j}].npy", data[:, j])
    np.save(tmp_path / "f.npy", np.asfortranarray(data))
    np.savez_compressed(tmp_path / "c.npz", **{f"c[{j}]": data[:, j] for j in range(3)})
    kw = {"budget_bytes": 200_000, "dim": 16, "batch": 32, "options": ProfileOptions(sample=0.2)}

    def numbers(paths: list[Path]) -> dict:
        d = profile(paths, **kw).to_dict()
        del d["files"], d["warnings"]  # they name the files
        for t in d["tables"]:
            del t["name"]
        return d

    ref = numbers([tmp_path / "c.npy"])
    for paths in ([tmp_path / f"c[{j}].npy" for j in range(3)], [tmp_path / "c.npz"], [tmp_path / "f.npy"]):
        assert numbers(paths) == ref, paths
    bags = profile([tmp_path / "c.npy"], 200_000, 16, batch=32, options=ProfileOptions(layout="bags", exact=True))
    assert len(bags.tables) == 1 and bags.tables[0].pooling == 3


def test_blocks_do_not_change_the_result(criteo_like: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming: reads of 4 kB give the same profile as reads of 8 MB (only memory differs)."""
    kw = {"budget_bytes": 1e6, "dim": 16, "batch": 64, "options": EXACT}
    ref = profile([criteo_like], **kw).to_dict()
    monkeypatch.setattr(embeddings, "READ_BYTES", 4096)
    assert profile([criteo_like], **kw).to_dict() == ref


def test_hot_inputs_are_estimated_on_held_out_inputs(criteo_like: Path) -> None:
    """Inputs that were counted made their own rows hot: classifying them overstates the hot inputs (here 0.53
    against 0.41 at a 3 MB budget, where one sampled lookup makes a row hot). The estimate on held-out inputs agrees
    with classifying every input with the same hot set."""
    kw = {"budget_bytes": 3e6, "dim": 16}
    held_out = profile([criteo_like], **kw)
    everyone = profile([criteo_like], **kw, options=ProfileOptions(classify_all=True))
    assert held_out.hot_bytes == everyone.hot_bytes  # the same hot set
    assert held_out.inputs_classified == held_out.inputs_read and everyone.inputs_classified == INPUTS
    assert abs(held_out.hot_input_fraction - everyone.hot_input_fraction) < 0.02, (
        held_out.hot_input_fraction,
        everyone.hot_input_fraction,
    )


def test_cli_profile(criteo_like: Path) -> None:
    out = run(str(criteo_like), "--budget", "300kB", "--dim", "16", "--batch", "128", "--rows", str(ROWS), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["method"] == "estimate" and 0.04 < d["sample_fraction"] < 0.06
    # the budget binds and is used, up to the interval and the step to the next whole count of sampled lookups
    assert 0.75 * 300e3 < d["hot_bytes"] <= d["hot_bytes_high"] <= 300e3
    assert [t["name"] for t in d["tables"]] == ["day_0_sparse[0]", "day_0_sparse[1]", "day_0_sparse[2]"]
    assert 0 < d["hot_batch_fraction"] < 1 and d["random_hot_batch_fraction"] < d["hot_batch_fraction"]
    exact = json.loads(
        run(str(criteo_like), "--budget", "300kB", "--dim", "16", "--batch", "128", "--exact", "--json").stdout
    )
    assert exact["method"] == "exact" and exact["inputs_read"] == INPUTS
    # the estimate from 5% of the inputs: hot inputs within a few points of counting all of them
    assert abs(d["hot_input_fraction"] - exact["hot_input_fraction"]) < 0.05
    text = run(str(criteo_like), "--budget", "1MB", "--dim", "16", "--batch", "128")
    assert text.returncode == 0 and "Hot rows" in text.stdout and "mini-batches of 128" in text.stdout


def test_torch_files(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    data = np.array([[0, 1], [1, 1], [2, 0]], dtype=np.int64)
    torch.save({"x": torch.from_numpy(data[:, 0]), "y": torch.from_numpy(data[:, 1])}, tmp_path / "d.pt")
    np.savez(tmp_path / "d.npz", x=data[:, 0], y=data[:, 1])
    a = profile([tmp_path / "d.pt"], 1e6, 4, options=EXACT).to_dict()
    b = profile([tmp_path / "d.npz"], 1e6, 4, options=EXACT).to_dict()
    assert a.pop("files") != b.pop("files") and a == b
    torch.save(torch.rand(4), tmp_path / "f.pt")
    with pytest.raises(DaydreamError, match="integers"):
        profile([tmp_path / "f.pt"], 1e6, 4)


# --- bad input ------------------------------------------------------------------------------------------------------


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def check(name: str, *args: str, says: tuple[str, ...]) -> None:
        assert_error(capsys, [str(tmp_path / name), *args], *says)

    np.save(tmp_path / "float.npy", np.array([0.5, 1.0], dtype=np.float32))
    check("float.npy", "--budget", "1MB", "--dim", "8", says=("float32", "integers"))
    np.save(tmp_path / "neg.npy", np.array([3, 1, -2, 0], dtype=np.int64))
    check("neg.npy", "--budget", "1MB", "--dim", "8", says=("negative index -2 at input 2",))
    np.save(tmp_path / "big.npy", np.array([3, 1, 10, 0], dtype=np.int64))
    check(
        "big.npy",
        "--budget",
        "1MB",
        "--dim",
        "8",
        "--rows",
        "10",
        says=("index 10 at input 2 is out of range for 10 rows",),
    )
    check("big.npy", "--budget", "16B", "--dim", "8", says=("smaller than one row (32 bytes)",))
    check("big.npy", "--budget", "lots", "--dim", "8", says=("--budget 'lots'",))
    check("big.npy", "--budget", "1MB", "--dim", "8", "--sample", "0%", says=("--sample '0%'",))
    check("big.npy", "--budget", "1MB", "--dim", "8,8", says=("dim: give one value",))
    check("big.npy", "--budget", "1MB", "--dim", "8", "--dtype", "fp7", says=("dtype 'fp7'",))
    (tmp_path / "text.npy").write_text("not numpy")
    check("text.npy", "--budget", "1MB", "--dim", "8", says=("not a numpy array file",))
    full = tmp_path / "full.npy"
    np.save(full, np.arange(1000, dtype=np.int64))
    (tmp_path / "cut.npy").write_bytes(full.read_bytes()[:-100])
    check("cut.npy", "--budget", "1MB", "--dim", "8", "--exact", says=("truncated",))
    np.save(tmp_path / "short.npy", np.arange(10, dtype=np.int64))
    check(
        "full.npy", str(tmp_path / "short.npy"), "--budget", "1MB", "--dim", "8", says=("different numbers of inputs",)
    )
    (tmp_path / "x.csv").write_text("1,2\n")
    check("x.csv", "--budget", "1MB", "--dim", "8", says=(".npy, .npz or .pt",))
    (tmp_path / "rank0.daydream.json").write_text("{}")
    check("rank0.daydream.json", "--budget", "1MB", "--dim", "8", says=("warm-up batches", "too few inputs"))
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        z.writestr("a.npy", b"junk")
    check("bad.npz", "--budget", "1MB", "--dim", "8", says=("bad.npz:a.npy: not a numpy array",))
    check("missing.npy", "--budget", "1MB", "--dim", "8", says=("no such file",))
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2), dtype=np.int64))
    check("cube.npy", "--budget", "1MB", "--dim", "8", says=("shape",))
    assert (tmp_path / "neg.npy").read_bytes()[-32:] == np.array([3, 1, -2, 0], dtype=np.int64).tobytes()  # untouched


def test_parsers() -> None:
    assert parse_size("512MB") == 512e6 and parse_size("256MiB") == 256 * 2**20 and parse_size("4096") == 4096
    assert parse_fraction("5%") == 0.05 and parse_fraction("0.5") == 0.5
    for bad in ("-1MB", "0", "5XB"):
        with pytest.raises(DaydreamError):
            parse_size(bad)


def test_a_budget_with_room_for_every_row_makes_every_row_hot(tmp_path: Path) -> None:
    """Issue: the sampled estimate said "39.6 MB, 25.7% of inputs hit only hot rows" where counting everything said
    "378 MB, 100%": rows no sampled input looked up stayed cold although the budget held them all."""
    rng = np.random.default_rng(3)
    data = tmp_path / "zipf.npy"
    np.save(data, np.stack([zipf_indices(1.05, 200_000, 20_000, rng) for _ in range(4)], axis=1))
    kw = {"budget_bytes": 40e6, "dim": 64}  # 4 x 20,000 rows of 256 bytes: 20.5 MB
    sampled = profile([data], **kw, options=ProfileOptions(rows=20_000))
    exact = profile([data], **kw, options=ProfileOptions(rows=20_000, exact=True))
    assert sampled.hot_input_fraction == exact.hot_input_fraction == 1.0
    assert sampled.hot_bytes == exact.hot_bytes == 4 * 20_000 * 256 and sampled.threshold == 0
    assert all(t.hot_access_fraction == 1.0 for t in sampled.tables)
    assert not any("told apart by chance" in w for w in sampled.warnings)


def test_room_left_by_every_sampled_row_counts_everything(tmp_path: Path) -> None:
    """The tables do not fit, but every row the sample saw does, with room to spare: the rows it never saw cannot be
    ranked from it, so every input is counted (and said), and the answer is the exact one."""
    rng = np.random.default_rng(4)
    data = tmp_path / "few.npy"
    # 100,000 rows declared per table, the inputs touching 3,000 of them: the sample sees most of those
    np.save(data, np.stack([rng.integers(0, 3_000, 200_000) for _ in range(3)], axis=1).astype(np.int32))
    kw = {"budget_bytes": 5e6, "dim": 64}  # 3 x 100,000 x 256 bytes = 76.8 MB; 3 x 3,000 rows: 2.3 MB
    sampled = profile([data], **kw, options=ProfileOptions(rows=100_000))
    exact = profile([data], **kw, options=ProfileOptions(rows=100_000, exact=True))
    assert sampled.method == "exact" and any("every input was counted instead" in w for w in sampled.warnings)
    assert sampled.hot_input_fraction == exact.hot_input_fraction == 1.0
    assert sampled.hot_bytes == exact.hot_bytes
