#!/usr/bin/env bash
# cluster.sh - a real Slurm mini cluster on this machine, for tests, demos and docker.
#
#   cluster.sh up              install packages if missing, write configs, start daemons,
#                              wait until every node is idle (no-op when already up)
#   cluster.sh down [--purge]  cancel all jobs, stop the daemons; --purge also deletes the state
#   cluster.sh status          daemons and nodes; exit 0 when up, 3 when not
#   cluster.sh env             print the env file (eval "$(cluster.sh env)")
#   cluster.sh ctld stop|kill|start
#                              stop slurmctld alone (SIGTERM: it saves its state; jobs keep
#                              running on the slurmds), kill it (SIGKILL: a crash, no last save)
#                              or start it again from its state dir: fault tests of the scheduler
#   cluster.sh node kill|start NAME
#                              crash node NAME (SIGKILL its slurmd, slurmstepds and job
#                              processes: Slurm marks it DOWN after SlurmdTimeout) or start its
#                              slurmd again (ReturnToService=2 puts it back in service)
#
# Needs root and Debian/Ubuntu packages munge slurmctld slurmd slurm-client, plus slurmdbd and
# mariadb-server for accounting (installed with apt-get when missing). No systemd, cgroups or containers: one munged, one slurmctld and one
# `slurmd -N <node>` per node (Debian builds Slurm with MULTIPLE_SLURMD), each node on its own
# port on 127.0.0.1. GPUs are fake: gres.conf File= points at symlinks to /dev/null, which is
# enough for Slurm to hand out device indices (CUDA_VISIBLE_DEVICES) per job.
#
# Knobs (environment):
#   MINI_SLURM_STATE=/tmp/slurm-sched-cluster   state dir (configs, logs, spool, munge)
#   MINI_SLURM_NODES="a100-1:a100:4 a100-2:a100:4 v100-1:v100:4 v100-2:v100:4"
#                     name:gputype:count per node; count 0 (e.g. cpu-1::0) = CPU-only node
#   MINI_SLURM_NODE_CPUS=16  MINI_SLURM_NODE_MEM_MB=64000   what every node advertises
#   MINI_SLURM_SHARDS_PER_GPU=8   gres/shard per GPU (GPU sharing: a job asks --gres=shard:N
#                     and jobs on the same GPU see the same CUDA_VISIBLE_DEVICES); 0 = off
#   MINI_SLURM_PARTITION=sched    the partition our scheduler manages (Default=YES, GPU nodes)
#   MINI_SLURM_LEASE_S=120        the submit plugin's fail-open lease: managed jobs get a begin
#                     time this far ahead; Slurm starts them itself unless the scheduler renews it
#   MINI_SLURM_SCHED_INTERVAL=10  Slurm's periodic main scheduling pass (sched_interval, Slurm's
#                     default 60): a job whose lease ran out starts at the next pass at the latest
#   MINI_SLURM_UNMANAGED_PARTITION=direct   all nodes, scheduled by Slurm itself ("" = none)
#   MINI_SLURM_CTLD_PORT=16817  MINI_SLURM_SLURMD_PORT=17001 (first node; +1 per node)
#   MINI_SLURM_MIN_JOB_AGE=600    seconds finished jobs stay visible in squeue
#   MINI_SLURM_SLURMD_TIMEOUT=30  SlurmdTimeout: a node whose slurmd does not answer this long is
#                     marked DOWN and its jobs requeued or failed (Slurm's default 300)
#   MINI_SLURM_ACCOUNTING=1       run slurmdbd on a private MariaDB (data under the state dir) so
#                     that sacct answers; 0 = no accounting (finished jobs go to log/jobcomp.txt
#                     only, as they also do with accounting)
#   MINI_SLURM_DBD_PORT=<ctld port + 2>  MINI_SLURM_DB_PORT=<ctld port + 3>  slurmdbd and MariaDB
#                     (both on 127.0.0.1 only)
#   MINI_SLURM_PLUGIN=<path>      job_submit.lua to install (default: next to this script,
#                                 else plugin/job_submit.lua of the source tree)
#   MINI_SLURM_UP_TIMEOUT=30      seconds to wait for all nodes to be idle
#   MINI_SLURM_PREFIX=<dir>       run the Slurm installed under this prefix (its bin/ and sbin/
#                                 first on PATH; scripts/slurm-build.sh prints one) instead of
#                                 the apt packages; it must be configured with
#                                 --enable-multiple-slurmd. env.sh then exports that PATH too
#
# Every process this script stops is found through the state dir (PID files, or processes
# holding a socket under its spool dir, and their children); nothing is matched by name.
#
# Under pipefail no pipe ends in a reader that stops early (grep -q, head): its writer would die
# of SIGPIPE and fail the whole pipeline at random. grep ... >/dev/null reads to the end.
set -euo pipefail

STATE=${MINI_SLURM_STATE:-/tmp/slurm-sched-cluster}
STATE=${STATE%/}
NODES=${MINI_SLURM_NODES:-"a100-1:a100:4 a100-2:a100:4 v100-1:v100:4 v100-2:v100:4"}
NODE_CPUS=${MINI_SLURM_NODE_CPUS:-16}
NODE_MEM_MB=${MINI_SLURM_NODE_MEM_MB:-64000}
SHARDS_PER_GPU=${MINI_SLURM_SHARDS_PER_GPU:-8}
PARTITION=${MINI_SLURM_PARTITION:-sched}
UNMANAGED=${MINI_SLURM_UNMANAGED_PARTITION-direct}
LEASE_S=${MINI_SLURM_LEASE_S:-120}
SCHED_INTERVAL=${MINI_SLURM_SCHED_INTERVAL:-10}
CTLD_PORT=${MINI_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${MINI_SLURM_SLURMD_PORT:-17001}
MIN_JOB_AGE=${MINI_SLURM_MIN_JOB_AGE:-600}
SLURMD_TIMEOUT=${MINI_SLURM_SLURMD_TIMEOUT:-30}
UP_TIMEOUT=${MINI_SLURM_UP_TIMEOUT:-30}
ACCOUNTING=${MINI_SLURM_ACCOUNTING:-1}
DBD_PORT=${MINI_SLURM_DBD_PORT:-$((CTLD_PORT + 2))}
DB_PORT=${MINI_SLURM_DB_PORT:-$((CTLD_PORT + 3))}
PREFIX=${MINI_SLURM_PREFIX:-}
PREFIX=${PREFIX%/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PLUGIN=""
NEW_ETC=""
MARKER=.slurm-sched-cluster
CONF=$STATE/etc/slurm.conf
PKGS="munge slurmctld slurmd slurm-client"

log() { echo "[cluster.sh] $*" >&2; }
die() { echo "[cluster.sh] ERROR: $*" >&2; exit 1; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

# a PID from a PID file, when that process is alive and belongs to this state dir
our_pid() {
  local f=$1 p
  [ -s "$f" ] || return 1
  p=$(tr -dc 0-9 <"$f")
  [ -n "$p" ] && [ -r "/proc/$p/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$p/cmdline" | grep -F -- "$STATE/" >/dev/null || return 1
  echo "$p"
}

node_names() { local s; for s in $NODES; do echo "${s%%:*}"; done; }

check_settings() {
  case "$STATE" in
    "" | / | /tmp | /var | /var/tmp | /root | /home | "$HOME") die "refusing state dir '$STATE'" ;;
  esac
  [[ $STATE == /* ]] || die "MINI_SLURM_STATE must be an absolute path, got '$STATE'"
  local v
  for v in NODE_CPUS NODE_MEM_MB SHARDS_PER_GPU CTLD_PORT SLURMD_PORT MIN_JOB_AGE SLURMD_TIMEOUT UP_TIMEOUT LEASE_S SCHED_INTERVAL DBD_PORT DB_PORT; do
    is_int "${!v}" || die "MINI_SLURM_$v must be a non-negative integer, got '${!v}'"
  done
  [ -n "$NODES" ] || die "MINI_SLURM_NODES is empty"
  local n_nodes
  n_nodes=$(wc -w <<<"$NODES")
  [ "$CTLD_PORT" -ge 1024 ] && [ "$CTLD_PORT" -le 65535 ] ||
    die "MINI_SLURM_CTLD_PORT must be in 1024..65535, got $CTLD_PORT"
  [ "$SLURMD_PORT" -ge 1024 ] && [ $((SLURMD_PORT + n_nodes - 1)) -le 65535 ] ||
    die "MINI_SLURM_SLURMD_PORT $SLURMD_PORT + $n_nodes nodes does not fit in 1024..65535"
  [[ $ACCOUNTING == [01] ]] || die "MINI_SLURM_ACCOUNTING must be 0 or 1, got '$ACCOUNTING'"
  if [ "$ACCOUNTING" = 1 ]; then
    local p
    for p in DBD_PORT DB_PORT; do
      [ "${!p}" -ge 1024 ] && [ "${!p}" -le 65535 ] ||
        die "MINI_SLURM_$p must be in 1024..65535, got ${!p}"
    done
  fi
  local spec name type count
  for spec in $NODES; do
    IFS=: read -r name type count <<<"$spec"
    [[ $name =~ ^[a-z][a-z0-9-]*$ ]] || die "bad node name '$name' in MINI_SLURM_NODES"
    [[ -z $type || $type =~ ^[a-z0-9]+$ ]] || die "bad GPU type '$type' for node $name"
    is_int "${count:-0}" || die "bad GPU count '$count' for node $name"
  done
  [[ $PARTITION =~ ^[a-z][a-z0-9_-]*$ ]] || die "bad MINI_SLURM_PARTITION '$PARTITION'"
  [[ -z $UNMANAGED || $UNMANAGED =~ ^[a-z][a-z0-9_-]*$ ]] ||
    die "bad MINI_SLURM_UNMANAGED_PARTITION '$UNMANAGED'"
  [ "$UNMANAGED" != "$PARTITION" ] || die "managed and unmanaged partition are both '$PARTITION'"
  if [ -n "$PREFIX" ]; then
    [[ $PREFIX == /* ]] || die "MINI_SLURM_PREFIX must be an absolute path, got '$PREFIX'"
    [ -x "$PREFIX/sbin/slurmctld" ] && [ -x "$PREFIX/sbin/slurmd" ] && [ -x "$PREFIX/bin/scontrol" ] ||
      die "MINI_SLURM_PREFIX=$PREFIX has no sbin/slurmctld, sbin/slurmd and bin/scontrol"
    # plugins are in lib/slurm of a source build, lib/<triplet>/slurm-wlm of Debian's packages
    if [ "$ACCOUNTING" = 1 ] && { [ ! -x "$PREFIX/sbin/slurmdbd" ] ||
      [ -z "$(find "$PREFIX/lib" -maxdepth 3 -path '*slurm*' -name accounting_storage_mysql.so \
        -print -quit 2>/dev/null)" ]; }; then
      die "MINI_SLURM_PREFIX=$PREFIX has no slurmdbd with the MySQL accounting plugin (build it with libmariadb-dev present: scripts/slurm-build.sh), or set MINI_SLURM_ACCOUNTING=0"
    fi
    export PATH="$PREFIX/bin:$PREFIX/sbin:$PATH"
  fi
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (slurmd runs jobs as their users)"; }

# serialise up/down of the same state dir (two test sessions, CLI + tests)
take_lock() {
  mkdir -p "$(dirname "$STATE")"
  exec 9>"$STATE.lock"
  flock -w 120 9 || die "another cluster.sh holds $STATE.lock"
}

install_packages() {
  # a Slurm under MINI_SLURM_PREFIX brings its own daemons and clients; munge still comes from apt
  [ -n "$PREFIX" ] && PKGS=munge
  if [ "$ACCOUNTING" = 1 ]; then
    PKGS="$PKGS mariadb-server"
    [ -n "$PREFIX" ] || PKGS="$PKGS slurmdbd"
  fi
  # shellcheck disable=SC2086
  dpkg -s $PKGS >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null || die "packages $PKGS are missing and apt-get is not available"
  log "installing $PKGS"
  export DEBIAN_FRONTEND=noninteractive
  # the postinst scripts may try to start services; without systemd nothing starts, and we
  # only ever manage daemons we started ourselves
  # shellcheck disable=SC2086
  if ! apt-get install -y --no-install-recommends $PKGS >"$STATE.apt.log" 2>&1; then
    apt-get update >>"$STATE.apt.log" 2>&1 || true
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $PKGS >>"$STATE.apt.log" 2>&1 ||
      { tail -n 20 "$STATE.apt.log" >&2; die "apt-get install $PKGS failed"; }
  fi
  rm -f "$STATE.apt.log"
}

find_plugin() {
  local p
  for p in "${MINI_SLURM_PLUGIN:-}" "$HERE/job_submit.lua" "$HERE/../../plugin/job_submit.lua"; do
    [ -n "$p" ] && [ -f "$p" ] && { echo "$p"; return 0; }
  done
  die "job_submit.lua not found (set MINI_SLURM_PLUGIN)"
}

port_in_use() { # LISTEN sockets on 127.0.0.1/0.0.0.0/:: with this port
  local hex
  hex=$(printf '%04X' "$1")
  awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# ------------------------------------------------------------------ config generation
# Writes slurm.conf, gres.conf, cgroup.conf and job_submit.lua into $1 (an etc dir).
write_configs() {
  local etc=$1 host spec name type count i=0 gpu_nodes="" all_nodes="" gres gres_types=gpu
  host=$(uname -n)
  host=${host%%.*}
  [ "$SHARDS_PER_GPU" -gt 0 ] && gres_types=gpu,shard
  local acct_types=""
  for spec in $NODES; do
    IFS=: read -r name type count <<<"$spec"
    [ -n "$type" ] && [ "${count:-0}" -gt 0 ] && [[ $acct_types != *",gres/gpu:$type,"* ]] &&
      acct_types="$acct_types,gres/gpu:$type,"
  done
  acct_types=$(sed 's/,,/,/g; s/,$//' <<<"$acct_types")
  mkdir -p "$etc"
  {
    cat <<EOF
# Generated by slurm_sched/slurm/cluster.sh - do not edit; change the MINI_SLURM_* knobs.
ClusterName=slurmsched
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a private munged; every client reaches it through this socket
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups needed: processes are tracked through their parent pids
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
EOF
    if [ "$ACCOUNTING" = 1 ]; then
      cat <<EOF
# accounting in slurmdbd (its MariaDB keeps its data in the state dir): sacct answers; the job
# comment is stored because it carries the scheduler's hints
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# for munge, the socket of the private munged (AuthInfo does not cover the slurmdbd connection)
AccountingStoragePass=$STATE/munge/munge.socket
AccountingStoreFlags=job_comment
# GPUs are accounted only when named here (sacct's AllocTRES shows gres/gpu and gres/gpu:<type>)
AccountingStorageTRES=gres/gpu,gres/shard$acct_types
EOF
    else
      echo "AccountingStorageType=accounting_storage/none"
    fi
    cat <<EOF
# finished jobs are also appended to a text file (sacct -c reads it)
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
SchedulerType=sched/backfill
# start a pinned job at once instead of up to 3 s later; the periodic pass (sched_interval) bounds
# how long a job whose lease ran out waits for Slurm when nothing else happens (fail-open);
# default_queue_depth: an event-triggered pass looks at this many eligible jobs (Slurm: 100), so
# a go of 500 pinned jobs starts them in one pass instead of 100 now and the rest at the next
# periodic pass (leased jobs are not eligible and do not count)
SchedulerParameters=batch_sched_delay=0,sched_interval=$SCHED_INTERVAL,default_queue_depth=1000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default, a job would get all memory of its node, i.e. the whole node
DefMemPerCPU=1024
# nodes advertise the CPUs/RealMemory/Gres below, not this machine's hardware
SlurmdParameters=config_overrides
ReturnToService=2
# how long a crashed node's jobs stay RUNNING before Slurm marks it DOWN (pinged every third)
SlurmdTimeout=$SLURMD_TIMEOUT
# requeue is the scheduler's preempt and migrate primitive
JobRequeue=1
MinJobAge=$MIN_JOB_AGE
KillWait=5
MailProg=/bin/true
# every job in partition $PARTITION gets a begin-time lease at submit and its hints are checked
JobSubmitPlugins=lua
GresTypes=$gres_types
EOF
    for spec in $NODES; do
      IFS=: read -r name type count <<<"$spec"
      count=${count:-0}
      gres=""
      if [ "$count" -gt 0 ]; then
        gres=" Gres=gpu:${type:+$type:}$count"
        [ "$SHARDS_PER_GPU" -gt 0 ] &&
          gres="$gres,shard:${type:+$type:}$((count * SHARDS_PER_GPU))"
        gpu_nodes="$gpu_nodes,$name"
      fi
      echo "NodeName=$name NodeHostname=$host NodeAddr=127.0.0.1 Port=$((SLURMD_PORT + i))" \
        "CPUs=$NODE_CPUS RealMemory=$NODE_MEM_MB${type:+ Feature=$type}$gres State=UNKNOWN"
      all_nodes="$all_nodes,$name"
      i=$((i + 1))
    done
    echo "# managed by the slurm_sched scheduler (job_submit.lua: hints checked, lease of $LEASE_S s)"
    echo "PartitionName=$PARTITION Nodes=${gpu_nodes#,} Default=YES MaxTime=INFINITE State=UP"
    if [ -n "$UNMANAGED" ]; then
      echo "# scheduled by Slurm itself (the scheduler sees these jobs as foreign load)"
      echo "PartitionName=$UNMANAGED Nodes=${all_nodes#,} MaxTime=INFINITE State=UP"
    fi
  } >"$etc/slurm.conf"
  [ -n "$gpu_nodes" ] || die "MINI_SLURM_NODES has no GPU node, partition $PARTITION would be empty"

  {
    echo "# Generated by cluster.sh: fake GPUs (symlinks to /dev/null), $SHARDS_PER_GPU shards per GPU"
    echo "AutoDetect=off"
    for spec in $NODES; do
      IFS=: read -r name type count <<<"$spec"
      count=${count:-0}
      [ "$count" -gt 0 ] || continue
      echo "NodeName=$name Name=gpu${type:+ Type=$type} File=$STATE/dev/$name/nvidia[0-$((count - 1))]"
      [ "$SHARDS_PER_GPU" -gt 0 ] &&
        echo "NodeName=$name Name=shard${type:+ Type=$type} Count=$((count * SHARDS_PER_GPU))"
    done
  } >"$etc/gres.conf"

  if [ "$ACCOUNTING" = 1 ]; then
    # slurmdbd reads slurmdbd.conf next to slurm.conf and insists on mode 0600
    cat >"$etc/slurmdbd.conf" <<EOF
# Generated by slurm_sched/slurm/cluster.sh - do not edit; change the MINI_SLURM_* knobs.
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 0600 "$etc/slurmdbd.conf"
  fi

  # only read if someone switches to cgroup plugins; harmless otherwise
  printf '%s\n' "CgroupPlugin=autodetect" "IgnoreSystemd=yes" >"$etc/cgroup.conf"

  sed -e "s/^local MANAGED_PARTITIONS = .*/local MANAGED_PARTITIONS = \"$PARTITION\" -- set by cluster.sh/" \
    -e "s/^local DEFAULT_PARTITION = .*/local DEFAULT_PARTITION = \"$PARTITION\" -- set by cluster.sh/" \
    -e "s/^local LEASE_S = .*/local LEASE_S = $LEASE_S -- set by cluster.sh/" \
    "$PLUGIN" >"$etc/job_submit.lua"
  grep -q "^local MANAGED_PARTITIONS = \"$PARTITION\"" "$etc/job_submit.lua" ||
    die "could not set the managed partition in job_submit.lua"
  grep -q "^local LEASE_S = $LEASE_S " "$etc/job_submit.lua" ||
    die "could not set the lease in job_submit.lua"

  cat >"$etc/env.sh" <<EOF
# source me: the environment for Slurm clients of the mini cluster
export SLURM_CONF=$CONF
export MINI_SLURM_STATE=$STATE
export MINI_SLURM_MANAGED_PARTITIONS=$PARTITION
export MINI_SLURM_DEFAULT_PARTITION=$PARTITION
export MINI_SLURM_UNMANAGED_PARTITIONS=$UNMANAGED
export MINI_SLURM_NODES="$NODES"
export MINI_SLURM_SHARDS_PER_GPU=$SHARDS_PER_GPU
export MINI_SLURM_LEASE_S=$LEASE_S
EOF
  if [ -n "$PREFIX" ]; then
    printf '%s\n' "export MINI_SLURM_PREFIX=$PREFIX" \
      "export PATH=$PREFIX/bin:$PREFIX/sbin:\$PATH" >>"$etc/env.sh"
  fi
}

all_up() {
  our_pid "$STATE/munge/munged.pid" >/dev/null || return 1
  if [ "$ACCOUNTING" = 1 ]; then
    our_pid "$STATE/run/mariadbd.pid" >/dev/null && dbd_pid >/dev/null || return 1
  fi
  our_pid "$STATE/run/slurmctld.pid" >/dev/null || return 1
  local n
  for n in $(node_names); do our_pid "$STATE/run/slurmd-$n.pid" >/dev/null || return 1; done
  SLURM_CONF=$CONF timeout 5 scontrol ping 2>/dev/null | grep UP >/dev/null
}

show_logs() {
  local f
  for f in "$STATE"/log/slurmctld.log "$STATE"/log/slurmd-*.log "$STATE"/munge/munged.log \
    "$STATE"/log/slurmdbd.log "$STATE"/log/mariadbd.log; do
    [ -s "$f" ] || continue
    echo "---- tail $f" >&2
    tail -n 15 "$f" >&2
  done
}

# ------------------------------------------------------------------ accounting
# slurmdbd takes no config path on its command line (it reads slurmdbd.conf next to $SLURM_CONF),
# so ours is the process named in its PID file that has our SLURM_CONF in its environment
dbd_pid() {
  local p
  [ -s "$STATE/run/slurmdbd.pid" ] || return 1
  p=$(tr -dc 0-9 <"$STATE/run/slurmdbd.pid")
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmdbd ] || return 1
  grep -qzx -F "SLURM_CONF=$CONF" "/proc/$p/environ" 2>/dev/null || return 1
  echo "$p"
}

db_sql() { mariadb --no-defaults --socket="$STATE/run/mariadbd.sock" -uroot -e "$1"; }

# MariaDB (data in $STATE/db, TCP on 127.0.0.1:$DB_PORT), then slurmdbd, then the cluster's record
start_accounting() {
  local deadline
  if [ ! -d "$STATE/db/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$STATE/db" --user=root --skip-test-db \
      --auth-root-authentication-method=socket >"$STATE/log/mariadb-install.log" 2>&1 ||
      { tail -n 20 "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  port_in_use "$DB_PORT" && die "port $DB_PORT (MariaDB) is in use; set MINI_SLURM_DB_PORT"
  port_in_use "$DBD_PORT" && die "port $DBD_PORT (slurmdbd) is in use; set MINI_SLURM_DBD_PORT"
  setsid -f mariadbd --no-defaults --datadir="$STATE/db" --user=root \
    --socket="$STATE/run/mariadbd.sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
    --pid-file="$STATE/run/mariadbd.pid" --log-error="$STATE/log/mariadbd.log" \
    --innodb-buffer-pool-size=32M --skip-name-resolve </dev/null >/dev/null 2>&1 9>&-
  deadline=$(($(date +%s) + UP_TIMEOUT))
  until db_sql "SELECT 1" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { show_logs; die "MariaDB not answering after ${UP_TIMEOUT}s"; }
    sleep 0.2
  done
  db_sql "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "cannot create MariaDB user slurm"
  slurmdbd 9>&- || { show_logs; die "slurmdbd did not start"; }
  # the first start creates the database tables (a few seconds)
  until timeout 5 sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { show_logs; die "slurmdbd not answering after ${UP_TIMEOUT}s"; }
    sleep 0.2
  done
  if ! timeout 5 sacctmgr -n -P list cluster format=cluster | grep -x slurmsched >/dev/null; then
    timeout 10 sacctmgr -i add cluster slurmsched >/dev/null || die "sacctmgr add cluster slurmsched failed"
  fi
}

stop_accounting() { # slurmdbd first: it writes what slurmctld sent it to the database
  local p n=0
  if p=$(dbd_pid); then stop_pid "$p"; n=$((n + 1)); fi
  if p=$(our_pid "$STATE/run/mariadbd.pid"); then stop_pid "$p"; n=$((n + 1)); fi
  echo "$n"
}

# ------------------------------------------------------------------ down
descendants() { # pids of all descendants of $1
  local kids k
  # field 2 of /proc/N/stat is "(comm)" and may contain spaces: cut it off first
  kids=$(awk -v p="$1" '{ s = $0; sub(/^.*\) /, "", s); split(s, a, " "); if (a[2] == p) print $1 }' \
    /proc/[0-9]*/stat 2>/dev/null || true)
  for k in $kids; do echo "$k"; descendants "$k"; done
}

wait_gone() { # pid [tenths of a second]
  local n=${2:-50}
  while [ "$n" -gt 0 ]; do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}

stop_pid() { kill -0 "$1" 2>/dev/null || return 0; kill "$1" 2>/dev/null || true
  wait_gone "$1" 30 || kill -9 "$1" 2>/dev/null || true; }

# slurmstepds (and their job processes) holding a unix socket under our spool dir (or under $1)
leftover_steps() {
  local inodes dir=${1:-$STATE/spool/}
  inodes=$(awk -v d="$dir" 'index($8, d) == 1 { print $7 }' /proc/net/unix 2>/dev/null)
  [ -n "$inodes" ] || return 0
  # one find lists every socket descriptor ("/proc/PID/fd socket:[INODE]"): a readlink per
  # descriptor would fork a thousand times, seconds on a busy machine
  find /proc/[0-9]*/fd -maxdepth 1 -lname 'socket:*' -printf '%h %l\n' 2>/dev/null |
    awk -v list="$inodes" '
      BEGIN { n = split(list, a, "\n"); for (i = 1; i <= n; i++) want[a[i]] = 1 }
      { ino = $2; gsub(/^socket:\[|\]$/, "", ino)
        if (ino in want) { split($1, p, "/"); print p[3] } }' |
    sort -u
}

leftover_job_processes() { # pids with SLURM_JOB_ID and SLURM_CONF=$CONF in their environment
  local files
  files=$(grep -lzx -F "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null || true)
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086
  grep -lz '^SLURM_JOB_ID=' $files 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' |
    grep -vx "$$" || true
}

cmd_down() {
  local purge=0 p n stopped=0
  [ "${1:-}" = --purge ] && purge=1
  if [ ! -e "$STATE" ]; then log "nothing at $STATE"; rm -f "$STATE.lock"; return 0; fi
  [ -f "$STATE/$MARKER" ] || die "$STATE exists but is not a mini cluster (no $MARKER); not touching it"
  export SLURM_CONF=$CONF
  local daemons=""
  for n in "$STATE"/run/slurmctld.pid "$STATE"/run/slurmd-*.pid; do
    p=$(our_pid "$n") && daemons="$daemons $p"
  done
  if our_pid "$STATE/run/slurmctld.pid" >/dev/null; then
    # cancel every job first, so no job process outlives its slurmd
    local jobs
    jobs=$(timeout 10 squeue -h -t PD,R,S,CG,CF -o %i 2>/dev/null | tr '\n' ' ' || true)
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086
      timeout 10 scancel $jobs 2>/dev/null || true
      for _ in $(seq 1 50); do
        [ -z "$(timeout 5 squeue -h -t R,S,CG -o %i 2>/dev/null || true)" ] && break
        sleep 0.1
      done
    fi
    timeout 10 scontrol shutdown >/dev/null 2>&1 || true # slurmctld and every slurmd exit
  fi
  for p in $daemons; do
    wait_gone "$p" 50 || stop_pid "$p"
    stopped=$((stopped + 1))
  done
  for p in $(leftover_steps); do
    local kids
    kids=$(descendants "$p")
    log "stopping leftover slurmstepd $p${kids:+ and its processes $(echo $kids)}"
    for n in $p $kids; do kill -9 "$n" 2>/dev/null || true; done
  done
  # job processes whose slurmstepd is already gone (reparented to init; seen after cancelling
  # hundreds of jobs at once): they carry our SLURM_CONF and a job id in their environment
  local orphans
  orphans=$(leftover_job_processes)
  if [ -n "$orphans" ]; then
    log "stopping leftover job processes $(echo $orphans)"
    # shellcheck disable=SC2086
    kill -9 $orphans 2>/dev/null || true
  fi
  stopped=$((stopped + $(stop_accounting)))
  if p=$(our_pid "$STATE/munge/munged.pid"); then stop_pid "$p"; stopped=$((stopped + 1)); fi
  log "stopped $stopped daemon(s) of $STATE"
  if [ "$purge" = 1 ]; then
    rm -rf "$STATE"
    rm -f "$STATE.lock"
    log "removed $STATE"
  fi
}

# ------------------------------------------------------------------ up
cmd_up() {
  need_root
  install_packages
  PLUGIN=$(find_plugin) || exit 1
  NEW_ETC=$STATE.new.$$
  rm -rf "$NEW_ETC"
  trap 'rm -rf "$NEW_ETC"' EXIT
  write_configs "$NEW_ETC"
  if [ -f "$STATE/$MARKER" ] && all_up &&
    diff -rq "$NEW_ETC" "$STATE/etc" >/dev/null 2>&1; then
    log "already up ($STATE)"
    cat "$STATE/env.sh"
    return 0
  fi

  if [ -e "$STATE" ]; then
    if [ -f "$STATE/$MARKER" ]; then
      cmd_down >/dev/null 2>&1 || true
      rm -rf "$STATE"
    elif [ -n "$(ls -A "$STATE")" ]; then
      die "$STATE exists, is not empty and is not a mini cluster (no $MARKER); refusing to use it"
    fi
  fi
  local port n i=0 spec name type count g
  port_in_use "$CTLD_PORT" && die "port $CTLD_PORT (slurmctld) is in use; set MINI_SLURM_CTLD_PORT"
  for n in $(node_names); do
    port=$((SLURMD_PORT + i))
    port_in_use "$port" && die "port $port (slurmd $n) is in use; set MINI_SLURM_SLURMD_PORT"
    i=$((i + 1))
  done

  mkdir -p "$STATE"
  touch "$STATE/$MARKER"
  mkdir -p "$STATE"/{ctld,spool,log,run,dev,munge,db}
  mv "$NEW_ETC" "$STATE/etc"
  cp "$STATE/etc/env.sh" "$STATE/env.sh"
  for spec in $NODES; do
    IFS=: read -r name type count <<<"$spec"
    mkdir -p "$STATE/dev/$name"
    for ((g = 0; g < ${count:-0}; g++)); do ln -sf /dev/null "$STATE/dev/$name/nvidia$g"; done
  done
  # munged insists on a 0755 socket dir and a private key
  chmod 0755 "$STATE" "$STATE/munge"
  dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$STATE/munge/munge.key"

  local t0 t1 want idle=0 deadline
  t0=$(date +%s.%N)
  export SLURM_CONF=$CONF
  munged --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed" 9>&- ||
    { show_logs; die "munged did not start"; }
  # 9>&-: the daemons must not inherit (and so hold) our lock
  if [ "$ACCOUNTING" = 1 ]; then start_accounting; fi
  slurmctld -f "$CONF" 9>&- || { show_logs; cmd_down >/dev/null 2>&1; die "slurmctld did not start"; }
  for n in $(node_names); do
    slurmd -f "$CONF" -N "$n" 9>&- || { show_logs; cmd_down >/dev/null 2>&1; die "slurmd -N $n did not start"; }
  done

  want=$(node_names | wc -l)
  deadline=$(($(date +%s) + UP_TIMEOUT))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    idle=$(timeout 5 sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l || true)
    [ "$idle" = "$want" ] && break
    our_pid "$STATE/run/slurmctld.pid" >/dev/null || { sleep 0.5; our_pid "$STATE/run/slurmctld.pid" >/dev/null || break; }
    sleep 0.1
  done
  t1=$(date +%s.%N)
  if [ "$idle" != "$want" ]; then
    timeout 5 sinfo -N -o '%N %T %E' >&2 || true
    show_logs
    cmd_down >/dev/null 2>&1 || true
    die "only $idle of $want nodes became idle within ${UP_TIMEOUT}s (daemons stopped; logs in $STATE/log)"
  fi
  log "up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s: $want nodes idle, state $STATE"
  cat "$STATE/env.sh"
}

# ------------------------------------------------------------------ ctld stop|start
# Only slurmctld: the slurmds and the jobs they run go on (as when the controller host
# reboots). slurmctld saves its state on SIGTERM and recovers it on start.
cmd_ctld() {
  local what=${1:-} p deadline
  [ -f "$STATE/$MARKER" ] || die "no cluster at $STATE"
  export SLURM_CONF=$CONF
  case "$what" in
    stop)
      if p=$(our_pid "$STATE/run/slurmctld.pid"); then
        stop_pid "$p"
        log "slurmctld (pid $p) stopped"
      else
        log "slurmctld is not running"
      fi
      ;;
    kill)
      if p=$(our_pid "$STATE/run/slurmctld.pid"); then
        kill -9 "$p" 2>/dev/null || true
        wait_gone "$p" 50 || die "slurmctld (pid $p) survived SIGKILL"
        log "slurmctld (pid $p) killed"
      else
        log "slurmctld is not running"
      fi
      ;;
    start)
      if our_pid "$STATE/run/slurmctld.pid" >/dev/null; then
        log "slurmctld already runs"
      else
        slurmctld -f "$CONF" 9>&- || { show_logs; die "slurmctld did not start"; }
      fi
      deadline=$(($(date +%s) + UP_TIMEOUT))
      until timeout 5 scontrol ping 2>/dev/null | grep UP >/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { show_logs; die "slurmctld not answering after ${UP_TIMEOUT}s"; }
        sleep 0.1
      done
      log "slurmctld up"
      ;;
    *) die "usage: cluster.sh ctld stop|kill|start" ;;
  esac
}

# ------------------------------------------------------------------ node kill|start
# A node crash: its slurmd first (no job is launched there any more, no job end reaches
# slurmctld), then the slurmstepds holding a socket in its spool dir, their children and any job
# process of the node (SLURMD_NODENAME and our SLURM_CONF in its environment); slurmctld learns of
# the loss after SlurmdTimeout.
node_processes() {
  local name=$1 p files
  for p in $(leftover_steps "$STATE/spool/$name/"); do echo "$p"; descendants "$p"; done
  files=$(grep -lzx -F "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null || true)
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086
  grep -lzx -F "SLURMD_NODENAME=$name" $files 2>/dev/null |
    sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$" || true
}

cmd_node() {
  local what=${1:-} name=${2:-} pids p deadline
  [ -f "$STATE/$MARKER" ] || die "no cluster at $STATE"
  node_names | grep -x -- "$name" >/dev/null || die "no node '$name' in MINI_SLURM_NODES ($(node_names | tr '\n' ' '))"
  export SLURM_CONF=$CONF
  case "$what" in
    kill)
      pids=""
      if p=$(our_pid "$STATE/run/slurmd-$name.pid"); then
        kill -9 "$p" 2>/dev/null || true
        pids=$p
      fi
      # twice: a slurmstepd forked just before slurmd died may start its job after the first look
      for _ in 1 2; do
        local found
        found=$(node_processes "$name" | sort -u | tr '\n' ' ')
        # shellcheck disable=SC2086
        [ -n "${found// /}" ] && kill -9 $found 2>/dev/null || true
        pids="$pids $found"
      done
      for p in $pids; do wait_gone "$p" 50 || die "process $p of node $name survived SIGKILL"; done
      log "node $name crashed: killed $(tr ' ' '\n' <<<"$pids" | sort -u | grep -c . || true) process(es)"
      ;;
    start)
      if our_pid "$STATE/run/slurmd-$name.pid" >/dev/null; then
        log "slurmd $name already runs"
        return 0
      fi
      slurmd -f "$CONF" -N "$name" 9>&- || { show_logs; die "slurmd -N $name did not start"; }
      deadline=$(($(date +%s) + UP_TIMEOUT))
      until our_pid "$STATE/run/slurmd-$name.pid" >/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { show_logs; die "slurmd $name not running after ${UP_TIMEOUT}s"; }
        sleep 0.1
      done
      log "slurmd $name started"
      ;;
    *) die "usage: cluster.sh node kill|start NAME" ;;
  esac
}

# ------------------------------------------------------------------ status
cmd_status() {
  if [ ! -f "$STATE/$MARKER" ]; then echo "down (no cluster at $STATE)"; return 3; fi
  local rc=0 p f n
  for f in "$STATE/munge/munged.pid" "$STATE/run/slurmctld.pid"; do
    n=$(basename "$f" .pid)
    if p=$(our_pid "$f"); then echo "$n: running (pid $p)"; else echo "$n: not running"; rc=3; fi
  done
  if [ "$ACCOUNTING" = 1 ]; then
    if p=$(our_pid "$STATE/run/mariadbd.pid"); then echo "mariadbd: running (pid $p)"
    else echo "mariadbd: not running"; rc=3; fi
    if p=$(dbd_pid); then echo "slurmdbd: running (pid $p)"; else echo "slurmdbd: not running"; rc=3; fi
  fi
  for n in $(node_names); do
    if p=$(our_pid "$STATE/run/slurmd-$n.pid"); then echo "slurmd $n: running (pid $p)"
    else echo "slurmd $n: not running"; rc=3; fi
  done
  if our_pid "$STATE/run/slurmctld.pid" >/dev/null; then
    SLURM_CONF=$CONF timeout 5 sinfo -N -o '%N %P %T %c %m %G' || rc=3
  fi
  echo "export SLURM_CONF=$CONF"
  return $rc
}

main() {
  local cmd=${1:-}
  shift || true
  check_settings
  case "$cmd" in
    up) take_lock; cmd_up "$@" ;;
    down) need_root; take_lock; cmd_down "$@" ;;
    status) cmd_status ;;
    env) [ -f "$STATE/env.sh" ] || die "no cluster at $STATE"; cat "$STATE/env.sh" ;;
    ctld) need_root; take_lock; cmd_ctld "$@" ;;
    node) need_root; take_lock; cmd_node "$@" ;;
    *) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

main "$@"
