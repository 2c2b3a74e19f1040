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
run direct format -x demo:"$F":4M
run direct update -x demo:"$F":4194304 -e vm3:6291456
run direct init -r demo:vm3:"$F":6M
run direct dump "$F" -f 1
run direct read_leader -r demo:vm1:"$F":1048576
run direct lookup -x demo:"$F":4194304 -e vm3
echo "demo done: lease file $F"
