#!/usr/bin/env bash
# docker-up.sh - the demo cluster in Docker (docker/compose.yaml), from nothing.
#
#   bash scripts/docker-up.sh          # engine, base image, project image, cluster: all it lacks
#   bash scripts/docker-down.sh        # removes the cluster again, volumes included
#
# Steps, each skipped when already done:
#   1. Docker's CLI and engine (`docker.io`) and a compose implementation from apt: the
#      `docker compose` plugin when the CLI has one, else the `docker-compose` package
#      (Debian 12: 1.29; Debian 13: 2.x).
#   2. A daemon: when none answers, `dockerd` is started in the background (log:
#      /var/log/slurm-sched/dockerd.log). It is tried with Docker's defaults first; if it does
#      not answer within 30 s, with `--iptables=false --bridge=none` (machines whose kernel
#      refuses Docker's NAT rules or bridge).
#   3. The base image `debian:bookworm-slim`: pulled when a registry answers, otherwise made
#      with `debootstrap --variant=minbase bookworm` from Debian's archive and `docker import`.
#   4. The project image `slurm-sched:latest` (docker/Dockerfile, classic builder, host
#      network), unless one built from the same sources exists. A TLS-inspecting proxy's CA:
#      the bundle `PIP_CERT` or `REQUESTS_CA_BUNDLE` names is copied to docker/ca/ for the
#      build stage only (docker/ca/README.md).
#   5. `compose up -d`, then waiting until all four nodes are idle and responding in `sinfo`
#      and the scheduler's metrics answer.
#
# SLURM=24.11 builds the image with Slurm 24.11.5 from Debian's source archive (the Dockerfile's
# build argument; about 6 minutes more); the default is Debian 12's Slurm 22.05.
#
# The project image is rebuilt when the files it is built from (those .dockerignore lets into
# the build context) or the Slurm release changed since it was built (a digest in its label);
# DOCKER_UP_REBUILD=1 rebuilds it anyway.
# Exit status 0 when the cluster is up; 1 with one line naming the failed step and its log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

LOG_DIR=/var/log/slurm-sched
PROJECT=slurm-sched
COMPOSE_FILE=docker/compose.yaml
BASE=debian:bookworm-slim
IMAGE=slurm-sched:latest
# the image's Slurm: Debian 12's 22.05 packages, or 24.11 built from Debian's source archive
SLURM=${SLURM:-22.05}
[[ $SLURM == 22.05 || $SLURM == 24.11 ]] || { echo "[docker-up] ERROR: SLURM must be 22.05 or 24.11, got '$SLURM'" >&2; exit 2; }
t_start=$SECONDS

log() { echo "[docker-up] $*" >&2; }
die() { echo "[docker-up] ERROR: $*" >&2; exit 1; }
mkdir -p "$LOG_DIR"

apt_install() {
  log "installing $* from apt"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$LOG_DIR/docker-apt.log" 2>&1 \
    || { apt-get update -q >>"$LOG_DIR/docker-apt.log" 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" \
              >>"$LOG_DIR/docker-apt.log" 2>&1; } \
    || die "apt could not install $* (log: $LOG_DIR/docker-apt.log)"
}

# ---------------------------------------------------------------- 1. CLI, engine, compose
command -v dockerd >/dev/null 2>&1 || apt_install docker.io
command -v docker >/dev/null 2>&1 || apt_install docker.io
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
else
  command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
  COMPOSE=(docker-compose)
fi
COMPOSE+=(-p "$PROJECT" -f "$COMPOSE_FILE")

# ---------------------------------------------------------------- 2. a daemon
wait_daemon() { # seconds -> 0 once `docker info` answers
  local i
  for ((i = 0; i < $1; i++)); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}
if ! docker info >/dev/null 2>&1; then
  for flags in "" "--iptables=false --bridge=none"; do
    log "starting dockerd ${flags:-with its defaults} (log: $LOG_DIR/dockerd.log)"
    # shellcheck disable=SC2086  # the flags are words
    nohup dockerd $flags >>"$LOG_DIR/dockerd.log" 2>&1 </dev/null &
    if wait_daemon 30; then
      break
    fi
    pkill -x dockerd || true
    sleep 2
  done
  docker info >/dev/null 2>&1 || die "dockerd does not answer (log: $LOG_DIR/dockerd.log)"
fi

# ---------------------------------------------------------------- 3. the base image
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  if timeout 60 docker pull -q "$BASE" >"$LOG_DIR/docker-pull.log" 2>&1; then
    log "pulled $BASE"
  else
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
    root=$(mktemp -d /var/tmp/slurm-sched-rootfs.XXXXXX)
    log "no registry answers: making $BASE with debootstrap (log: $LOG_DIR/debootstrap.log)"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian \
      >"$LOG_DIR/debootstrap.log" 2>&1 \
      || die "debootstrap of bookworm failed (log: $LOG_DIR/debootstrap.log)"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$BASE" >/dev/null
    rm -rf "$root"
  fi
fi

# ---------------------------------------------------------------- 4. the project image
# the image is labelled with a digest of what the build copies; another digest rebuilds it.
# What it copies is .dockerignore's allowlist (its "!path" lines), read here, not listed twice.
mapfile -t context < <(sed -n 's/^!//p' .dockerignore)
source_digest=$( (echo "SLURM=$SLURM"
  find "${context[@]}" -type f ! -path '*/__pycache__/*' ! -path 'slurm_sched/_native/*' ! -name '*.pem' -print0 \
  | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
built_from=$(docker image inspect -f '{{index .Config.Labels "org.slurm-sched.source"}}' \
  "$IMAGE" 2>/dev/null || true)
if [[ ${DOCKER_UP_REBUILD:-0} == 1 || $built_from != "$source_digest" ]]; then
  ca=${PIP_CERT:-${REQUESTS_CA_BUNDLE:-}}
  rm -f docker/ca/host.pem
  if [[ -n $ca && -f $ca ]]; then
    log "the build stage trusts $ca (copied to docker/ca/host.pem, not into the image)"
    cp "$ca" docker/ca/host.pem
  fi
  log "building $IMAGE with Slurm $SLURM (log: $LOG_DIR/docker-build.log)"
  t0=$SECONDS
  DOCKER_BUILDKIT=0 docker build --network host -f docker/Dockerfile -t "$IMAGE" \
    --build-arg "SLURM=$SLURM" \
    --label "org.slurm-sched.source=$source_digest" . \
    >"$LOG_DIR/docker-build.log" 2>&1 \
    || { rm -f docker/ca/host.pem; die "docker build failed (log: $LOG_DIR/docker-build.log)"; }
  rm -f docker/ca/host.pem
  # the build stage's image, and earlier builds of the project image that this one untagged
  docker image prune -f --filter label=org.slurm-sched.stage=build >/dev/null
  docker image prune -f --filter label=org.slurm-sched.source >/dev/null
  size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
  log "built $IMAGE in $((SECONDS - t0)) s: $((size / 1000000)) MB"
fi

# ---------------------------------------------------------------- 5. the cluster
log "starting the cluster (${COMPOSE[*]} up -d)"
"${COMPOSE[@]}" up -d --no-build >"$LOG_DIR/docker-compose.log" 2>&1 \
  || die "compose up failed (log: $LOG_DIR/docker-compose.log)"
ctld=$("${COMPOSE[@]}" ps -q slurmctld)
# "idle" exactly: a restarted slurmctld shows the nodes it recovered as "idle*" (not responding)
# until their slurmd registers
for ((i = 0; i < 180; i++)); do
  idle=$(docker exec "$ctld" sinfo -h -N -p sched -o '%t' 2>/dev/null | grep -cx idle || true)
  [[ ${idle:-0} == 4 ]] && break
  sleep 1
done
[[ ${idle:-0} == 4 ]] || die "the four nodes are not idle after 180 s (docker logs $ctld)"
sched=$("${COMPOSE[@]}" ps -q scheduler)
for ((i = 0; i < 60; i++)); do
  docker exec "$sched" python3 -c \
    'import urllib.request; urllib.request.urlopen("http://127.0.0.1:9810/metrics", timeout=2)' \
    >/dev/null 2>&1 && break
  sleep 1
done
((i < 60)) || die "the scheduler's metrics do not answer (docker logs $sched)"
log "up in $((SECONDS - t_start)) s: 4 nodes idle, scheduler metrics on :9810"
docker exec "$ctld" sinfo >&2
