#!/usr/bin/env bash
# The main job, end to end, with our own binary: lay out a lease file under
# ./var/, initialise a lockspace, two resource leases and a resource index,
# then read them back with dump and read_leader.
# Then two of our daemons (hosts A and B, each with its own run dir) join
# one lockspace and each sees the other alive.
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/sanlock
mkdir -p var
F=$PWD/var/leases
rm -f "$F"
truncate -s 16M "$F"
run() { echo "\$ sanlock $*"; "$S" "$@"; echo; }
run direct init -s demo:0:"$F":0 -o 1
run direct init -r demo:vm1:"$F":1M
run direct init -r demo:vm2:"$F":2M -n 16
run direct format -x demo:"$F":3M
run direct init -r demo:vm3:"$F":5M
run direct update -x demo:"$F":3145728 -e vm3:5242880
run direct dump "$F":0:16M -f 1
run direct read_leader -r demo:vm1:"$F":1048576
run direct lookup -x demo:"$F":3145728 -e vm3
if [ -x /usr/sbin/sanlock ]; then
  echo "\$ diff <(our dump) <(sanlock 3.8.5 dump)   # the real binary reads what we wrote"
  diff <("$S" direct dump "$F":0:16M -f 2) <(/usr/sbin/sanlock direct dump "$F":0:16M -f 2) && echo "identical"
  echo
fi

# --- two daemons in one lockspace ------------------------------------------
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
export SANLOCK_PRIVILEGED=0
for h in A B; do
  mkdir -p "var/run$h"
  SANLOCK_RUN_DIR=$PWD/var/run$h "$S" daemon -D -w 0 -l 0 -U root -G root -e "host$h" \
    2>"var/daemon$h.log" &
  pids+=($!)
done
sleep 1
on() { local h=$1; shift; echo "\$ [host $h] sanlock $*"; SANLOCK_RUN_DIR=$PWD/var/run$h "$S" "$@"; echo; }
# Both join at once (io_timeout 1: a join takes about 3 seconds).
on A add_lockspace -o 1 -s demo:1:"$F":0 & a=$!
on B add_lockspace -o 1 -s demo:2:"$F":0 & b=$!
wait $a $b
sleep 3   # let each daemon see the other's lease renewed
on A client host_status -s demo
on B client host_status -s demo
on A client gets -h 1
on B client status
run direct dump "$F":0:16M
on A rem_lockspace -s demo:1:"$F":0
on B rem_lockspace -s demo:2:"$F":0
on A shutdown
on B shutdown
echo "demo done: lease file $F, daemon logs var/daemon{A,B}.log"
