"""digits-ddp: a data-parallel PyTorch step on real data, the same on Flyte and KFP.

    interlock run reference_pipelines/digits_ddp.py --backend kfp-local
    interlock compile reference_pipelines/digits_ddp.py --backend kfp --out build/ --option state_pvc=interlock-state
    interlock compile reference_pipelines/digits_ddp.py --backend flyte --out build/flyte
    interlock compile reference_pipelines/digits_ddp.py --backend flyte2 --out build/flyte2 --store /mnt/interlock
    interlock compile reference_pipelines/digits_ddp.py --backend argo --out build/argo --option state_pvc=interlock-state

ingest -> validate -> train (2 ranks, DDP) -> evaluate -> champion_gate -> [register]

- ingest: scikit-learn's bundled handwritten digits (1,797 8x8 images, shipped inside the
  package: no download at run time), with a deterministic train/test split.
- validate: pixel range, labels, no missing values; ``il.ValidationFailed`` stops the run.
- train: an MLP under DistributedDataParallel, two ranks (``backend="auto"``: gloo on CPU,
  NCCL where the ranks see a GPU, and then bf16 autocast turns on by itself). Every rank takes its stride of
  each global batch, so the model does not depend on the number of ranks' scheduling.
  A checkpoint every ``checkpoint_steps`` steps or every ``CheckpointPolicy.every``,
  whichever comes first, and at once when any rank gets SIGTERM on a cluster (a spot
  reclaim: that rank then ends PREEMPTED): the ranks agree (all-reduce), rank 0 saves (weights and optimizer state as ``.npz``,
  never a pickle); on a retry rank 0 loads the latest committed checkpoint and broadcasts it,
  so every rank resumes from the same state.
- evaluate: the challenger and the registry's ``champion`` on the same held-out split.
- champion_gate: promote only by the accuracy margin fixed in advance (a parameter).
- register (only when the gate says so): MLflow run, model version, ``champion`` alias,
  moved only if it still points at the champion that evaluate compared against.

``registry`` works as in fraud_retrain: an MLflow tracking URI or a directory for a SQLite
store; empty means ``$MLFLOW_TRACKING_URI``, else ``.interlock/mlflow``. Checkpoints go where
the run says (``interlock run ... --checkpoint-store s3://bucket/prefix``), else the run's
own folder.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

import interlock as il

MODEL_NAME = "digits-mlp"
EXPERIMENT = "digits-ddp"
PIXELS = [f"p{i}" for i in range(64)]
TEST_EVERY = 5  # every 5th image is held out: deterministic, the same on every backend


@dataclass
class DdpParams:
    hidden: int = 64
    epochs: int = 4
    lr: float = 0.05
    global_batch: int = 64
    checkpoint_steps: int = 20
    seed: int = 7


@il.step(cache=il.Cache())
def ingest() -> pd.DataFrame:
    from sklearn.datasets import load_digits

    digits = load_digits()
    df = pd.DataFrame(digits.data, columns=PIXELS)
    df["label"] = digits.target.astype("int64")
    df["split"] = ["test" if i % TEST_EVERY == 0 else "train" for i in range(len(df))]
    return df


@il.step
def validate(raw: pd.DataFrame) -> pd.DataFrame:
    problems = []
    if raw[PIXELS].isna().any().any():
        problems.append("missing pixel values")
    if not raw[PIXELS].stack().between(0, 16).all():
        problems.append("pixel values outside 0..16")
    if not raw["label"].between(0, 9).all():
        problems.append("labels outside 0..9")
    if (raw["split"] == "test").sum() == 0:
        problems.append("no held-out rows")
    if problems:
        raise il.ValidationFailed(f"digits snapshot rejected: {', '.join(problems)}")
    return raw


def _model(hidden: int) -> Any:
    from torch import nn

    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def _arrays(state: dict[str, Any]) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **{k: v.detach().cpu().numpy() for k, v in state.items()})
    return buf.getvalue()


def _tensors(data: bytes) -> dict[str, Any]:
    import numpy as np
    import torch

    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: torch.from_numpy(z[k].copy()) for k in z.files}


@il.step(
    distributed=il.Torchrun(nnodes=1, nproc_per_node=2, backend="auto"),
    resources=il.Resources(cpu="1", memory="1Gi"),
    checkpoint=il.CheckpointPolicy(every="2m", keep=2),
    retry=il.Retry(transient=1, preempted=3),  # a reclaimed rank resumes from its checkpoint
    interruptible=True,
)
def train(data: pd.DataFrame, params: DdpParams, ctx: il.StepContext) -> il.Model:
    import torch
    import torch.distributed as dist
    from torch import nn

    from interlock.plugins.pytorch.determinism import deterministic_algorithms

    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(params.seed)
    deterministic_algorithms(True)  # torch.use_deterministic_algorithms, without importing inductor
    cuda = torch.cuda.is_available() and dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    rows = data[data["split"] == "train"]
    x = torch.tensor(rows[PIXELS].to_numpy() / 16.0, dtype=torch.float32, device=device)
    y = torch.tensor(rows["label"].to_numpy(), dtype=torch.int64, device=device)
    model = _model(params.hidden).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=params.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    per_epoch = len(rows) // params.global_batch
    total = per_epoch * params.epochs

    # Resume: rank 0 reads the latest committed checkpoint, every rank gets the same state.
    start = [0, None]
    if rank == 0:
        saved = ctx.checkpoint.load()
        if saved is not None:
            start = [int(_tensors(saved)["__step"].item()), saved]
    dist.broadcast_object_list(start, src=0)
    step, blob = int(start[0]), start[1]
    if blob is not None:
        arrays = _tensors(blob)
        model.load_state_dict({k: arrays[f"model.{k}"].to(device) for k in model.state_dict()})
        for i, p in enumerate(model.parameters()):
            opt.state[p]["momentum_buffer"] = arrays[f"momentum.{i}"].to(device)
    ctx.facts["resumed_from_step"] = step
    began, saving_s, saves = time.perf_counter(), 0.0, 0

    while step < total:
        epoch, i = divmod(step, per_epoch)
        order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(params.seed + epoch))
        with ctx.waiting_for_data():  # this rank's share of the batch, onto its device
            batch = order[i * params.global_batch:(i + 1) * params.global_batch][rank::world].to(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            # Mean over the whole global batch: each rank's share of it, summed by DDP's all-reduce.
            loss = loss_fn(ddp(x[batch]), y[batch]) * len(batch) * world / params.global_batch
        loss.backward()
        opt.step()
        step += 1
        # Due on any rank (N steps, T minutes, or a SIGTERM that rank got): every rank agrees,
        # so all reach the barrier together and rank 0 saves for the group.
        due = torch.tensor([int(step % params.checkpoint_steps == 0 or ctx.checkpoint_due())])
        dist.all_reduce(due, op=dist.ReduceOp.MAX)
        if due.item() and step < total:
            t0 = time.perf_counter()
            if rank == 0:
                state = {f"model.{k}": v for k, v in model.state_dict().items()}
                state |= {f"momentum.{i}": opt.state[p]["momentum_buffer"] for i, p in enumerate(model.parameters())}
                ctx.checkpoint.save(_arrays({**state, "__step": torch.tensor(step)}), step=step)
            else:
                ctx.mark_checkpointed()
            dist.barrier()
            saving_s, saves = saving_s + time.perf_counter() - t0, saves + 1
            if ctx.preemption_requested:  # this rank's node is being reclaimed; the checkpoint is committed
                raise il.Preempted(f"rank {rank} preempted: SIGTERM received; resumes from step {step}")

    # What the checkpoints cost, as a share of this attempt's training time (the receipt keeps it).
    elapsed = time.perf_counter() - began
    ctx.facts.update(checkpoints=saves, checkpoint_s=round(saving_s, 4), train_s=round(elapsed, 4),
                     checkpoint_overhead_pct=round(100 * saving_s / max(elapsed - saving_s, 1e-9), 2))

    out = il.Model.new(metadata={"framework": "torch", "hidden": params.hidden, "steps": step, "ranks": world})
    if rank == 0:
        (out.path / "weights.npz").write_bytes(_arrays(model.state_dict()))
        (out.path / "config.json").write_text(json.dumps({"hidden": params.hidden}))
    return out


class Evaluation(NamedTuple):
    challenger: il.Metrics
    champion: il.Metrics  # empty when there is no champion yet: the gate then promotes
    champion_version: str  # "none" when there is no champion yet


class Summary(NamedTuple):
    promoted: bool
    decision: str
    challenger: il.Metrics
    champion: il.Metrics
    champion_before: str


def _scores(model_dir: Path, data: pd.DataFrame) -> dict[str, float]:
    import torch

    hidden = json.loads((model_dir / "config.json").read_text())["hidden"]
    net = _model(hidden)
    net.load_state_dict(_tensors((model_dir / "weights.npz").read_bytes()))
    rows = data[data["split"] == "test"]
    x = torch.tensor(rows[PIXELS].to_numpy() / 16.0, dtype=torch.float32)
    y = torch.tensor(rows["label"].to_numpy(), dtype=torch.int64)
    with torch.no_grad():
        logits = net(x)
    accuracy = float((logits.argmax(1) == y).float().mean())
    loss = float(torch.nn.functional.cross_entropy(logits, y))
    return {"accuracy": accuracy, "loss": loss}


def _registry(registry: str) -> Any:
    from .fraud_retrain import open_registry  # one rule for where a pipeline's MLflow store is

    return open_registry(registry)


@il.step
def evaluate(model: il.Model, data: pd.DataFrame, registry: str) -> Evaluation:
    """Score the challenger and the current champion on the same held-out split.

    Never cached: the champion lives in the registry, outside the pipeline's inputs."""
    challenger = il.Metrics(_scores(model.path, data))
    reg = _registry(registry)
    version = reg.champion(MODEL_NAME)
    if version is None:
        return Evaluation(challenger, il.Metrics(), "none")
    with tempfile.TemporaryDirectory(prefix="digits-champion-") as tmp:
        champion = il.Metrics(_scores(Path(reg.download(MODEL_NAME, version, tmp)), data))
    return Evaluation(challenger, champion, version)


@il.step
def register(model: il.Model, metrics: il.Metrics, registry: str, params: DdpParams, margin: float,
             reason: str, champion_version: str, ctx: il.StepContext) -> str:
    """Log the run, register the model version, move ``champion`` (compare-and-set: if another
    run promoted meanwhile, nothing moves and the step fails FATAL naming both versions)."""
    from interlock.core.record.receipt import git_info

    git = git_info()
    receipt = {
        "pipeline": ctx.pipeline, "run_id": ctx.run_id, "backend": ctx.backend, "snapshot": "sklearn-digits",
        "git_sha": git.get("sha"), "git_dirty": git.get("dirty"),
        "image": os.environ.get("INTERLOCK_IMAGE") or "local-process", "gate": reason,
    }
    reg = _registry(registry)
    reg.check_champion(MODEL_NAME, champion_version)
    run_id = reg.log_run(EXPERIMENT, params={"train": asdict(params), "margin": margin}, metrics=dict(metrics),
                         receipt=receipt, run_name=f"{ctx.pipeline}-{ctx.run_id}")
    version = reg.register(MODEL_NAME, model, run_id=run_id, receipt=receipt,
                           tags={"accuracy": f"{metrics['accuracy']:.6f}", "ranks": str(model.metadata.get("ranks")),
                                 "interlock.compared_with": champion_version},
                           expected_champion=champion_version)
    previous = reg.promote(MODEL_NAME, version, expected_champion=champion_version)
    ctx.record(model_name=MODEL_NAME, model_version=version, previous_champion=previous, mlflow_run_id=run_id)
    print(f"registered {MODEL_NAME} version {version}; champion: {previous or 'none'} -> {version}", flush=True)
    return version


DEFAULT_PARAMS = DdpParams()


@il.pipeline(name="digits-ddp")
def digits_ddp(params: DdpParams = DEFAULT_PARAMS, margin: float = 0.005, registry: str = ""):
    """Train the digits MLP on two data-parallel ranks; promote it only if it beats the champion's
    held-out accuracy by `margin`."""
    data = validate(raw=ingest())
    model = train(data=data, params=params)
    scores = evaluate(model=model, data=data, registry=registry)
    decision = il.champion_gate(challenger=scores.challenger, champion=scores.champion, metric="accuracy",
                                margin=margin)
    with il.when(decision.promote):
        register(model=model, metrics=scores.challenger, registry=registry, params=params, margin=margin,
                 reason=decision.reason, champion_version=scores.champion_version)
    return Summary(decision.promote, decision.reason, scores.challenger, scores.champion, scores.champion_version)
