"""Measure iteration time, memory and co-location interference of models on the local device.

Used by ``slurm-sched profile`` (:mod:`slurm_sched.runtime.profile_cli`); results go into a
:class:`~slurm_sched.runtime.profile.Profile`.

Timing: each batch size runs ``warmup`` untimed steps, then ``iters`` timed optimizer steps on a
batch already on the device; on CUDA every step ends with ``torch.cuda.synchronize`` so the
wall-clock time covers the kernels. Memory: ``torch.cuda.max_memory_allocated`` after resetting
the peak (CUDA), else the process's peak resident set (``VmHWM``), reset through
``/proc/self/clear_refs`` before each batch size (CPU; includes the Python/torch runtime, the
analogue of the CUDA context in SJF-BSBF's ``m0``).

Interference: the first model trains in this process, the second in a worker process
(``python -m slurm_sched.runtime.measure worker ...``), on the same device; both warm up, then
train during fixed wall-clock windows: the first alone, the second alone, both together. Solo
and shared numbers come from the same processes and differ only in the co-runner.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from slurm_sched.hostinfo import cpu_model
from slurm_sched.runtime.models import workload
from slurm_sched.runtime.profile import InterferencePair, ModelProfile, Sample


def select_device(spec: str = "auto") -> torch.device:
    """``auto``: the first visible CUDA GPU if torch sees one, else the CPU."""
    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} asked for but torch sees no CUDA GPU")
    return device


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model() or "cpu"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_rss_gb() -> float | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    m = re.search(r"VmHWM:\s+(\d+)\s+kB", text)
    return int(m.group(1)) / 1024**2 if m else None


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")


def _peak_gb(device: torch.device) -> float | None:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1024**3
    return _peak_rss_gb()


class Trainer:
    """One model with an SGD optimizer on a device; :meth:`step` runs one timed-able step."""

    def __init__(self, model: str, device: torch.device, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.workload = workload(model)
        self.device = device
        self.model = self.workload.build().to(device)
        self.model.train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.params = sum(p.numel() for p in self.model.parameters())
        self.seed = seed

    def batch(self, batch_size: int, step: int = 0) -> Any:
        x, y = self.workload.make_batch(batch_size, step, self.seed)
        return x.to(self.device), y.to(self.device)

    def step(self, batch: Any) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.workload.loss(self.model, batch)
        loss.backward()
        self.optimizer.step()
        synchronize(self.device)


def measure_model(
    model: str,
    batch_sizes: Sequence[int],
    *,
    device: torch.device,
    warmup: int = 3,
    iters: int = 10,
    seed: int = 0,
) -> ModelProfile:
    """Iteration time and peak memory of ``model`` at each batch size (ascending)."""
    if warmup < 0 or iters < 1:
        raise ValueError(f"need warmup >= 0 and iters >= 1, got {warmup}, {iters}")
    trainer = Trainer(model, device, seed)
    samples = []
    for b in sorted(set(batch_sizes)):
        batch = trainer.batch(b)
        _reset_peak(device)
        for _ in range(warmup):
            trainer.step(batch)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            trainer.step(batch)
            times.append(time.perf_counter() - t0)
        samples.append(
            Sample(
                batch_size=b,
                iter_time_s=statistics.median(times),
                iter_time_std_s=statistics.pstdev(times),
                mem_gb=_peak_gb(device),
                repeats=iters,
            )
        )
        del batch
    kind = "cuda_max_allocated" if device.type == "cuda" else "cpu_peak_rss"
    return ModelProfile(model, device.type, samples, trainer.params, kind)


# ---------------------------------------------------------------------------------- interference
def _train_windows(
    trainer: Trainer, batch: Any, windows: Sequence[Sequence[float]]
) -> list[list[tuple[float, float]]]:
    """Train during each ``(start, end)`` wall-clock window; the spans of the iterations."""
    out = []
    for start_at, end_at in windows:
        while time.time() < start_at:
            time.sleep(min(0.01, max(0.0, start_at - time.time())))
        spans = []
        while time.time() < end_at:
            t0 = time.time()
            trainer.step(batch)
            spans.append((t0, time.time()))
        out.append(spans)
    return out


def _worker(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    trainer = Trainer(args.model, device, args.seed)
    batch = trainer.batch(args.batch_size)
    for _ in range(args.warmup):
        trainer.step(batch)
    Path(args.ready).write_text(str(os.getpid()))
    while not Path(args.go).exists():
        time.sleep(0.005)
    windows = json.loads(Path(args.go).read_text())["windows"]
    Path(args.out).write_text(json.dumps({"windows": _train_windows(trainer, batch, windows)}))
    return 0


def _run_pair(
    here: tuple[str, int],
    there: tuple[str, int],
    windows_here: Sequence[tuple[float, float]],
    windows_there: Sequence[tuple[float, float]],
    *,
    device: str,
    threads: int | None,
    warmup: int,
    timeout_s: float,
) -> tuple[list[list[tuple[float, float]]], list[list[tuple[float, float]]]]:
    """``here`` trains in this process, ``there`` in a worker process; once both are warm, each
    trains during its windows (seconds from a common start). Returns both sides' iteration
    spans per window."""
    trainer = Trainer(here[0], select_device(device))
    batch = trainer.batch(here[1])
    for _ in range(warmup):
        trainer.step(batch)
    with tempfile.TemporaryDirectory(prefix="slurm_sched-profile-") as tmp:
        d = Path(tmp)
        go, ready, out = d / "go", d / "ready", d / "out"
        cmd = [
            sys.executable,
            "-m",
            "slurm_sched.runtime.measure",
            "worker",
            "--model",
            there[0],
            "--batch-size",
            str(there[1]),
            "--device",
            device,
            "--warmup",
            str(warmup),
            "--ready",
            str(ready),
            "--go",
            str(go),
            "--out",
            str(out),
        ]
        if threads:
            cmd += ["--threads", str(threads)]
        proc = subprocess.Popen(cmd)
        try:
            deadline = time.monotonic() + timeout_s
            while not ready.exists():
                if proc.poll() is not None:
                    raise RuntimeError(f"interference worker exited {proc.returncode} early")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"interference worker not ready after {timeout_s:.0f}s")
                time.sleep(0.01)
            t0 = time.time() + 0.2
            tmp_go = d / "go.tmp"
            tmp_go.write_text(json.dumps({"windows": [(t0 + a, t0 + b) for a, b in windows_there]}))
            os.replace(tmp_go, go)
            mine = _train_windows(trainer, batch, [(t0 + a, t0 + b) for a, b in windows_here])
            rc = proc.wait(timeout=timeout_s)
            if rc != 0:
                raise RuntimeError(f"interference worker exited {rc}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        theirs = [
            [(float(a), float(b)) for a, b in spans]
            for spans in json.loads(out.read_text())["windows"]
        ]
    return mine, theirs


def _median_until(spans: Sequence[tuple[float, float]], until: float) -> float:
    inside = [b - a for a, b in spans if b <= until] or [b - a for a, b in spans]
    if not inside:
        raise RuntimeError("no iteration completed in the measurement window")
    return statistics.median(inside)


def measure_interference(
    a: tuple[str, int],
    b: tuple[str, int],
    *,
    device: str = "auto",
    seconds: float = 3.0,
    threads: int | None = None,
    warmup: int = 3,
    timeout_s: float = 300.0,
) -> list[InterferencePair]:
    """xi of ``a`` next to ``b`` and of ``b`` next to ``a`` (each ``(model, batch_size)``).

    ``a`` trains in this process and ``b`` in a worker process: ``a`` alone for ``seconds``,
    then ``b`` alone, then both together; solo and shared medians come from the same processes.
    """
    gap = 0.1 * seconds
    alone_a = (0.0, seconds)
    alone_b = (seconds + gap, 2 * seconds + gap)
    both = (2 * seconds + 2 * gap, 3 * seconds + 2 * gap)
    (solo_a_spans, shared_a_spans), (solo_b_spans, shared_b_spans) = _run_pair(
        a,
        b,
        [alone_a, both],
        [alone_b, both],
        device=device,
        threads=threads,
        warmup=warmup,
        timeout_s=timeout_s,
    )
    if not shared_a_spans or not shared_b_spans:
        raise RuntimeError("no iteration completed in the shared window; use more --pair-seconds")
    # only iterations that ended while the other worker was still running count as shared
    both_until = min(shared_a_spans[-1][1], shared_b_spans[-1][1])
    return [
        InterferencePair(
            a[0],
            a[1],
            b[0],
            b[1],
            _median_until(solo_a_spans, float("inf")),
            _median_until(shared_a_spans, both_until),
        ),
        InterferencePair(
            b[0],
            b[1],
            a[0],
            a[1],
            _median_until(solo_b_spans, float("inf")),
            _median_until(shared_b_spans, both_until),
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm_sched.runtime.measure")
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="internal: one side of an interference measurement")
    w.add_argument("--model", required=True)
    w.add_argument("--batch-size", type=int, required=True)
    w.add_argument("--device", default="auto")
    w.add_argument("--warmup", type=int, default=3)
    w.add_argument("--threads", type=int, default=None)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--ready", required=True)
    w.add_argument("--go", required=True)
    w.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return _worker(args)


if __name__ == "__main__":
    sys.exit(main())
