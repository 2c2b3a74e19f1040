#!/usr/bin/env bash
# The main job, end to end, with our own binary: lay out a lease file under
# ./var/, initialise a lockspace, two resource leases and a resource index,
# then read them back with dump and read_leader.
# (Later issues grow this into real daemons taking, contending for and
# recovering a lease.)
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/sanlock
mkdir -p var
F=$PWD/var/leases
rm -f "$F"
truncate -s 16M "$F"
run() { echo "\$ sanlock $*"; "$S" "$@"; echo; }
run direct init -s demo:0:"$F":0
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
echo "demo done: lease file $F"
