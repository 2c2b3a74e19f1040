#!/usr/bin/env bash
# Time `sanlock client add_lockspace -o 1` against the real sanlock 3.8.5
# daemon and against ours, in one run, N times each (default 3), on
# separate lease files initialised with io_timeout 1. Needs root and
# /usr/sbin/sanlock. Prints one line per join and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
make -s build
real=/usr/sbin/sanlock ours=$PWD/bin/sanlock
work=$(mktemp -d /var/tmp/gs-measure.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export SANLOCK_PRIVILEGED=0
for who in real ours; do
  bin=${!who}
  mkdir -p "$work/run-$who"
  SANLOCK_RUN_DIR=$work/run-$who "$bin" daemon -D -w 0 -l 0 -U root -G root 2>/dev/null &
  pids+=($!)
done
sleep 1
declare -A times
for i in $(seq "$n"); do
  for who in real ours; do
    f=$work/leases-$who-$i
    truncate -s 1M "$f"
    "$real" direct init -s "LS$i:0:$f:0" -o 1 >/dev/null
    t0=$(date +%s.%N)
    SANLOCK_RUN_DIR=$work/run-$who "$real" client add_lockspace -o 1 -s "LS$i:1:$f:0" | grep -q 'done 0'
    t1=$(date +%s.%N)
    d=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')
    times[$who]+="$d "
    printf '%-5s add_lockspace io_timeout 1: %.3f s\n' "$who" "$d"
    SANLOCK_RUN_DIR=$work/run-$who "$real" client rem_lockspace -s "LS$i:1:$f:0" >/dev/null
  done
done
for who in real ours; do
  printf '%-5s median %.3f s\n' "$who" "$(printf '%s\n' ${times[$who]} | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
done
