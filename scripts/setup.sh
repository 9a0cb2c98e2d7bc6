#!/usr/bin/env bash
# setup.sh - make a ready-to-use environment on a Debian/Ubuntu machine (idempotent).
#
#   * Debian packages: python3-venv (if `python3 -m venv` is missing), lua5.3. The Slurm packages for the
#     mini cluster (munge, slurmctld, slurmd, slurm-client) are installed by
#     slurm_sched/slurm/cluster.sh the first time a cluster starts.
#   * a virtual environment in .venv (reusing already-installed site packages when present),
#     with slurm_sched installed in editable mode plus the dev tools (pytest, hypothesis, ruff)
#     and torch (the job runtime and its tests).
#
# Env: VENV=.venv  EXTRAS=dev,torch
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev,torch}

log() { echo "[setup] $*" >&2; }

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  log "python3 >= 3.11 is required (found: $(python3 --version 2>&1 || echo none))"; exit 1
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
  log "installing python3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends python3-venv python3-pip >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends python3-venv python3-pip >/dev/null; }
fi
# lua5.3 runs the job_submit.lua plugin's validator in the unit tests (parity with Python)
if ! command -v lua5.3 >/dev/null 2>&1; then
  log "installing lua5.3"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends lua5.3 >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends lua5.3 >/dev/null; }
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv --system-site-packages "$VENV"
fi
log "installing slurm_sched[$EXTRAS] into $VENV"
# torch pinned: pip then takes the local 2.13.0+cpu wheel instead of a newer, larger download
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]" "torch==2.13.0"
log "ready: $("$VENV/bin/slurm-sched" --version)"
