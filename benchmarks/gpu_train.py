"""Data-parallel training throughput on the visible GPUs, and what checkpoints cost.

    python benchmarks/gpu_train.py [--steps 200] [--batch 256] [--width 4096] [--checkpoint-every 50]
                                   [--store DIR_OR_S3_URI] [--json]

For one GPU and for all visible GPUs (NCCL, one process per GPU, bf16 autocast) it trains a
deep MLP on synthetic data (made on the device, deterministic) and prints:

- samples per second (all ranks, after warm-up);
- GPU utilization over the timed part, sampled through NVML (``nvidia-ml-py``) when it is
  installed, else "n/a";
- peak memory allocated per GPU (``torch.cuda.max_memory_allocated``);
- checkpoint overhead: rank 0 saves model + optimizer state every N steps through interlock's
  checkpoint store (``Checkpointer``: data, fsync, manifest last); the time spent in the
  saves as a percentage of the training steps' time.

On a machine without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import sys
import tempfile
import threading
import time
from typing import Any


def _nvml_sampler(devices: list[int], stop: threading.Event, samples: list[float], period_s: float = 0.2) -> None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return
    pynvml.nvmlInit()
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in devices]
        while not stop.wait(period_s):
            samples.append(sum(pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles) / len(handles))
    finally:
        pynvml.nvmlShutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, args: argparse.Namespace, port: int, out: Any) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(args.depth):
        layers += [nn.Linear(args.width, args.width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 10)).cuda()
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = torch.randn(args.batch, args.width, device="cuda", generator=gen)
    y = torch.randint(0, 10, (args.batch,), device="cuda", generator=gen)
    loss_fn = nn.CrossEntropyLoss()

    checkpointer = None
    if rank == 0 and args.checkpoint_every:
        from interlock.core.checkpoint.checkpointer import Checkpointer
        from interlock.core.checkpoint.store import store_for_uri

        checkpointer = Checkpointer(store_for_uri(args.store), "bench/gpu-train", keep=2)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    train_s = ckpt_s = 0.0
    saves = 0
    t0 = time.perf_counter()
    for i in range(1, args.steps + 1):
        s0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        train_s += time.perf_counter() - s0
        if args.checkpoint_every and i % args.checkpoint_every == 0:
            c0 = time.perf_counter()
            if checkpointer is not None:
                buf = io.BytesIO()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": i}, buf)
                checkpointer.save(buf.getvalue(), step=i)
                saves += 1
            dist.barrier()  # the other ranks wait for rank 0's save: that is the cost they all pay
            ckpt_s += time.perf_counter() - c0
    wall = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated()
    stats = torch.tensor([peak], dtype=torch.float64, device="cuda")
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put({
            "gpus": world, "samples_per_s": args.batch * world * args.steps / wall, "wall_s": wall,
            "peak_memory_gib": float(stats.item()) / 2**30, "checkpoint_saves": saves,
            "checkpoint_overhead_pct": 100.0 * ckpt_s / train_s if train_s else 0.0,
        })
    dist.destroy_process_group()


def measure(world: int, args: argparse.Namespace) -> dict[str, Any]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=_nvml_sampler, args=(list(range(world)), stop, samples), daemon=True)
    sampler.start()
    mp.start_processes(_worker, args=(world, args, _free_port(), out), nprocs=world, join=True, start_method="spawn")
    stop.set()
    sampler.join(timeout=2)
    result: dict[str, Any] = out.get(timeout=30)
    # Skip the warm-up's samples roughly: the first fifth of the run.
    timed = samples[len(samples) // 5:]
    result["gpu_utilization_pct"] = round(sum(timed) / len(timed), 1) if timed else None
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=256, help="per GPU")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--checkpoint-every", type=int, default=50, help="steps; 0: no checkpoints")
    p.add_argument("--store", default=None, help="checkpoint store: a directory or s3://bucket/prefix (default: a temp dir)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    try:
        import torch
    except ImportError:
        print("no GPU: torch is not installed; nothing to measure")
        return 0
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print("no GPU: torch sees no CUDA device; nothing to measure (run this on a GPU machine)")
        return 0
    count = torch.cuda.device_count()
    tmp = None
    if args.store is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpu-train-ckpt-")
        args.store = tmp.name
    results = [measure(n, args) for n in sorted({1, count})]
    if tmp is not None:
        tmp.cleanup()
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    if args.json:
        print(json.dumps({"devices": names, "results": results}, indent=1))
        return 0
    print(f"devices: {', '.join(names)}; batch {args.batch}/GPU, MLP {args.depth}x{args.width}, bf16, {args.steps} steps")
    for r in results:
        util = f"{r['gpu_utilization_pct']:.0f}%" if r["gpu_utilization_pct"] is not None else "n/a (install nvidia-ml-py)"
        print(
            f"{r['gpus']} GPU(s): {r['samples_per_s']:,.0f} samples/s, utilization {util}, "
            f"peak memory {r['peak_memory_gib']:.2f} GiB/GPU, checkpoint overhead {r['checkpoint_overhead_pct']:.1f}% "
            f"({r['checkpoint_saves']} saves)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
