#!/usr/bin/env bash
# test.sh - README command 2: set up and run the whole test suite: lint (ruff), types (mypy
# --strict, settings in pyproject.toml), unit, property, golden, contract and integration tests.
# The integration tests start a real Slurm mini cluster on this machine themselves (needs root)
# and stop it after; the Docker end-to-end check (tests/docker) brings up the compose cluster
# with scripts/docker-up.sh (installing and starting Docker if needed) and removes it after.
#
# Two Slurm releases, each from scripts/slurm-build.sh (apt's package where it is that release,
# else built from Debian's source archive and cached under /var/cache/slurm-sched):
#   1. the whole suite on Slurm 22.05, the Docker check included;
#   2. the conformance suite on Slurm 24.11 (CONFORMANCE below): the cluster and submit plugin,
#      every action kind through the backend contract, all policies on 30 jobs, sharing,
#      suspend/resume/preempt, the lease and fail-open, the fault tests, the service tools and
#      the advisor on real accounting (slurmdbd), a sweep as a job array with a killed task,
#      admin actions (drain, partition down, hold, cancel, time limit) under the daemon,
#      slurmctld SIGKILLed mid-cycle (between pin and go, a suspend in flight) under the daemon,
#      a node crash under the daemon (its jobs requeued or failed, placed around it, placed on
#      it again once back); on its own cluster (state dir and ports of its own).
# 1 and 2 run at the same time. With arguments, only run 1 with those pytest arguments
# (e.g. `bash scripts/test.sh tests/unit`).
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

# The two runs go side by side: the integration tests mostly wait on Slurm (the two cores are
# about 70% idle under one run), and the clusters share nothing (state dir, ports, munge,
# MariaDB are each their own). The 24.11 run's output goes to its log, printed when it ends.
log_2411=/var/log/slurm-sched/test-24.11.log
mkdir -p "$(dirname "$log_2411")"
echo "== beside the run below: the conformance suite on Slurm 24.11 ($prefix_2411), output in $log_2411" >&2
MINI_SLURM_PREFIX="$prefix_2411" MINI_SLURM_STATE=/tmp/slurm-sched-cluster-24.11 \
  MINI_SLURM_CTLD_PORT=26817 MINI_SLURM_SLURMD_PORT=27001 \
  .venv/bin/python -m pytest -q -p no:cacheprovider --basetemp=/tmp/slurm-sched-pytest-24.11 \
  "${CONFORMANCE[@]}" >"$log_2411" 2>&1 &
pid_2411=$!
# an interrupted test.sh takes the 24.11 run with it
trap 'kill "$pid_2411" 2>/dev/null || true' INT TERM

echo "== the whole suite on Slurm 22.05 ($prefix_2205)" >&2
rc_2205=0
MINI_SLURM_PREFIX="$prefix_2205" .venv/bin/python -m pytest -q -p no:cacheprovider \
  --basetemp=/tmp/slurm-sched-pytest-22.05 || rc_2205=$?

rc_2411=0
wait "$pid_2411" || rc_2411=$?
echo "== the conformance suite on Slurm 24.11 ($prefix_2411)" >&2
cat "$log_2411"
echo "== Slurm 22.05 whole suite: exit $rc_2205; Slurm 24.11 conformance suite: exit $rc_2411" >&2
[ "$rc_2205" = 0 ] && [ "$rc_2411" = 0 ]
