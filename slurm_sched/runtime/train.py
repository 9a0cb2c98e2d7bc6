"""The example training job: a small real model on synthetic data under a TrainingSession.

::

    python -m slurm_sched.runtime.launch -- -m slurm_sched.runtime.train \\
        --model tiny-transformer --iterations 200 --batch-size 32

Every option defaults to the job's hints (``model``, ``iterations``, ``batch_size``), then to
the values below. ``--data-delay-s`` adds a sleep to the data stage of every step (a stand-in
for storage I/O: it makes a tiny model run long enough to be preempted, and gives Muri
something to interleave). ``--save-weights`` writes the final model state (rank 0) for checks.
Prints one ``result: {...}`` JSON line at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from slurm_sched.runtime.job import load_job_context
from slurm_sched.runtime.models import WORKLOADS, workload
from slurm_sched.runtime.session import TrainingSession


def weights_digest(state: dict[str, Any]) -> str:
    """SHA-256 over a state dict (names, dtypes, shapes, bytes): equal iff bit-identical."""
    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def make_optimizer(
    name: str, params: Iterable[torch.nn.Parameter], lr: float
) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.AdamW(params, lr=lr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm_sched.runtime.train")
    parser.add_argument("--model", choices=sorted(WORKLOADS), default=None)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None, help="global batch size")
    parser.add_argument(
        "--optimizer",
        choices=("adamw", "sgd"),
        default="adamw",
        help="AdamW, or SGD with momentum 0.9",
    )
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-delay-s", type=float, default=0.0)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--checkpoint-every", type=int, default=0)
    parser.add_argument("--report-every-s", type=float, default=1.0)
    parser.add_argument("--save-weights", default=None)
    parser.add_argument(
        "--stage-log",
        default=None,
        help="write the (slot, stage, start, end) of every stage run (JSON)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    job = load_job_context()
    name = args.model or job.hints.model or "tiny-transformer"
    if name not in WORKLOADS:
        print(f"error: model {name!r} is not one of {sorted(WORKLOADS)}", file=sys.stderr)
        return 2
    w = workload(name)
    batch_size = args.batch_size or job.hints.batch_size or 32
    iterations = args.iterations or job.hints.iterations or 100
    torch.manual_seed(args.seed)
    model = w.build()
    t0 = time.monotonic()
    losses: list[float] = []
    with TrainingSession(
        model,
        lambda params: make_optimizer(args.optimizer, params, args.lr),
        global_batch_size=batch_size,
        total_iterations=iterations,
        job=job,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        report_every_s=args.report_every_s,
        record_stages=args.stage_log is not None,
    ) as session:
        first = session.start_step
        for step in session.steps():
            with session.stage("data"):
                if args.data_delay_s > 0:
                    time.sleep(args.data_delay_s)
                batch = session.shard(w.make_batch(batch_size, step, args.seed))
            losses.append(session.train_step(batch, w.loss))
        state = session.full_model_state()  # collective (FSDP gathers the shards)
        if session.rank == 0:
            result = {
                "job_id": job.job_id,
                "model": name,
                "resumed_from": first,
                "iterations_done": session.step,
                "iterations_total": iterations,
                "restarts": session.restarts,
                "world_size": session.world_size,
                "plan": session.applied.applied if session.applied else None,
                "micro_batch_sizes": session.micro_batch_sizes,
                "last_loss": losses[-1] if losses else None,
                "weights_sha256": weights_digest(state),
                "wall_s": round(time.monotonic() - t0, 3),
            }
            if args.save_weights:
                torch.save(state, args.save_weights)
            print("result: " + json.dumps(result, sort_keys=True), flush=True)
        if args.stage_log:
            records = session.interleaver.records or []
            Path(args.stage_log).write_text(json.dumps([r.__dict__ for r in records]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
