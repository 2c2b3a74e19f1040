#!/usr/bin/env bash
# Build (once, then cached) the Debian 12 bookworm root tree that the QEMU
# lab (docs/lab.md) shares read-only into its guests: C sanlock 3.8.5 with
# wdmd, python3-sanlock and lvm2-lockd, beside the trixie and sid trees of
# scripts/debian-trees.sh (run first: the lab uses the sid tree for 5.1.1).
#
#   scripts/lab-trees.sh [DIR]     DIR defaults to $GOSANLOCK_TREES,
#                                  else /var/cache/gosanlock/trees
#
# A finished tree has DIR/bookworm/.gosanlock-ready; a half-made one is
# removed and made again. Needs root and debootstrap. Nothing is started
# inside the tree while it is made (policy-rc.d exits 101).
set -euo pipefail

dir=${1:-${GOSANLOCK_TREES:-/var/cache/gosanlock/trees}}
mirror=${GOSANLOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$dir"

if ! command -v debootstrap >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

exec 9>"$dir/.lock"
flock 9

name=bookworm
t="$dir/$name"
if [ -e "$t/.gosanlock-ready" ]; then
	exit 0
fi
echo "lab-trees: building $name in $t"
umount -l "$t/proc" 2>/dev/null || true
umount -l "$t/dev" 2>/dev/null || true
rm -rf "$t"
debootstrap --variant=minbase bookworm "$t" "$mirror" >"$dir/$name.log" 2>&1 || {
	tail -20 "$dir/$name.log"
	exit 1
}
printf '#!/bin/sh\nexit 101\n' >"$t/usr/sbin/policy-rc.d"
chmod 755 "$t/usr/sbin/policy-rc.d"
mount --bind /proc "$t/proc"
mount --bind /dev "$t/dev"
rc=0
chroot "$t" env DEBIAN_FRONTEND=noninteractive sh -c \
	"apt-get install -y -qq --no-install-recommends sanlock python3-sanlock lvm2-lockd procps kmod strace" \
	>>"$dir/$name.log" 2>&1 || rc=$?
umount "$t/dev" || umount -l "$t/dev"
umount "$t/proc" || umount -l "$t/proc"
if [ $rc -ne 0 ]; then
	tail -20 "$dir/$name.log"
	exit $rc
fi
chroot "$t" sanlock version >"$t/.gosanlock-version" 2>&1 || true
touch "$t/.gosanlock-ready"
echo "lab-trees: $name ready: $(cat "$t/.gosanlock-version")"
