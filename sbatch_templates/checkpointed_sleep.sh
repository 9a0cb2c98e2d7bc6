#!/bin/bash
# checkpointed_sleep.sh - a stand-in for a training job, used by the tests (no torch, no GPU).
#
# "Trains" for ITERATIONS iterations of SECONDS_PER_ITERATION seconds of sleep each, and behaves
# like a well-written checkpointing job under the slurm_sched scheduler:
#   - logs the node and devices Slurm gave it (SLURMD_NODENAME, CUDA_VISIBLE_DEVICES) and the
#     scheduler's settings file <dir>/<jobid>.json when there is one;
#   - writes a progress report <dir>/<jobid>.progress.json after every iteration
#     ({"iterations_done", "iteration_time_s", "timestamp"}: what the backend reads);
#   - on SIGUSR1 (the scheduler's "checkpoint now", `scancel --batch --signal=USR1`) saves a
#     checkpoint and goes on; on SIGTERM (requeue, preemption, cancel) saves it and exits;
#   - when (re)started with a checkpoint present, resumes from the iteration it holds.
#
# Usage:
#   sbatch -p sched --gres=gpu:1 --comment '{"v":1,"iterations":20,"duration_s":4}' \
#          --export=ALL,SLURM_SCHED_SETTINGS_DIR=/tmp/slurm-sched-cluster/job-settings \
#          sbatch_templates/checkpointed_sleep.sh 20 0.2
#   arguments: [ITERATIONS (10) [SECONDS_PER_ITERATION (0.2) [DIR]]]
#   DIR defaults to $SLURM_SCHED_SETTINGS_DIR, else the submit directory. Needs bash >= 5.
#SBATCH --job-name=ckpt-sleep
#SBATCH --requeue
#SBATCH --open-mode=append
set -u

ITERS=${1:-${CKPT_ITERATIONS:-10}}
STEP=${2:-${CKPT_SECONDS_PER_ITERATION:-0.2}}
DIR=${3:-${SLURM_SCHED_SETTINGS_DIR:-${SLURM_SUBMIT_DIR:-.}}}
JOB=${SLURM_JOB_ID:-local$$}
CKPT=$DIR/$JOB.ckpt
PROGRESS=$DIR/$JOB.progress.json
SETTINGS=$DIR/$JOB.json
mkdir -p "$DIR"

# bash >= 5 builtins only in the loop (EPOCHREALTIME, printf -v): one sleep and one mv per
# iteration, so that many test jobs on a 2-core machine do not slow each other down
log() { printf '[ckpt-sleep %s %(%H:%M:%S)T.%s] %s\n' "$JOB" -1 "${EPOCHREALTIME#*.}" "$*"; }

atomic_write() { # file content
  printf '%s\n' "$2" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
}

done_iters=0
if [ -s "$CKPT" ]; then
  done_iters=$(tr -dc 0-9 <"$CKPT")
  done_iters=${done_iters:-0}
fi
log "start node=${SLURMD_NODENAME:-?} cuda=${CUDA_VISIBLE_DEVICES:-none}" \
  "restart=${SLURM_RESTART_COUNT:-0} resume_from=$done_iters iterations=$ITERS step=$STEP"
[ -s "$SETTINGS" ] && log "settings $(tr -d '\n' <"$SETTINGS")"

save_checkpoint() { # reason
  atomic_write "$CKPT" "$done_iters"
  log "checkpoint iterations=$done_iters signal=$1"
}
on_term() {
  save_checkpoint TERM
  [ -n "${child:-}" ] && kill "$child" 2>/dev/null
  exit 143
}
trap 'save_checkpoint USR1' USR1
trap on_term TERM INT

while [ "$done_iters" -lt "$ITERS" ]; do
  t0=${EPOCHREALTIME/./}
  # sleep in the background and wait, so that signals are handled at once
  sleep "$STEP" &
  child=$!
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done
  child=
  done_iters=$((done_iters + 1))
  t1=${EPOCHREALTIME/./}
  dt=$((10#$t1 - 10#$t0))
  printf -v last_it '%d.%06d' $((dt / 1000000)) $((dt % 1000000))
  atomic_write "$PROGRESS" "{\"iterations_done\":$done_iters,\"iteration_time_s\":$last_it,\"timestamp\":${EPOCHREALTIME}}"
done
atomic_write "$CKPT" "$done_iters"
log "done iterations=$done_iters"
