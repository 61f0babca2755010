"""Features, the model, its training loop and its metrics, kept apart from the pipeline wiring.

Everything that crosses a step boundary is JSON or numpy ``.npz`` (weights, optimizer
state): no ``torch.save`` pickles, which run code when loaded. torch is imported inside
the functions that need it, so the pipeline module imports fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .fraud_data import LABEL

NUMERIC_LOG = ("amount", "card_age_days", "tx_last_24h")  # heavy-tailed: log1p, then standardise
CATEGORICAL = ("merchant_category", "country")
BINARY = ("is_foreign",)
PRECISION_K = 100
SPLIT_FRACTIONS = (0.70, 0.15, 0.15)  # train, validation, test

MODEL_FORMAT = 1  # bump when the model directory's layout changes; loaders refuse others
WEIGHTS_FILE = "weights.npz"
CONFIG_FILE = "config.json"
PREPROCESSING_FILE = "preprocessing.json"
EXAMPLE_FILE = "input_example.json"  # a few raw input rows: the registered model's input example
INPUT_COLUMNS = (*NUMERIC_LOG, "hour", *BINARY, *CATEGORICAL)  # what the model scores (raw rows)


@dataclass
class TrainParams:
    """The training configuration: a pipeline parameter, so every run records it."""

    hidden: int = 32
    epochs: int = 6
    lr: float = 0.003
    batch_size: int = 256
    weight_decay: float = 0.0001
    seed: int = 7


def _source_version() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


# The train step's cache version: a change here (features, model, loop) must retrain.
MODEL_CODE_VERSION = _source_version()


# -- splitting and preprocessing --------------------------------------------------------
def stratified_split(df: Any, seed: int, fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> dict[str, Any]:
    """Train/validation/test frames with the same fraud rate, from a seeded shuffle per class."""
    import numpy as np

    rng = np.random.default_rng(seed)
    parts: dict[str, list[Any]] = {"train": [], "valid": [], "test": []}
    for label in sorted(df[LABEL].unique()):
        idx = np.flatnonzero(df[LABEL].to_numpy() == label)
        rng.shuffle(idx)
        n_train = int(round(len(idx) * fractions[0]))
        n_valid = int(round(len(idx) * fractions[1]))
        parts["train"].append(idx[:n_train])
        parts["valid"].append(idx[n_train:n_train + n_valid])
        parts["test"].append(idx[n_train + n_valid:])
    # Sorted positions: each split keeps the snapshot's row order (stable, readable).
    return {name: df.iloc[np.sort(np.concatenate(ix))].reset_index(drop=True) for name, ix in parts.items()}


def fit_preprocessing(train: Any) -> dict[str, Any]:
    """Fit scalers and encoders. Callers pass the *train split only*: see the transform step.

    Lists, not dicts, carry the feature order: the JSON is written with sorted keys, and a
    column order that depended on dict order would silently scramble the features at scoring.
    """
    import numpy as np

    numeric = []
    for col in (*NUMERIC_LOG, "hour"):
        x = train[col].to_numpy(dtype="float64")
        transform = "log1p" if col in NUMERIC_LOG else "identity"
        if transform == "log1p":
            x = np.log1p(x)
        std = float(x.std())
        numeric.append({"column": col, "transform": transform, "mean": float(x.mean()), "std": std if std > 0 else 1.0})
    categorical = [{"column": col, "categories": sorted(str(v) for v in train[col].unique())} for col in CATEGORICAL]
    features = [
        *(n["column"] for n in numeric), *BINARY,
        *(f"{c['column']}={v}" for c in categorical for v in c["categories"]),
    ]
    return {"numeric": numeric, "binary": list(BINARY), "categorical": categorical, "features": features}


def apply_preprocessing(df: Any, pre: dict[str, Any]) -> Any:
    """Feature matrix (float32, columns in ``pre["features"]`` order); an unseen category is all zeros."""
    import numpy as np

    cols = []
    for p in pre["numeric"]:
        x = df[p["column"]].to_numpy(dtype="float64")
        if p["transform"] == "log1p":
            x = np.log1p(x)
        cols.append((x - p["mean"]) / p["std"])
    for col in pre["binary"]:
        cols.append(df[col].to_numpy(dtype="float64"))
    for c in pre["categorical"]:
        values = df[c["column"]].astype(str).to_numpy()
        cols.extend((values == v).astype("float64") for v in c["categories"])
    return np.stack(cols, axis=1).astype("float32")


# -- the model -----------------------------------------------------------------------------
def build_model(n_features: int, hidden: int) -> Any:
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(n_features, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, max(2, hidden // 2)),
        torch.nn.ReLU(),
        torch.nn.Linear(max(2, hidden // 2), 1),
    )


def pick_device() -> str:
    """cuda when this process really has a GPU (the spec requests one); CPU otherwise."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Fixed seeds (torch, numpy) and deterministic kernels; one CPU thread for a stable sum order."""
    import os

    # cuBLAS is deterministic only with a fixed workspace; it must be set before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import numpy as np
    import torch

    from interlock.plugins.pytorch.determinism import deterministic_algorithms

    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    # Not torch.use_deterministic_algorithms: it imports torch's compiler (inductor, ~2 s).
    deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        deterministic_algorithms(was_deterministic, warn_only=was_warn_only)


def _state_arrays(model: Any, optimizer: Any) -> dict[str, Any]:
    """Weights and Adam moments as numpy arrays (for ``np.savez``): no pickle."""
    arrays = {f"model/{k}": v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    for i, st in optimizer.state_dict()["state"].items():
        for k, v in st.items():
            arrays[f"optim/{i}/{k}"] = v.detach().cpu().numpy() if hasattr(v, "detach") else v
    return arrays


def _load_state(model: Any, optimizer: Any, arrays: Any) -> None:
    import torch

    model.load_state_dict({k[len("model/"):]: torch.from_numpy(arrays[k]) for k in arrays if k.startswith("model/")})
    opt_state = optimizer.state_dict()
    state: dict[int, dict[str, Any]] = {}
    for key in arrays:
        if key.startswith("optim/"):
            _, i, name = key.split("/")
            state.setdefault(int(i), {})[name] = torch.from_numpy(arrays[key].copy())
    opt_state["state"] = state
    optimizer.load_state_dict(opt_state)


def fit(
    x_train: Any,
    y_train: Any,
    x_valid: Any,
    y_valid: Any,
    params: TrainParams,
    *,
    checkpoint: Any = None,
    micro_batch: int | None = None,
    on_epoch_end: Callable[[int, dict[str, float]], None] | None = None,
) -> tuple[Any, list[dict[str, float]]]:
    """Train the MLP; save a checkpoint after every epoch and resume from the latest one.

    ``checkpoint`` is a ``ctx.checkpoint`` (or None); ``micro_batch`` (``ctx.batch_size``)
    splits each batch for gradient accumulation. A checkpoint is a directory with
    ``state.npz`` (weights and Adam moments) and ``progress.json`` (epochs done, history,
    and the config it belongs to: a checkpoint of another config is ignored, never mixed).
    Batch order comes from a generator seeded by (seed, epoch), so a resumed run sees the
    same batches as an uninterrupted one and ends with the same weights.
    """
    import tempfile

    import numpy as np
    import torch

    device = pick_device()
    bs = params.batch_size
    # After a CUDA OOM the shim halves the batch (ctx.batch_size): the loop then accumulates
    # gradients over micro-batches, so the effective batch, and the result, stay the same.
    micro = max(1, min(micro_batch or bs, bs))
    fingerprint = hashlib.sha256(
        json.dumps({**asdict(params), "n_features": int(x_train.shape[1]), "rows": int(len(y_train))},
                   sort_keys=True).encode()
    ).hexdigest()
    with deterministic(params.seed):
        # On the device before the optimizer exists, so restored Adam moments land there too.
        model = build_model(int(x_train.shape[1]), params.hidden).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=params.lr, weight_decay=params.weight_decay)
        start, history = 0, []
        restored = checkpoint.load() if checkpoint is not None else None
        if restored is not None:
            progress = json.loads((restored / "progress.json").read_text())
            if progress.get("fingerprint") == fingerprint:
                with np.load(restored / "state.npz") as arrays:
                    _load_state(model, optimizer, {k: arrays[k] for k in arrays.files})
                start, history = int(progress["epochs_done"]), list(progress["history"])
        xt = torch.from_numpy(np.ascontiguousarray(x_train)).to(device)
        yt = torch.from_numpy(np.asarray(y_train, dtype="float32")).to(device)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        for epoch in range(start, params.epochs):
            model.train()
            order = np.random.default_rng([params.seed, epoch]).permutation(len(yt))
            total = 0.0
            for i in range(0, len(order), bs):
                batch = order[i:i + bs]
                optimizer.zero_grad()
                for j in range(0, len(batch), micro):
                    part = torch.from_numpy(batch[j:j + micro]).to(device)
                    loss = loss_fn(model(xt[part]).squeeze(1), yt[part]) * (len(part) / len(batch))
                    loss.backward()
                    total += float(loss.detach()) * len(batch)
                optimizer.step()
            valid_scores = score(model, x_valid)
            record = {"epoch": epoch + 1, "loss": total / len(order), "valid_auc": auc(y_valid, valid_scores)}
            history.append(record)
            if checkpoint is not None:
                with tempfile.TemporaryDirectory(prefix="fraud-ckpt-") as tmp:
                    np.savez(Path(tmp) / "state.npz", **_state_arrays(model, optimizer))
                    (Path(tmp) / "progress.json").write_text(json.dumps(
                        {"epochs_done": epoch + 1, "history": history, "fingerprint": fingerprint}
                    ))
                    checkpoint.save(Path(tmp), step=epoch + 1)
            if on_epoch_end is not None:
                on_epoch_end(epoch + 1, record)
        model.to("cpu")
    return model, history


def score(model: Any, x: Any) -> Any:
    """Fraud probabilities for a feature matrix."""
    import numpy as np
    import torch

    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(np.ascontiguousarray(x)).to(device)).squeeze(1)
    return torch.sigmoid(logits).cpu().numpy().astype("float64")


# -- metrics -------------------------------------------------------------------------------
def auc(y_true: Any, scores: Any) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney) formula; ties get average ranks."""
    import numpy as np
    import pandas as pd

    y = np.asarray(y_true).astype(bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return math.nan
    ranks = pd.Series(np.asarray(scores, dtype="float64")).rank(method="average").to_numpy()
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def precision_at_k(y_true: Any, scores: Any, k: int = PRECISION_K) -> float:
    """Share of fraud among the k highest scores (ties broken by row order: stable)."""
    import numpy as np

    k = min(k, len(scores))
    top = np.argsort(-np.asarray(scores, dtype="float64"), kind="stable")[:k]
    return float(np.asarray(y_true)[top].mean())


def evaluate_model(model: Any, pre: dict[str, Any], frame: Any) -> dict[str, float]:
    """AUC and precision@k of a model on a raw frame, through the model's *own* preprocessing."""
    scores = score(model, apply_preprocessing(frame, pre))
    y = frame[LABEL].to_numpy()
    return {"auc": auc(y, scores), f"precision_at_{PRECISION_K}": precision_at_k(y, scores)}


# -- the model directory --------------------------------------------------------------------
def save_model_dir(
    model: Any, pre: dict[str, Any], params: TrainParams, dest: Path, *, example: Any = None, **extra: Any
) -> None:
    """weights.npz + config.json + preprocessing.json: everything needed to score, no pickle;
    ``example`` (raw rows) is kept as input_example.json for the registry."""
    import numpy as np

    dest.mkdir(parents=True, exist_ok=True)
    np.savez(dest / WEIGHTS_FILE, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    config = {
        "format": MODEL_FORMAT, "architecture": "mlp", "n_features": len(pre["features"]),
        "params": asdict(params), **extra,
    }
    (dest / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True))
    (dest / PREPROCESSING_FILE).write_text(json.dumps(pre, indent=2, sort_keys=True))
    if example is not None:
        # "table" keeps each column's dtype: the signature is inferred from these rows, and it
        # must accept what ingest produces (int64 stays int64).
        (dest / EXAMPLE_FILE).write_text(example[list(INPUT_COLUMNS)].head(5).to_json(orient="table", index=False))


def load_input_example(path: Path) -> Any:
    """The raw rows saved with a model (a pandas DataFrame in ``INPUT_COLUMNS`` order)."""
    import io

    import pandas as pd

    text = (Path(path) / EXAMPLE_FILE).read_text()
    if text.lstrip().startswith("["):  # records, as models saved before dtypes were kept
        return pd.DataFrame.from_records(json.loads(text), columns=list(INPUT_COLUMNS))
    # The dtypes ingest produced: the schema says these columns have no missing values, so an
    # int64 column is a long in the signature, and raw rows from ingest pass it.
    return pd.read_json(io.StringIO(text), orient="table")[list(INPUT_COLUMNS)]


def load_model_dir(path: Path) -> tuple[Any, dict[str, Any]]:
    """(model, preprocessing) from a directory written by ``save_model_dir``."""
    import numpy as np
    import torch

    path = Path(path)
    config = json.loads((path / CONFIG_FILE).read_text())
    if config.get("format") != MODEL_FORMAT or config.get("architecture") != "mlp":
        raise ValueError(
            f"{path} holds a model of format {config.get('format')!r} ({config.get('architecture')!r}); "
            f"this code reads format {MODEL_FORMAT} (mlp)"
        )
    pre = json.loads((path / PREPROCESSING_FILE).read_text())
    model = build_model(int(config["n_features"]), int(config["params"]["hidden"]))
    with np.load(path / WEIGHTS_FILE) as arrays:
        model.load_state_dict({k: torch.from_numpy(arrays[k]) for k in arrays.files})
    model.eval()
    return model, pre
