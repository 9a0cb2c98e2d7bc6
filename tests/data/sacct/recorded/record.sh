#!/usr/bin/env bash
# record.sh OUTDIR - record sacct output of a mixed GPU workload on a running mini cluster
# (SLURM_CONF set, e.g. `eval "$(bash slurm_sched/slurm/cluster.sh env)"`), in both formats the
# advisor reads: OUTDIR/sacct.txt (-P with a header) and OUTDIR/sacct.json (--json), plus
# OUTDIR/version.txt. The workload runs in the unmanaged partition `direct` (Slurm schedules it):
# 1-, 2- and 4-GPU jobs, a typed GPU request, a 2-node job, an array, jobs of two accounts with
# a hint comment, a failed job, a job cancelled while pending, one cancelled while running, one
# requeued by an admin, and one still running and one still pending when sacct is read.
set -euo pipefail
out=${1:?usage: record.sh OUTDIR}
mkdir -p "$out"
sacctmgr -i add account alpha,beta >/dev/null || true
sacctmgr -i add user root account=alpha,beta >/dev/null || true
sub() { sbatch --parsable -p direct "$@"; }
sub -A alpha -t 5 --gres=gpu:1 --comment='{"v":1,"model":"resnet50","batch_size":64}' --wrap 'sleep 3' >/dev/null
sub -A alpha -t 5 --gres=gpu:2 --wrap 'sleep 4' >/dev/null
sub -A beta -t 10 --gres=gpu:4 --wrap 'sleep 5' >/dev/null
sub -A beta -t 3 --gres=gpu:a100:2 --wrap 'sleep 2' >/dev/null
sub -A alpha -t 5 -N 2 --gres=gpu:4 --wrap 'sleep 3' >/dev/null
sub -A beta -t 2 --array=0-2 --gres=gpu:1 --wrap 'sleep 2' >/dev/null
sub -A alpha -t 2 --gres=gpu:1 --wrap 'exit 3' >/dev/null
hold=$(sub -A beta -t 2 --gres=gpu:1 -H --wrap 'sleep 1')
run=$(sub -A alpha -t 5 --gres=gpu:1 --wrap 'sleep 30')
rq=$(sub -A beta -t 5 --gres=gpu:1 --wrap 'sleep 4')
running() { [ "$(squeue -h -j "$1" -o %T)" = RUNNING ]; }
for _ in $(seq 1 100); do running "$run" && running "$rq" && break; sleep 0.2; done
scancel "$hold"
scancel "$run"
scontrol requeue "$rq"
sleep 15
long=$(sub -A alpha -t 10 --gres=gpu:1 --wrap 'sleep 300')
sub -A beta -t 10 --gres=gpu:1 -H --wrap 'sleep 1' >/dev/null
# slurmctld sends job records to slurmdbd asynchronously: give the running job's start time
sleep 8
cols=JobID,JobIDRaw,User,Account,Partition,QOS,State,ExitCode,Submit,Eligible,Start,End,Timelimit,AllocTRES,ReqTRES,NodeList,Comment
sacct -X -a -P --starttime now-1days --format="$cols" >"$out/sacct.txt"
sacct -X -a --starttime now-1days --json >"$out/sacct.json"
sacct -V >"$out/version.txt"
scancel "$long"
scancel -u root -p direct --state=PENDING || true
