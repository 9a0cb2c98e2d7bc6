#!/usr/bin/env bash
# docker-down.sh [--images] - remove the Docker demo cluster that scripts/docker-up.sh started:
# its containers, network and volume (the cluster's state, job records and settings).
# --images also removes the project image (slurm-sched:latest); the base image and the Docker
# daemon are left as they are.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { echo "[docker-down] $*" >&2; }
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
else
  log "no compose implementation: nothing to remove"
  exit 0
fi
docker info >/dev/null 2>&1 || { log "no Docker daemon answers: nothing to remove"; exit 0; }
"${COMPOSE[@]}" -p slurm-sched -f docker/compose.yaml down -v --remove-orphans >&2
# compose leaves the volume when its containers were removed by other means
docker volume rm -f slurm-sched_slurm >/dev/null 2>&1 || true
if [[ ${1:-} == --images ]]; then
  docker image rm -f slurm-sched:latest >&2 || true
fi
log "removed"
