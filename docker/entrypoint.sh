#!/usr/bin/env bash
# entrypoint.sh - the roles of the demo cluster's containers (docker/compose.yaml).
#
#   controller      first start: run the tests' bootstrap (cluster.sh up, then down) on the
#                   shared volume to generate slurm.conf, gres.conf, job_submit.lua, the munge
#                   key and the fake GPU devices; then run munged and slurmctld in the foreground
#   node NAME       wait for the controller, then run `slurmd -D -N NAME` (one node per container)
#   scheduler       wait for the controller, then run `slurm-sched run --config ...`
#   <command...>    anything else is executed as is (e.g. bash, sinfo)
#
# All containers share the controller's network namespace (slurm.conf names 127.0.0.1 for every
# daemon, exactly as on the test machine) and the volume with $MINI_SLURM_STATE, where munged's
# socket, the configs and the spool directories live.
set -euo pipefail

STATE=${MINI_SLURM_STATE:?MINI_SLURM_STATE must be set}
CONF=$STATE/etc/slurm.conf
CLUSTER_SH=${CLUSTER_SH:-/opt/slurm-sched/src/slurm_sched/slurm/cluster.sh}
WAIT_S=${WAIT_S:-300}

log() { echo "[entrypoint] $*" >&2; }

# an image built with SLURM=24.11 holds that build under /opt/slurm-<version> (its commands are
# linked into /usr/local/bin and /usr/local/sbin); cluster.sh is told, so that it does not look
# for Debian's packages. 22.05 images use Debian's packages.
for prefix in /opt/slurm-*/; do
  if [ -x "${prefix}sbin/slurmctld" ]; then
    export MINI_SLURM_PREFIX=${prefix%/}
  fi
done

wait_for_controller() {
  local deadline=$(($(date +%s) + WAIT_S))
  until [ -f "$CONF" ] && SLURM_CONF=$CONF timeout 5 scontrol ping 2>/dev/null | grep UP >/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "no slurmctld after ${WAIT_S}s"; exit 1; }
    sleep 1
  done
}

controller() {
  mkdir -p "$(dirname "$STATE")" "${SLURM_SCHED_SETTINGS_DIR:-/srv/slurm/job-settings}"
  if [ ! -f "$CONF" ]; then
    # The same bootstrap as the tests: it checks the settings, writes every config, creates the
    # munge key and fake GPUs, starts all daemons and waits until every node is idle. Then its
    # daemons stop again; the containers run them one per container from here on.
    log "first start: bootstrapping $STATE with cluster.sh"
    bash "$CLUSTER_SH" up
    bash "$CLUSTER_SH" down
  fi
  export SLURM_CONF=$CONF
  # the same munged command line cluster.sh uses (its socket is on the shared volume)
  rm -f "$STATE/munge/munge.socket" "$STATE/munge/munge.socket.lock"
  munged --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed" --force
  log "slurmctld -D (nodes: ${MINI_SLURM_NODES:-cluster.sh default})"
  exec slurmctld -D -f "$CONF"
}

node() {
  local name=${1:?usage: node NAME}
  wait_for_controller
  mkdir -p "$STATE/spool/$name"
  log "slurmd -D -N $name"
  exec slurmd -D -f "$CONF" -N "$name"
}

scheduler() {
  wait_for_controller
  export SLURM_CONF=$CONF
  mkdir -p "${SLURM_SCHED_SETTINGS_DIR:-/srv/slurm/job-settings}"
  exec slurm-sched run --config "${SLURM_SCHED_CONFIG:-/etc/slurm-sched/config.toml}"
}

role=${1:-controller}
shift || true
case "$role" in
  controller) controller "$@" ;;
  node) node "$@" ;;
  scheduler) scheduler "$@" ;;
  *) exec "$role" "$@" ;;
esac
