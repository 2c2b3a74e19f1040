#!/usr/bin/env bash
# Build (once, then cached) the Debian root trees that hold the sanlock
# releases run beside ours: trixie (sanlock 3.9.5) and sid (sanlock
# 5.1.1, with lvm2-lockd) for the tests, each with libsanlock-dev, gcc,
# libc6-dev and strace so that small C programs can be compiled in it
# against its own libsanlock (docs/testing.md "Newer sanlock releases");
# bookworm (sanlock 3.8.5 with wdmd, python3-sanlock, lvm2-lockd) for the
# QEMU lab's guests (docs/lab.md).
#
#   scripts/debian-trees.sh [DIR [NAME...]]   DIR defaults to $GOSANLOCK_TREES,
#                                             else /var/cache/gosanlock/trees;
#                                             NAME: trixie, sid (the default
#                                             pair), bookworm
#
# A finished tree has DIR/NAME/.gosanlock-ready; a tree left half made
# by an interrupted run is removed and made again. Needs root and
# debootstrap (installed here when missing). The trees are made with
# nothing started inside them (policy-rc.d exits 101) and /proc, /dev
# are bind-mounted only while apt runs.
set -euo pipefail
# shellcheck source=scripts/debian-lib.sh
. "$(dirname "$0")/debian-lib.sh"

dir=${1:-${GOSANLOCK_TREES:-/var/cache/gosanlock/trees}}
mirror=${GOSANLOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$dir"

if ! command -v debootstrap >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

# One tree at a time per DIR: two make runs must not build into one tree.
exec 9>"$dir/.lock"
flock 9

# build SUITE NAME PACKAGES: the tree DIR/NAME of Debian SUITE with PACKAGES.
build() {
	local suite=$1 name=$2 pkgs=$3
	local t="$dir/$name"
	if [ -e "$t/.gosanlock-ready" ]; then
		return 0
	fi
	echo "debian-trees: building $name ($suite) in $t"
	umount -l "$t/proc" 2>/dev/null || true
	umount -l "$t/dev" 2>/dev/null || true
	rm -rf "$t"
	debootstrap --variant=minbase "$suite" "$t" "$mirror" >"$dir/$name.log" 2>&1 || {
		tail -20 "$dir/$name.log"
		return 1
	}
	printf '#!/bin/sh\nexit 101\n' >"$t/usr/sbin/policy-rc.d"
	chmod 755 "$t/usr/sbin/policy-rc.d"
	chroot_apt "$t" "$dir/$name.log" "apt-get install -y -qq --no-install-recommends $pkgs" || return
	chroot "$t" sanlock version >"$t/.gosanlock-version" 2>&1 || true
	touch "$t/.gosanlock-ready"
	echo "debian-trees: $name ready: $(cat "$t/.gosanlock-version")"
}

cdev="sanlock libsanlock-dev strace gcc libc6-dev"
shift || true
for name in "${@:-trixie sid}"; do
	for n in $name; do
		case $n in
		trixie) build trixie trixie "$cdev" ;;
		sid) build sid sid "$cdev lvm2-lockd" ;;
		bookworm) build bookworm bookworm "sanlock python3-sanlock lvm2-lockd procps kmod strace" ;;
		*) echo "debian-trees: unknown tree $n" >&2; exit 2 ;;
		esac
	done
done
