#!/usr/bin/env bash
# slurm-build.sh VERSION - a Slurm of release VERSION (22.05 or 24.11) for the mini cluster.
#
# Prints the install prefix on its last line (stdout); everything else goes to stderr:
#
#   prefix=$(bash scripts/slurm-build.sh 24.11)
#   slurm-sched cluster up --slurm "$prefix"
#
# Where this machine's apt serves the same release (Debian 12: 22.05, Debian 13: 24.11), the
# Debian packages are installed and the prefix is /usr. Otherwise the source tarball of the
# Debian package (bookworm's 22.05.8, trixie's 24.11.5) is fetched with `apt-get source
# --download-only` through a private sources list (the machine's own apt setup is not touched),
# configured with --enable-multiple-slurmd (one slurmd per mini-cluster node on one host) and
# installed under $SLURM_BUILD_CACHE/slurm-<full version>. A finished build is kept there, so a
# second run prints the prefix at once. Build time on 2 cores: about 4 minutes.
#
# Env: SLURM_BUILD_CACHE=/var/cache/slurm-sched   SLURM_BUILD_JOBS=2
#      SLURM_BUILD_FROM_SOURCE=1 builds from source even where apt has the release
#
# Exit status: 0 with the prefix; 2 on a usage error; 1 when the build fails, with one line
# naming the step (e.g. "cannot fetch the source of slurm-wlm 24.11.5-4+deb13u1 from Debian's
# source archive") and the log file.
set -euo pipefail

CACHE=${SLURM_BUILD_CACHE:-/var/cache/slurm-sched}
JOBS=${SLURM_BUILD_JOBS:-2}
FROM_SOURCE=${SLURM_BUILD_FROM_SOURCE:-0}

log() { echo "[slurm-build] $*" >&2; }
die() { echo "[slurm-build] ERROR: $*" >&2; exit 1; }

release=${1:-}
case "$release" in
  22.05) debver=22.05.8-4+deb12u3; suite=bookworm ;;
  24.11) debver=24.11.5-4+deb13u1; suite=trixie ;;
  *) echo "usage: slurm-build.sh 22.05|24.11" >&2; exit 2 ;;
esac
upstream=${debver%%-*}
prefix=$CACHE/slurm-$upstream
# daemons and clients the mini cluster runs (slurmdbd on MariaDB for accounting), and the
# job_submit/lua plugin it loads
RUNTIME_PKGS="munge slurmctld slurmd slurm-client slurmdbd mariadb-server"
# libmariadb-dev: without it configure silently leaves out slurmdbd's MySQL plugin
BUILD_DEPS="build-essential pkg-config libmunge-dev libjson-c-dev liblua5.3-dev libyaml-dev
  libhttp-parser-dev libjwt-dev libhwloc-dev libssl-dev libmariadb-dev python3 munge
  mariadb-server"
export DEBIAN_FRONTEND=noninteractive

apt_install() { # packages...; an `apt-get update` only when the first try fails
  # shellcheck disable=SC2068
  dpkg -s $@ >/dev/null 2>&1 && return 0
  # shellcheck disable=SC2068
  apt-get install -y --no-install-recommends $@ >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 || true; apt-get install -y --no-install-recommends $@ >/dev/null 2>&1; }
}

# apt's candidate version of slurmctld, e.g. 22.05.8-4+deb12u3 ("" when apt has none)
apt_candidate() {
  local v
  v=$(apt-cache policy slurmctld 2>/dev/null | awk '/Candidate:/ { print $2 }')
  if [ -z "$v" ] || [ "$v" = "(none)" ]; then
    apt-get update >/dev/null 2>&1 || true
    v=$(apt-cache policy slurmctld 2>/dev/null | awk '/Candidate:/ { print $2 }')
  fi
  [ "$v" = "(none)" ] && v=""
  echo "$v"
}

# ------------------------------------------------------------------ 1. apt's own package
if [ "$FROM_SOURCE" != 1 ]; then
  cand=$(apt_candidate)
  if [[ $cand == "$release".* ]]; then
    log "apt serves Slurm $cand: installing $RUNTIME_PKGS"
    apt_install "$RUNTIME_PKGS" || die "apt-get install $RUNTIME_PKGS failed"
    echo /usr
    exit 0
  fi
  log "apt serves ${cand:-no Slurm}; building $upstream from Debian's source archive"
fi

# ------------------------------------------------------------------ 2. the cached build
# a build is complete with its marker and slurmdbd's MySQL plugin (a build made without
# libmariadb-dev lacks it and is made again)
complete() {
  [ -x "$prefix/sbin/slurmctld" ] && [ -f "$prefix/.slurm-sched-build" ] &&
    [ -f "$prefix/lib/slurm/accounting_storage_mysql.so" ]
}
if complete; then
  log "cached build: $prefix ($(cat "$prefix/.slurm-sched-build"))"
  echo "$prefix"
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/slurm-$upstream.lock"
flock -w 1800 9 || die "another slurm-build.sh holds $CACHE/slurm-$upstream.lock"
if complete; then
  echo "$prefix"; exit 0
fi
buildlog=$CACHE/slurm-$upstream.build.log
: >"$buildlog"

log "installing the build dependencies"
# shellcheck disable=SC2086
apt_install $BUILD_DEPS || die "apt-get install of the build dependencies failed ($BUILD_DEPS)"

# ------------------------------------------------------------------ 3. the source tarball
src=$CACHE/src
tarball=$src/slurm-wlm_$upstream.orig.tar.gz
mkdir -p "$src"
if [ ! -s "$tarball" ]; then
  aptdir=$CACHE/apt-$suite
  mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial"
  echo "deb-src http://deb.debian.org/debian $suite main" >"$aptdir/sources.list"
  aptopts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache::Archives=$aptdir/archives"
    -o "APT::Get::List-Cleanup=0")
  log "fetching slurm-wlm $debver from Debian's source archive ($suite)"
  apt-get "${aptopts[@]}" update >>"$buildlog" 2>&1 ||
    die "cannot fetch the source of slurm-wlm $debver from Debian's source archive (apt-get update of deb-src $suite failed; log $buildlog)"
  # the .dsc may not be served for a point release; the orig tarball is all the build needs
  (cd "$src" && apt-get "${aptopts[@]}" source --download-only "slurm-wlm=$debver") >>"$buildlog" 2>&1 || true
  [ -s "$tarball" ] ||
    die "cannot fetch the source of slurm-wlm $debver from Debian's source archive (no $(basename "$tarball"); log $buildlog)"
fi

# ------------------------------------------------------------------ 4. configure, make, install
work=$CACHE/build-$upstream
rm -rf "$work" "$prefix"
mkdir -p "$work"
tar -C "$work" -xzf "$tarball"
srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -print -quit)
[ -x "$srcdir/configure" ] || die "no configure script in $tarball"
# newer compilers (gcc 14 on Debian 13) turn these warnings into errors; older Slurm trips them
cflags="-O2 -g0 -Wno-error=incompatible-pointer-types -Wno-error=implicit-function-declaration -Wno-error=int-conversion"
t0=$(date +%s)
log "configure (log $buildlog)"
(cd "$srcdir" && CFLAGS="$cflags" ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" \
  --enable-multiple-slurmd --disable-debug --without-rpath 2>&1) >>"$buildlog" ||
  die "configure of Slurm $upstream failed (log $buildlog)"
log "make -j$JOBS (a few minutes)"
(cd "$srcdir" && make -j"$JOBS" 2>&1) >>"$buildlog" || die "make of Slurm $upstream failed (log $buildlog)"
(cd "$srcdir" && make install 2>&1) >>"$buildlog" || die "make install of Slurm $upstream failed (log $buildlog)"
for plugin in job_submit_lua gres_gpu select_cons_tres accounting_storage_mysql; do
  [ -f "$prefix/lib/slurm/$plugin.so" ] || die "the build has no $plugin plugin (log $buildlog)"
done
if [ "$release" != 22.05 ]; then
  [ -f "$prefix/lib/slurm/gres_shard.so" ] || die "the build has no gres/shard plugin (log $buildlog)"
fi
rm -rf "$work"
echo "Slurm $upstream from slurm-wlm $debver, built $(date -u +%FT%TZ) in $(($(date +%s) - t0)) s" \
  >"$prefix/.slurm-sched-build"
log "built $prefix in $(($(date +%s) - t0)) s"
echo "$prefix"
