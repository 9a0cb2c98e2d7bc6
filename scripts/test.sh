#!/usr/bin/env bash
# test.sh - README command 2: set up and run the whole test suite: lint (ruff), types (mypy
# --strict, settings in pyproject.toml), unit, property, golden, contract and integration tests. The integration tests start a real Slurm mini cluster on this
# machine themselves (needs root) and stop it after.
#
# Two Slurm releases, each from scripts/slurm-build.sh (apt's package where it is that release,
# else built from Debian's source archive and cached under /var/cache/slurm-sched):
#   1. the whole suite on Slurm 22.05;
#   2. the conformance suite on Slurm 24.11 (CONFORMANCE below): the cluster and submit plugin,
#      every action kind through the backend contract, all policies on 30 jobs, sharing,
#      suspend/resume/preempt, the lease and fail-open, the fault tests, the service tools and
#      the advisor on real accounting (slurmdbd), a sweep as a job array with a killed task,
#      admin actions (drain, partition down, hold, cancel, time limit) under the daemon,
#      slurmctld SIGKILLed mid-cycle (between pin and go, a suspend in flight) under the daemon,
#      a node crash under the daemon (its jobs requeued or failed, placed around it, placed on
#      it again once back); on its own cluster (state dir and ports of its own).
# With arguments, only run 1 with those pytest arguments (e.g. `bash scripts/test.sh tests/unit`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CONFORMANCE=(
  tests/integration/test_cluster.py
  tests/contract/test_backend_contract.py
  tests/integration/test_policies_on_slurm.py
  tests/integration/test_service_faults.py
  tests/integration/test_service_tools.py
  tests/integration/test_advisor_on_slurm.py
  tests/integration/test_sweep_on_slurm.py
  tests/integration/test_admin_actions.py
  tests/integration/test_ctld_crash.py
  tests/integration/test_node_loss.py
)
bash scripts/setup.sh
.venv/bin/python -m ruff check slurm_sched tests benchmarks
.venv/bin/python -m mypy --cache-dir /tmp/slurm-sched-mypy-cache

slurm_prefix() { # release -> the prefix slurm-build.sh prints; one line and exit 1 if it fails
  local out
  if ! out=$(bash scripts/slurm-build.sh "$1"); then
    echo "test.sh: no Slurm $1 (scripts/slurm-build.sh $1 failed: see the line above)" >&2
    exit 1
  fi
  echo "${out##*$'\n'}"
}
# the compiled core must be the one tested (it is what the benchmarks time and a setup ships);
# SLURM_SCHED_NATIVE=auto in the environment tests whatever is there instead
export SLURM_SCHED_NATIVE=${SLURM_SCHED_NATIVE:-require}

prefix_2205=$(slurm_prefix 22.05)
if [ $# -gt 0 ]; then
  exec env MINI_SLURM_PREFIX="$prefix_2205" .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
prefix_2411=$(slurm_prefix 24.11)

echo "== the whole suite on Slurm 22.05 ($prefix_2205)" >&2
MINI_SLURM_PREFIX="$prefix_2205" .venv/bin/python -m pytest -q -p no:cacheprovider

echo "== the conformance suite on Slurm 24.11 ($prefix_2411)" >&2
MINI_SLURM_PREFIX="$prefix_2411" MINI_SLURM_STATE=/tmp/slurm-sched-cluster-24.11 \
  MINI_SLURM_CTLD_PORT=26817 MINI_SLURM_SLURMD_PORT=27001 \
  .venv/bin/python -m pytest -q -p no:cacheprovider "${CONFORMANCE[@]}"
