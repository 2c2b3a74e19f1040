# Shell functions the scripts that build Debian trees and the lab's
# kernel pieces share (sourced by debian-trees.sh, lab-kernel.sh and
# lab-caw.sh; the latter two put this file in their cache stamps).

# copy_modules KROOT KVER OUT MODULE...: copy each MODULE of the kernel
# unpacked at KROOT (release KVER, depmod run) into OUT, after the modules
# it depends on, each once, and list them in load order in OUT/order,
# which is appended to. Built-in modules are skipped.
copy_modules() {
	local kroot=$1 kver=$2 out=$3 m ko b
	shift 3
	touch "$out/order"
	for m in "$@"; do
		modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}' |
			while read -r ko; do
				b=$(basename "$ko")
				if ! grep -qx "$b" "$out/order"; then
					cp "$ko" "$out/$b"
					echo "$b" >>"$out/order"
				fi
			done
	done
}

# chroot_apt TREE LOG COMMAND: run the shell COMMAND (apt-get ...) in the
# tree TREE with /proc and /dev bind-mounted for its duration only, its
# output appended to LOG; on failure print LOG's tail. Returns COMMAND's
# status.
chroot_apt() {
	local t=$1 log=$2 cmd=$3 rc=0
	mount --bind /proc "$t/proc" || return
	mount --bind /dev "$t/dev" || { umount "$t/proc"; return 1; }
	chroot "$t" env DEBIAN_FRONTEND=noninteractive sh -c "$cmd" >>"$log" 2>&1 || rc=$?
	umount "$t/dev" || umount -l "$t/dev"
	umount "$t/proc" || umount -l "$t/proc"
	if [ $rc -ne 0 ]; then
		tail -20 "$log"
	fi
	return $rc
}
