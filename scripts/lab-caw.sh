#!/usr/bin/env bash
# Build (once, then cached) what the QEMU lab's caw-iscsi scenario needs
# beside the lab's kernel and trees (docs/lab.md):
#
#  - CACHE/caw/: the kernel modules of Debian's kernel package named in
#    CACHE/kernel-package (the one scripts/lab-kernel.sh boots) for a LIO
#    iSCSI target (target_core_mod, target_core_iblock, iscsi_target_mod),
#    the open-iscsi initiator (iscsi_tcp and what it needs, sd_mod, sg),
#    virtio_net and crc32c_generic (the iSCSI login needs the crc32c hash),
#    with CACHE/caw/order listing them in load order (each after the
#    modules it depends on). The guests insmod them from a 9p
#    share at scenario time.
#  - TREES/sid-iscsi: a copy of the sid tree (sanlock 5.1.1) with
#    open-iscsi, sg3-utils, iproute2 and kmod added. The sid tree itself is not changed.
#
#   scripts/lab-caw.sh [CACHE [TREES]]   CACHE defaults to $GOSANLOCK_LAB_CACHE,
#                                        else /var/cache/gosanlock/lab; TREES to
#                                        $GOSANLOCK_TREES, else /var/cache/gosanlock/trees
#
# Each part is made again when this script or debian-lib.sh changes (CACHE/caw/.ready,
# TREES/sid-iscsi/.gosanlock-caw-ready hold its checksum).
set -euo pipefail

cache=${1:-${GOSANLOCK_LAB_CACHE:-/var/cache/gosanlock/lab}}
trees=${2:-${GOSANLOCK_TREES:-/var/cache/gosanlock/trees}}
# shellcheck source=scripts/debian-lib.sh
. "$(dirname "$0")/debian-lib.sh"
stamp=$(cat "$0" "$(dirname "$0")/debian-lib.sh" | sha256sum | cut -d' ' -f1)

# The modules, named as modprobe knows them; their dependencies come first.
mods="virtio_net configfs crc32c_generic target_core_mod target_core_iblock iscsi_target_mod iscsi_tcp sd_mod sg"

modules() {
	local out="$cache/caw"
	if [ "$(cat "$out/.ready" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	local kpkg
	kpkg=$(cat "$cache/kernel-package" 2>/dev/null) || {
		echo "lab-caw: $cache/kernel-package missing (scripts/lab-kernel.sh first)" >&2
		return 1
	}
	command -v depmod >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kmod >/dev/null
	local work
	work=$(mktemp -d "$cache/caw-build.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" RETURN
	(cd "$work" && apt-get download -q "$kpkg" >/dev/null 2>&1) || {
		echo "lab-caw: apt-get download $kpkg failed" >&2
		return 1
	}
	mkdir "$work/k"
	dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
	local kver
	kver=$(ls "$work/k/lib/modules")
	depmod -b "$work/k" "$kver"
	rm -rf "$out"
	mkdir -p "$out"
	: >"$out/order"
	# shellcheck disable=SC2086
	copy_modules "$work/k" "$kver" "$out" $mods
	echo "$kpkg" >"$out/kernel-package"
	echo "$stamp" >"$out/.ready"
	echo "lab-caw: modules of $kpkg in $out: $(tr '\n' ' ' <"$out/order")"
}

tree() {
	local src="$trees/sid" t="$trees/sid-iscsi"
	if [ "$(cat "$t/.gosanlock-caw-ready" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	[ -e "$src/.gosanlock-ready" ] || {
		echo "lab-caw: $src not built (make trees)" >&2
		return 1
	}
	exec 9>"$trees/.lock-sid-iscsi"
	flock 9
	umount -l "$t/proc" 2>/dev/null || true
	umount -l "$t/dev" 2>/dev/null || true
	rm -rf "$t"
	cp -a "$src" "$t"
	rm -f "$t/.gosanlock-ready"
	: >"$trees/sid-iscsi.log"
	chroot_apt "$t" "$trees/sid-iscsi.log" \
		"apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq --no-install-recommends open-iscsi sg3-utils iproute2 kmod" ||
		return
	chroot "$t" sanlock version >"$t/.gosanlock-version" 2>&1 || true
	touch "$t/.gosanlock-ready"
	echo "$stamp" >"$t/.gosanlock-caw-ready"
	echo "lab-caw: $t ready: $(cat "$t/.gosanlock-version"), $(chroot "$t" iscsiadm --version)"
}

modules
tree
