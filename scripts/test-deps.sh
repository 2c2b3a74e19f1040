#!/usr/bin/env bash
# Install what `make test` needs on a Debian machine: the real sanlock
# 3.8.5 and its clients (python3-sanlock, libvirt's lock plugin with QEMU,
# sanlk-reset), the tools the install check uses (systemd-analyze, man,
# bash-completion), debootstrap for the trees of the newer releases, and
# gcc with libsanlock-dev for the C clients, and prometheus for the promtool
# that checks contrib/monitoring's alert rules. Packages already installed
# are not asked for again, so a second run costs one dpkg-query.
#
# As root it installs what is missing with apt-get. Not as root it
# changes nothing: it names what is missing and the one command that
# installs it, and fails.
set -euo pipefail

pkgs=(sanlock python3-sanlock python3-pytest lintian rpm rpmlint
	libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-sanlock
	qemu-system-x86 qemu-utils sanlk-reset
	systemd man-db bash-completion
	debootstrap strace gcc libc6-dev libsanlock-dev prometheus)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "make test needs these Debian packages: ${missing[*]}" >&2
	echo "install them with:  sudo apt-get install -y ${missing[*]}" >&2
	echo "(the tests that use the real sanlock, the trees and the guests also need root: sudo make test)" >&2
	exit 1
fi
echo "test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
# Only promtool is wanted from prometheus: the server the package starts
# when this script installed it is stopped and not started at boot.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
	systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
