#!/usr/bin/env bash
# setup.sh - make a ready-to-use environment on a Debian/Ubuntu machine (idempotent).
#
#   * Debian packages: python3-venv (if `python3 -m venv` is missing), lua5.3,
#     chromium-headless-shell. The Slurm packages for the
#     mini cluster (munge, slurmctld, slurmd, slurm-client) are installed by
#     slurm_sched/slurm/cluster.sh the first time a cluster starts.
#   * a virtual environment in .venv (reusing already-installed site packages when present),
#     with slurm_sched installed in editable mode plus the dev tools (pytest, hypothesis, ruff)
#     and torch (the job runtime and its tests).
#   * the compiled core (slurm_sched.native: Rubick's policy built with mypyc, about twice as
#     fast, same decisions), rebuilt only when its source changed; gcc and python3-dev come from
#     apt when missing. Without it everything runs from source (a warning says so).
#
# The interpreter: $PYTHON if set; else the distribution's /usr/bin/python3 when it is >= 3.11
# (Debian builds it with profile-guided and link-time optimisation: the scheduler's decision
# passes run about 15% faster on it than on a default source build such as pyenv's); else the
# first python3 on PATH.
#
# Env: VENV=.venv  EXTRAS=dev,torch,native  PYTHON=(see above)  NATIVE=0 skips the build
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev,torch,native}
NATIVE=${NATIVE:-1}

log() { echo "[setup] $*" >&2; }

is_311() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ] && is_311 /usr/bin/python3; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
if ! is_311 "$PYTHON"; then
  log "python >= 3.11 is required (found: $("$PYTHON" --version 2>&1 || echo none) at $PYTHON)"; exit 1
fi
if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
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
# chromium-headless-shell renders the advisor's HTML report in its browser test
if ! command -v chromium-headless-shell >/dev/null 2>&1; then
  log "installing chromium-headless-shell"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends chromium-headless-shell >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium-headless-shell >/dev/null; } ||
    { log "no chromium-headless-shell package; installing chromium"
      apt-get install -y --no-install-recommends chromium >/dev/null; } ||
    log "warning: no Chromium; the HTML report's browser test is skipped (a failure under CI=true)"
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv --system-site-packages "$VENV"
fi
log "installing slurm_sched[$EXTRAS] into $VENV"
# torch pinned: pip then takes the local 2.13.0+cpu wheel instead of a newer, larger download
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]" "torch==2.13.0"
native_state=$(SLURM_SCHED_NATIVE=auto "$VENV/bin/slurm-sched" native status 2>/dev/null || true)
if [ "$NATIVE" != 0 ] && [ "${native_state##*: }" != compiled ]; then
  if ! command -v gcc >/dev/null 2>&1 ||
     ! "$VENV/bin/python" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    log "installing gcc and python3-dev (the compiled core)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends gcc libc6-dev python3-dev >/dev/null ||
      { apt-get update >/dev/null && apt-get install -y --no-install-recommends gcc libc6-dev python3-dev >/dev/null; } ||
      log "warning: could not install gcc/python3-dev"
  fi
  log "building the compiled core (mypyc, about 30 s)"
  "$VENV/bin/slurm-sched" native build >&2 || log "warning: no compiled core; running from source"
fi
log "ready: $("$VENV/bin/slurm-sched" --version)"
