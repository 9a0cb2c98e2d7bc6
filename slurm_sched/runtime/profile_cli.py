"""``slurm-sched profile``: measure models on the local device and write a profile file.

::

    slurm-sched profile --model tiny-transformer --model mlp --batch-sizes 1,2,4,8,16,32 \\
        --pair tiny-transformer:16,mlp:64 --out profile.json

Measures, for each ``--model``, the iteration time and peak memory at each batch size and fits
``t(b) = alpha + beta * b`` and ``mem(b) = m0 + m1 * b``; for each ``--pair A[:bA],B[:bB]``, the
interference ratio of each model beside the other. Uses the first CUDA GPU when torch sees one
(``--device auto``), else the CPU. Writes the JSON format of :mod:`slurm_sched.runtime.profile`
and prints a summary. ``--merge`` adds to an existing file instead of replacing it.

The command is exposed as :data:`profile` (a click command) for ``slurm_sched.cli``.
"""

from __future__ import annotations

import datetime as dt
import platform
import shlex
import sys
from pathlib import Path

import click

from slurm_sched.errors import InputError
from slurm_sched.runtime.profile import Profile, read_profile


def _batch_sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of integers: {value!r}") from None
    if len(sizes) < 2 or sizes[0] < 1:
        raise click.BadParameter(f"need >= 2 distinct batch sizes >= 1, got {value!r}")
    return sizes


def _pair(text: str, default_b: int) -> tuple[tuple[str, int], tuple[str, int]]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise InputError("expected A[:batch],B[:batch]", field="pair", value=text)
    out = []
    for p in parts:
        name, _, b = p.partition(":")
        try:
            out.append((name, int(b) if b else default_b))
        except ValueError:
            raise InputError("batch size must be an integer", field="pair", value=text) from None
    return out[0], out[1]


def summary(prof: object) -> str:
    """The human-readable table printed after a run."""
    assert isinstance(prof, Profile)
    lines = []
    pv = prof.provenance
    lines.append(
        f"device: {pv.get('device')} ({pv.get('device_name')}), torch {pv.get('torch')}, "
        f"{pv.get('threads')} CPU threads"
    )
    for name, m in sorted(prof.models.items()):
        lines.append(f"\n{name} ({m.params:,} parameters)" if m.params else f"\n{name}")
        lines.append(f"  {'batch':>6} {'iter ms':>10} {'+-':>8} {'samples/s':>10} {'mem GB':>8}")
        for s in sorted(m.samples, key=lambda x: x.batch_size):
            mem = f"{s.mem_gb:8.3f}" if s.mem_gb is not None else f"{'-':>8}"
            lines.append(
                f"  {s.batch_size:>6} {s.iter_time_s * 1e3:>10.3f} {s.iter_time_std_s * 1e3:>8.3f}"
                f" {s.batch_size / s.iter_time_s:>10.1f} {mem}"
            )
        c = m.compute_fit()
        lines.append(
            f"  t(b) = {c.intercept * 1e3:.3f} ms + {c.slope * 1e3:.4f} ms x b"
            f"   (max rel. error {c.max_rel_err:.1%})"
        )
        mf = m.memory_fit()
        if mf is not None:
            lines.append(
                f"  mem(b) = {mf.intercept:.3f} GB + {mf.slope * 1e3:.3f} MB x b"
                f"   ({m.memory_kind})"
            )
    if prof.interference:
        lines.append("\ninterference (xi = shared / solo iteration time)")
        for p in prof.interference:
            lines.append(
                f"  {p.model}:{p.batch_size} beside {p.co_model}:{p.co_batch_size}: "
                f"{p.solo_iter_time_s * 1e3:.2f} -> {p.shared_iter_time_s * 1e3:.2f} ms, "
                f"xi = {p.xi:.2f}"
            )
    return "\n".join(lines)


@click.command("profile")
@click.option(
    "--model",
    "models",
    multiple=True,
    default=("tiny-transformer",),
    show_default=True,
    help="model to profile (repeatable): mlp, tiny-transformer, resnet18",
)
@click.option(
    "--batch-sizes",
    default="1,2,4,8,16,32",
    show_default=True,
    callback=_batch_sizes,
    help="comma-separated batch sizes (>= 2)",
)
@click.option(
    "--iters",
    default=10,
    show_default=True,
    type=click.IntRange(1),
    help="timed steps per batch size",
)
@click.option(
    "--warmup",
    default=3,
    show_default=True,
    type=click.IntRange(0),
    help="untimed steps per batch size",
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="auto (first CUDA GPU if any, else CPU), cpu, cuda, cuda:N",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    default=None,
    help="torch CPU threads (default: torch's choice)",
)
@click.option(
    "--pair",
    "pairs",
    multiple=True,
    help="measure interference of A beside B: 'A[:batch],B[:batch]' (repeatable)",
)
@click.option(
    "--pair-batch-size",
    default=16,
    show_default=True,
    type=click.IntRange(1),
    help="batch size of a --pair member given without one",
)
@click.option(
    "--pair-seconds",
    default=3.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="length of each measurement window of a pair",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default="profile.json",
    show_default=True,
    help="profile file to write",
)
@click.option(
    "--merge/--replace",
    default=False,
    show_default=True,
    help="add to an existing --out file instead of replacing it",
)
@click.option("--seed", default=0, show_default=True, type=int)
def profile(
    models: tuple[str, ...],
    batch_sizes: list[int],
    iters: int,
    warmup: int,
    device: str,
    threads: int | None,
    pairs: tuple[str, ...],
    pair_batch_size: int,
    pair_seconds: float,
    out_path: str,
    merge: bool,
    seed: int,
) -> None:
    """Measure iteration time vs batch size, memory and interference on this machine."""
    try:
        import torch
    except ImportError:
        raise click.ClickException(
            "slurm-sched profile needs torch: pip install 'slurm-sched[torch]'"
        ) from None
    from slurm_sched.runtime import measure
    from slurm_sched.runtime.models import WORKLOADS

    for name in models:
        if name not in WORKLOADS:
            raise InputError(
                f"unknown model (known: {', '.join(sorted(WORKLOADS))})", field="model", value=name
            )
    parsed_pairs = [_pair(p, pair_batch_size) for p in pairs]
    for pa, pb in parsed_pairs:
        for name, _ in (pa, pb):
            if name not in WORKLOADS:
                raise InputError(
                    f"unknown model (known: {', '.join(sorted(WORKLOADS))})",
                    field="pair",
                    value=name,
                )
    if threads:
        torch.set_num_threads(threads)
    try:
        dev = measure.select_device(device)
    except (RuntimeError, ValueError) as exc:
        raise InputError(str(exc), field="device", value=device) from None
    prof = Profile(
        provenance={
            "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": platform.node(),
            "device": dev.type,
            "device_name": measure.device_name(dev),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "threads": torch.get_num_threads(),
            "warmup": warmup,
            "iters": iters,
            "seed": seed,
            "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        }
    )
    for name in models:
        click.echo(f"profiling {name} on {dev} at batch sizes {batch_sizes} ...", err=True)
        prof.models[name] = measure.measure_model(
            name, batch_sizes, device=dev, warmup=warmup, iters=iters, seed=seed
        )
    for pa, pb in parsed_pairs:
        click.echo(f"measuring interference {pa[0]}:{pa[1]} <-> {pb[0]}:{pb[1]} ...", err=True)
        prof.interference.extend(
            measure.measure_interference(
                pa, pb, device=str(dev), seconds=pair_seconds, threads=threads, warmup=warmup
            )
        )
    out = Path(out_path)
    if merge and out.exists():
        prof = read_profile(out).merge(prof)
    prof.write(out)
    click.echo(summary(prof))
    click.echo(f"\nwrote {out}")


def main() -> None:  # python -m slurm_sched.runtime.profile_cli
    try:
        profile.main(standalone_mode=True)
    except InputError as exc:
        click.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
