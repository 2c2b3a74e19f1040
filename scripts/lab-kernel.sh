#!/usr/bin/env bash
# Fetch Debian's kernel (linux-image-amd64 of the host's release) and
# busybox-static with apt-get download, and build the small initramfs the
# QEMU lab boots its guests with (docs/lab.md). Cached: returns at once
# when DIR/.ready holds the checksum of this script and scripts/debian-lib.sh.
#
#   scripts/lab-kernel.sh [DIR]    DIR defaults to $GOSANLOCK_LAB_CACHE,
#                                  else /var/cache/gosanlock/lab
#
# Result: DIR/vmlinuz and DIR/initrd.img. The initramfs loads virtio
# (PCI, block, console), 9p, overlay, watchdog then i6300esb, dm-mod and
# loop, mounts the Debian tree shared as 9p tag "root" read-only under a
# tmpfs overlay, mounts the lab's shares ("lab": this repository with bin/,
# read-only; "out": this guest's results) and hands over to
# /lab/lab/guest/init (the repository is the "lab" share).
set -euo pipefail

dir=${1:-${GOSANLOCK_LAB_CACHE:-/var/cache/gosanlock/lab}}
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
# The initramfs is made again when this script or debian-lib.sh changes.
# shellcheck source=scripts/debian-lib.sh
. "$(dirname "$0")/debian-lib.sh"
stamp=$(cat "$0" "$(dirname "$0")/debian-lib.sh" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/.ready" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi

need=()
command -v depmod >/dev/null || need+=(kmod)
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

work=$(mktemp -d "$dir/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$kpkg" ]; then
	echo "lab-kernel: no linux-image package behind linux-image-amd64 (apt-get update?)" >&2
	exit 1
fi
(cd "$work" && apt-get download -q "$kpkg" busybox-static >/dev/null 2>&1) || {
	echo "lab-kernel: apt-get download $kpkg busybox-static failed" >&2
	exit 1
}
mkdir "$work/k" "$work/bb"
dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
dpkg-deb -x "$work"/busybox-static_*.deb "$work/bb"
kver=$(ls "$work/k/lib/modules")
depmod -b "$work/k" "$kver"

r="$work/root"
mkdir -p "$r"/{bin,dev,proc,sys,lower,rw,newroot,modules}
cp "$work/bb/bin/busybox" "$r/bin/busybox"
# The modules in load order, each once.
: >"$r/modules/order"
copy_modules "$work/k" "$kver" "$r/modules" virtio_pci virtio_blk virtio_console 9pnet_virtio 9p overlay i6300esb dm-mod loop

cat >"$r/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do
	insmod /modules/$m || echo "lab-initramfs: insmod $m failed"
done
opt=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $opt,ro,cache=loose root /lower || { echo "lab-initramfs: no root share"; exec sh; }
mount -t tmpfs -o size=128m tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot
mkdir -p /newroot/lab /newroot/out
mount -t 9p -o $opt,ro lab /newroot/lab || echo "lab-initramfs: no lab share"
mount -t 9p -o $opt out /newroot/out || echo "lab-initramfs: no out share"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /lab/lab/guest/init
INIT
chmod 755 "$r/init"
(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.img"
cp "$work/k/boot/vmlinuz-$kver" "$dir/vmlinuz"
cp "$work/initrd.img" "$dir/initrd.img"
echo "$kpkg" >"$dir/kernel-package"
echo "$stamp" >"$dir/.ready"
echo "lab-kernel: $kpkg and initramfs ready in $dir"
