"""docker/ read without Docker (the build and the cluster run in tests/docker/).

compose.yaml parses and has a controller, at least two slurmd and the scheduler, each node of
the topology it gives cluster.sh; every file a Dockerfile COPYs exists in the build context;
the entrypoint is valid bash with every role compose uses; the image's paths point at files
the COPYs bring in; config.toml loads.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from slurm_sched.service.config import load_config

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _copy_sources(args: str) -> list[str]:
    if args.startswith("["):
        parts = json.loads(args)
    else:
        words = shlex.split(args)
        if any(w.startswith("--from=") for w in words):
            return []  # from an earlier stage, not from the build context
        parts = [p for p in words if not p.startswith("--")]
    return parts[:-1]


def _contexts(compose: dict) -> set[tuple[Path, Path]]:
    out = set()
    for svc in compose["services"].values():
        build = svc.get("build")
        if build:
            ctx = (DOCKER / build["context"]).resolve()
            out.add((ctx, ctx / build["dockerfile"]))
    return out


def test_compose_has_a_controller_two_or_more_nodes_and_the_scheduler(compose):
    services = compose["services"]
    roles = {name: svc["command"] for name, svc in services.items()}
    assert roles["slurmctld"] == ["controller"]
    assert ["scheduler"] in roles.values()
    nodes = [cmd[1] for cmd in roles.values() if cmd[0] == "node"]
    assert len(nodes) >= 2 and len(set(nodes)) == len(nodes)
    topology = services["slurmctld"]["environment"]["MINI_SLURM_NODES"].split()
    assert sorted(nodes) == sorted(spec.split(":")[0] for spec in topology), \
        "one slurmd container per node cluster.sh configures"
    for name, svc in services.items():
        assert "slurm:/srv/slurm" in svc["volumes"], name
        if name != "slurmctld":
            assert svc["network_mode"] == "service:slurmctld", name
            assert svc["depends_on"]["slurmctld"]["condition"] == "service_healthy"
            # the topology every container sees is the controller's (the scheduler adds its own
            # SLURM_SCHED_* settings)
            ctld_env = services["slurmctld"]["environment"]
            assert {k: svc["environment"].get(k) for k in ctld_env} == ctld_env, name
    assert services["slurmctld"]["hostname"], "SlurmctldHost needs a stable hostname"
    assert "slurm" in compose["volumes"]


def test_every_copied_file_exists_in_the_build_context(compose):
    contexts = _contexts(compose)
    assert contexts, "services are built from the repository"
    for ctx, dockerfile in contexts:
        assert ctx == REPO and dockerfile.is_file(), dockerfile
        copies = [args for word, args in _instructions(dockerfile) if word in ("COPY", "ADD")]
        assert copies
        for args in copies:
            for src in _copy_sources(args):
                assert (ctx / src).exists(), f"{dockerfile.name}: COPY {src}: missing"


def _allowed_by_dockerignore(src: str) -> bool:
    """Whether .dockerignore (``*`` first, then ``!path`` exceptions) lets ``src`` into the
    build context."""
    lines = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()]
    patterns = [ln for ln in lines if ln and not ln.startswith("#")]
    assert patterns[0] == "*", "an allowlist: everything out, then exceptions"
    path = src.rstrip("/")
    return any(p.startswith("!") and (path == p[1:] or path.startswith(p[1:] + "/"))
               for p in patterns)


def test_every_copied_file_passes_the_dockerignore(compose):
    [(_, dockerfile)] = _contexts(compose)
    for word, args in _instructions(dockerfile):
        if word in ("COPY", "ADD"):
            for src in _copy_sources(args):
                assert _allowed_by_dockerignore(src), f"COPY {src}: left out by .dockerignore"


def test_image_paths_point_at_copied_files(compose):
    """ENV paths under /opt/slurm-sched/src are files the COPYs put there."""
    [(ctx, dockerfile)] = _contexts(compose)
    env = " ".join(args for word, args in _instructions(dockerfile) if word == "ENV")
    paths = re.findall(r"/opt/slurm-sched/src/(\S+)", env)
    assert "slurm_sched/slurm/cluster.sh" in paths and "plugin/job_submit.lua" in paths
    for rel in paths:
        assert (ctx / rel).is_file(), rel


def test_entrypoint_is_valid_bash_with_every_role(compose):
    script = DOCKER / "entrypoint.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for svc in compose["services"].values():
        role = svc["command"][0]
        assert re.search(rf"^\s*{role}\)", text, re.M), f"role {role} not in entrypoint.sh"


def test_the_containers_config_loads():
    cfg = load_config(DOCKER / "config.toml")
    assert cfg.managed_partitions == ("sched",)
    assert str(cfg.settings_dir).startswith("/srv/slurm/"), "on the shared volume"
    assert cfg.observability.metrics_host == "0.0.0.0"


def test_the_compose_implementation_accepts_the_file() -> None:
    """`docker compose config` (or docker-compose 1.29's) validates the file, where one exists."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        try:
            if subprocess.run([*cmd, "version"], capture_output=True).returncode == 0:
                break
        except FileNotFoundError:
            continue
    else:
        if os.environ.get("CI") == "true":  # CI runs tests/docker, which installs one, first
            pytest.fail("no compose implementation: `docker compose config` cannot check the file")
        pytest.skip("no compose implementation on this machine")
    p = subprocess.run([*cmd, "-p", "slurm-sched", "-f", str(DOCKER / "compose.yaml"), "config",
                        "-q"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
