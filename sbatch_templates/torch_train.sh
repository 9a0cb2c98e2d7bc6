#!/bin/bash
# torch_train.sh - a real PyTorch training job under the slurm_sched scheduler (CPU or GPU).
#
# Trains a small model on synthetic data (slurm_sched.runtime.train: tiny-transformer, mlp or
# resnet18) with the job runtime (docs/runtime.md), which
#   - reads the scheduler's settings for this job (<dir>/<jobid>.json, else the hints) and applies
#     them: gradient accumulation / sub-batch size, execution plan (dp, gc, zero-dp, ...),
#     Muri interleaving group and slot;
#   - starts one worker per GPU Slurm gave the node (torch DDP/FSDP; gloo on CPU);
#   - on SIGUSR1 (scancel --batch --signal=USR1) checkpoints and goes on; on SIGTERM (requeue,
#     preemption, migration, reconfiguration, time limit) checkpoints and exits; a restart resumes
#     at the checkpointed step;
#   - writes progress reports <dir>/<jobid>.progress.json for the scheduler.
#
# Usage (mini cluster; <dir> = the scheduler's settings directory):
#   sbatch -p sched --gres=gpu:1 \
#     --comment '{"v":1,"model":"tiny-transformer","batch_size":32,"iterations":200}' \
#     --export=ALL,SLURM_SCHED_SETTINGS_DIR=/tmp/slurm-sched-cluster/job-settings \
#     sbatch_templates/torch_train.sh [--data-delay-s 0.05] [--optimizer sgd --lr 0.1] ...
# Arguments are options of `python -m slurm_sched.runtime.train` (see its --help); the model,
# batch size and iteration count default to the hints in --comment.
# Env: SLURM_SCHED_PYTHON (python with slurm_sched and torch; default python3),
#      SLURM_SCHED_CKPT_DIR (checkpoint root; default ./checkpoints in the job's working
#      directory, --chdir or the submit directory; must be visible from every node the job may
#      move to).
#SBATCH --job-name=torch-train
#SBATCH --requeue
#SBATCH --open-mode=append
set -euo pipefail

PYTHON=${SLURM_SCHED_PYTHON:-python3}
echo "[torch-train ${SLURM_JOB_ID:-local}] start node=${SLURMD_NODENAME:-?}" \
  "gpus=${CUDA_VISIBLE_DEVICES:-none} restart=${SLURM_RESTART_COUNT:-0}"
# exec: the launcher becomes the batch shell, so `scancel --batch --signal=USR1` reaches it
exec "$PYTHON" -m slurm_sched.runtime.launch -- -m slurm_sched.runtime.train "$@"
