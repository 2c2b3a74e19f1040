#!/usr/bin/env bash
# Build (once, then cached) the Debian 12 bookworm root tree that the QEMU
# lab (docs/lab.md) shares read-only into its guests: C sanlock 3.8.5 with
# wdmd, python3-sanlock and lvm2-lockd, beside the trixie and sid trees
# (the lab uses the sid tree for 5.1.1). scripts/debian-trees.sh builds it.
#
#   scripts/lab-trees.sh [DIR]     DIR defaults to $GOSANLOCK_TREES,
#                                  else /var/cache/gosanlock/trees
set -euo pipefail
exec "$(dirname "$0")/debian-trees.sh" "${1:-${GOSANLOCK_TREES:-/var/cache/gosanlock/trees}}" bookworm
