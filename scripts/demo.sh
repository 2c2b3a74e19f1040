#!/usr/bin/env bash
# The main job, end to end, with our own binary: lay out a lease file under
# ./var/, initialise a lockspace, two resource leases and a resource index,
# then read them back with dump and read_leader.
# Then two of our daemons (hosts A and B, each with its own run dir) join
# one lockspace and each sees the other alive. A process on host A takes
# the lease vm1; host B is refused while A is alive; host A fails (daemon
# and holder SIGKILLed); host B's acquire waits until A's host_id lease
# has been dead for host_dead_seconds, then takes vm1.
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
# host_dead_seconds = 8 * io_timeout + watchdog_fire_timeout: 8 + 10 = 18 s
# here (no watchdog is used with -w 0; 60 s is the real default).
echo "watchdog_fire_timeout = 10" > var/sanlock.conf
export SANLOCK_CONFIG_FILE=$PWD/var/sanlock.conf
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

# --- one resource lease, contended and recovered ----------------------------
R=demo:vm1:"$F":1048576
echo "# host A: a process holds $R while it runs (here: sleep)"
echo "\$ [host A] sanlock client command -r $R -c /bin/sleep 3600 &"
SANLOCK_RUN_DIR=$PWD/var/runA "$S" client command -r "$R" -c /bin/sleep 3600 >var/holderA.log 2>&1 &
holder=$!; pids+=($holder)
sleep 1
on A client status
echo "# host B: refused at once while host A is alive (-243 SANLK_ACQUIRE_IDLIVE)"
on B client command -r "$R" -c /bin/true || true
run direct read_leader -r "$R"
echo "# host A fails: its daemon and the holder are killed (SIGKILL)"
echo "\$ kill -9 <daemon A> <holder>"
kill -9 "${pids[0]}" "$holder"
wait "${pids[0]}" "$holder" 2>/dev/null || true
t0=$(date +%s)
echo "# host B asks again. While host A still looks alive (its lease changed at"
echo "# B's last check) the answer is -243 at once; then the acquire waits until"
echo "# A has been dead for host_dead_seconds (18 s here) and takes the lease"
echo "# with the next lver."
holds() { SANLOCK_RUN_DIR=$PWD/var/runB "$S" client status | grep '^r demo:vm1' | grep -qv ' ADD$'; }
for try in $(seq 30); do
  echo "\$ [host B] sanlock client command -r $R -c /bin/sleep 3600 &   # try $try"
  SANLOCK_RUN_DIR=$PWD/var/runB "$S" client command -r "$R" -c /bin/sleep 3600 >var/holderB.log 2>&1 &
  hb=$!; disown "$hb"
  while kill -0 "$hb" 2>/dev/null && ! holds; do sleep 1; done
  if holds; then pids+=("$hb"); break; fi
  grep "acquire done" var/holderB.log || true
  sleep 1
done
echo "host B holds vm1 after $(( $(date +%s) - t0 )) s"
echo
on B client status
on B client gets -h 1
run direct read_leader -r "$R"
run direct dump "$F":0:16M
echo "# leaving the lockspace kills its lease holders (SIGKILL) first"
on B rem_lockspace -s demo:2:"$F":0
on B shutdown
echo "demo done: lease file $F, daemon logs var/daemon{A,B}.log"
