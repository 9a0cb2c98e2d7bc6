#!/usr/bin/env bash
# test.sh - README command 2: set up and run the whole test suite: lint, unit, property, golden,
# contract and integration tests. The integration tests start a real Slurm mini cluster on this
# machine themselves (needs root; apt installs Slurm and munge when missing) and stop it after.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check slurm_sched tests benchmarks
# the compiled core must be the one tested (it is what the benchmarks time and a setup ships);
# SLURM_SCHED_NATIVE=auto in the environment tests whatever is there instead
SLURM_SCHED_NATIVE=${SLURM_SCHED_NATIVE:-require} .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
