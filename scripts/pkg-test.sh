#!/usr/bin/env bash
# The package test (docs/install.md "The package test"): gosanlock's .deb
# installed, upgraded and removed with apt and dpkg in a fresh Debian 13
# root, over Debian's own sanlock and its clients.
#
#   scripts/pkg-test.sh          (make package-test builds the .deb first)
#
# The root is an overlay over the cached trixie tree (make trees,
# internal/debtree): a new upper directory per run, mounted in a mount
# namespace of this script's own, with /proc, /sys, a small /dev, a tmpfs
# /run and a shared directory for the lease files and the packages; the
# host's root and packages are not touched. Downloaded .debs are kept in
# $GOSANLOCK_PKGTEST/apt-archives (default /var/cache/gosanlock/pkgtest)
# for the next run. No systemd runs in the root: the daemons are started
# by hand as an init script would (SANLOCK_PRIVILEGED=0, -w 0: no
# watchdog device), the package scripts find them by their pid file.
#
# Steps, each checked:
#  1. apt installs Debian's sanlock (3.9.5), libvirt-daemon-plugin-sanlock,
#     python3-sanlock and sanlk-reset; Debian's daemon runs and a
#     python3-sanlock process holds a lease;
#  2. apt installs our .deb over it: sanlock is removed, its clients stay,
#     our postinst says that the running daemon is not gosanlock and is
#     left running, and nothing was stopped: the holder keeps its lease;
#  3. the operator's switch: the holder releases, Debian's daemon is shut
#     down, ours is started; Debian's C `sanlock client` adds a lockspace
#     and python3-sanlock holds a lease on our daemon;
#  4. apt upgrades our .deb to a newer build (another VERSION): the
#     postinst hands the daemon over (new pid, new binary), the holder
#     keeps the same lease (same lver), renewals go on, and the holder
#     releases on its old connection;
#  5. apt installs Debian's sanlock again (our package is removed, its
#     prerm stops our idle daemon): Debian's daemon starts and serves a
#     lockspace and a lease;
#  6. with the sanlock user and group deleted (a host that never had
#     sanlock) and Debian's daemon running idle, apt installs our .deb:
#     the daemon is left running (no systemd) and the postinst says so,
#     creates the user and group (the user in group disk) and the log
#     file, and our daemon finds the user;
#  7. the .rpm, with rpm --root on the same root (its scripts run there):
#     installed, upgraded while python3-sanlock holds a lease (%posttrans
#     hands the daemon over, the lease stays), erased (%preun stops the
#     idle daemon).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != --inside ]; then
	[ "$(id -u)" -eq 0 ] || { echo "pkg-test: needs root (mount namespace, chroot)" >&2; exit 1; }
	DIST=${DIST:-dist}
	VERSION=$(scripts/pkg-version.sh)
	deb=$(ls "$DIST"/gosanlock_"$VERSION"-1_*.deb)
	rpm=$(ls "$DIST"/gosanlock-"$VERSION"-1.*.rpm)
	trees=${GOSANLOCK_TREES:-/var/cache/gosanlock/trees}
	[ -e "$trees/trixie/.gosanlock-ready" ] || { echo "pkg-test: no trixie tree in $trees (make trees)" >&2; exit 1; }
	cache=${GOSANLOCK_PKGTEST:-/var/cache/gosanlock/pkgtest}
	mkdir -p "$cache/apt-archives/partial"
	# Lease files need a file system with O_DIRECT: /var/tmp, as in
	# internal/debtree.
	run=$(mktemp -d /var/tmp/gosanlock-pkgtest-XXXXXX)
	trap 'rm -rf "$run"' EXIT
	mkdir -p "$run/share"
	cp "$deb" "$run/share/gosanlock-old.deb"
	cp "$rpm" "$run/share/gosanlock-old.rpm"
	# The newer build: the same files packaged under a higher version.
	PKG_STAGED=1 VERSION="$VERSION.1" DIST="$run/newer" scripts/pkg-build.sh deb rpm >/dev/null
	cp "$run"/newer/gosanlock_*.deb "$run/share/gosanlock-new.deb"
	cp "$run"/newer/gosanlock-*.rpm "$run/share/gosanlock-new.rpm"
	start=$(date +%s)
	rc=0
	unshare --mount --propagation private "$0" --inside "$trees/trixie" "$run" "$cache" "$VERSION" || rc=$?
	if [ $rc -eq 0 ]; then
		echo "pkg-test: ok in $(($(date +%s) - start)) s"
	else
		echo "pkg-test: FAILED (exit $rc) after $(($(date +%s) - start)) s; logs were in $run/share" >&2
	fi
	exit $rc
fi

# ---- inside the mount namespace ----
lower=$2 run=$3 cache=$4 version=$5
share=$run/share
root=$run/root
mkdir -p "$run/upper" "$run/work" "$root"
mount -t overlay gosanlock-pkgtest -o "lowerdir=$lower,upperdir=$run/upper,workdir=$run/work" "$root"
mount --bind /proc "$root/proc"
mount --bind /sys "$root/sys"
mount -t tmpfs -o mode=755,nosuid gosanlock-dev "$root/dev"
for d in null zero full random urandom tty; do
	touch "$root/dev/$d" && mount --bind "/dev/$d" "$root/dev/$d"
done
mkdir "$root/dev/pts" "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
mount -t tmpfs -o mode=755,nosuid gosanlock-run "$root/run"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
mkdir -p "$root$share"
mount --bind "$share" "$root$share"
cp /etc/resolv.conf "$root/etc/resolv.conf"

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	done
	true
}
trap cleanup EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { echo "not ok - $*" >&2; exit 1; }
# inroot runs a command in the root, as root, with a clean environment.
rootenv=(/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	HOME=/root LANG=C DEBIAN_FRONTEND=noninteractive)
inroot() { chroot "$root" "${rootenv[@]}" "$@"; }
APT=(apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
pkgstate() { inroot dpkg-query -W -f='${db:Status-Status} ${Version}' "$1" 2>/dev/null || echo "unknown"; }
daemon_pid() { cat "$root/run/sanlock/sanlock.pid" 2>/dev/null; }
# wait_for SECONDS WHAT CMD...: until CMD succeeds.
wait_for() {
	local t=$(($1 * 10)) what=$2
	shift 2
	while ! "$@" >/dev/null 2>&1; do
		t=$((t - 1))
		[ $t -gt 0 ] || fail "timed out waiting for $what"
		sleep 0.1
	done
}
gone() { ! kill -0 "$1" 2>/dev/null; }
# start_daemon: `sanlock daemon` as its init script starts it (forks).
start_daemon() {
	rm -f "$root/run/sanlock/sanlock.sock"
	inroot env SANLOCK_PRIVILEGED=0 sanlock daemon -w 0
	wait_for 20 "the daemon's socket" test -S "$root/run/sanlock/sanlock.sock"
	wait_for 10 "the daemon's pid file" test -s "$root/run/sanlock/sanlock.pid"
	pids+=("$(daemon_pid)")
}
# holder N RESOURCE: a python3-sanlock process holding RESOURCE until
# $share/stopN exists, then releasing it on the same connection.
holder() {
	rm -f "$share/stop$1"
	# chroot, env and python3 exec one another: $! is python3's pid.
	chroot "$root" "${rootenv[@]}" python3 "$share/holder.py" LS "$2" "$share/res" "$share/stop$1" \
		>"$share/holder$1.log" 2>&1 &
	hpid=$!
	pids+=("$hpid")
	wait_for 60 "holder $1 to acquire" grep -q '^acquired' "$share/holder$1.log"
}
release() {
	touch "$share/stop$1"
	wait_for 30 "holder $1 to release" grep -q '^released' "$share/holder$1.log"
}
lease_line() { inroot "$@" client status | grep "^r LS:$RES:" || true; }
host_ts() { inroot sanlock client host_status -s LS | awk '$1 == 1 && $2 == "timestamp" { print $3 }'; }
renewed_after() { local ts; ts=$(host_ts); [ -n "$ts" ] && [ "$ts" -gt "$1" ]; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

cat >"$share/holder.py" <<'EOF'
import os, sys, time
import sanlock

ls, res, path, stop = sys.argv[1:5]
fd = sanlock.register()
sanlock.acquire(ls.encode(), res.encode(), [(path, 0)], slkfd=fd)
print("acquired", flush=True)
while not os.path.exists(stop):
    time.sleep(0.1)
sanlock.release(ls.encode(), res.encode(), [(path, 0)], slkfd=fd)
print("released", flush=True)
EOF

echo "== 1. Debian's sanlock, its clients, a lease held"
inroot "${APT[@]}" install --no-install-recommends sanlock libvirt-daemon-plugin-sanlock python3-sanlock sanlk-reset \
	>"$share/apt1.log" 2>&1 || {
	inroot apt-get update -q >>"$share/apt1.log" 2>&1
	inroot "${APT[@]}" install --no-install-recommends sanlock libvirt-daemon-plugin-sanlock python3-sanlock sanlk-reset \
		>>"$share/apt1.log" 2>&1 || { tail -20 "$share/apt1.log"; fail "apt-get install sanlock and its clients"; }
}
for p in sanlock libvirt-daemon-plugin-sanlock python3-sanlock sanlk-reset; do
	[[ "$(pkgstate $p)" == installed* ]] || fail "$p: $(pkgstate $p)"
done
debver=$(pkgstate sanlock)
ok "Debian's packages installed: sanlock ${debver#installed }, libvirt-daemon-plugin-sanlock, python3-sanlock, sanlk-reset"
# Debian's C sanlock binary, kept for its `sanlock client` after ours replaces it.
cp "$root/usr/sbin/sanlock" "$root/usr/local/sbin/c-sanlock"
inroot dd if=/dev/zero of="$share/ls" bs=1M count=1 status=none
inroot dd if=/dev/zero of="$share/res" bs=1M count=1 status=none
inroot chown sanlock:sanlock "$share/ls" "$share/res"
inroot sanlock direct init -s "LS:0:$share/ls:0" >/dev/null
inroot sanlock direct init -r "LS:R1:$share/res:0" >/dev/null
start_daemon
cpid=$(daemon_pid)
inroot sanlock client add_lockspace -s "LS:1:$share/ls:0" -o 2 >/dev/null || fail "add_lockspace on Debian's daemon"
RES=R1
holder 1 R1
h1=$hpid
line=$(lease_line c-sanlock)
[ -n "$line" ] || fail "Debian's daemon does not list the lease"
ok "Debian's daemon (pid $cpid) runs; python3-sanlock (pid $h1) holds $line"

echo "== 2. our .deb over Debian's sanlock"
t0=$(date +%s.%N)
inroot "${APT[@]}" install "$share/gosanlock-old.deb" >"$share/apt2.log" 2>&1 || { cat "$share/apt2.log"; fail "apt-get install gosanlock"; }
echo "   (apt-get install took $(since "$t0") s)"
sed -n 's/^/   | /; /gosanlock:/p' "$share/apt2.log"
[[ "$(pkgstate gosanlock)" == "installed $version-1" ]] || fail "gosanlock: $(pkgstate gosanlock)"
[[ "$(pkgstate sanlock)" != installed* ]] || fail "Debian's sanlock is still installed"
for p in libvirt-daemon-plugin-sanlock python3-sanlock sanlk-reset libsanlock1 libsanlock-client1; do
	[[ "$(pkgstate $p)" == installed* ]] || fail "$p was removed: $(pkgstate $p)"
done
ok "gosanlock $version-1 replaced sanlock; libvirt-daemon-plugin-sanlock, python3-sanlock, sanlk-reset, the libraries stay"
cmp -s "$root/usr/sbin/sanlock" dist/pkgroot/sanlock || fail "/usr/sbin/sanlock is not ours"
inroot getent passwd sanlock >/dev/null || fail "no sanlock user"
[ -f "$root/usr/lib/systemd/system/sanlock.service" ] && grep -q '^ExecReload=/usr/sbin/sanlock client reexec$' "$root/usr/lib/systemd/system/sanlock.service" ||
	fail "sanlock.service has no ExecReload="
ok "/usr/sbin/sanlock is gosanlock's; the sanlock user exists; sanlock.service reloads by client reexec"
grep -q 'gosanlock: the running sanlock daemon (pid '"$cpid"') is not gosanlock' "$share/apt2.log" || fail "postinst did not say the daemon is not gosanlock"
grep -q 'gosanlock: it holds 1 lockspace(s)' "$share/apt2.log" || fail "postinst did not count the lockspaces"
grep -q 'LEFT RUNNING' "$share/apt2.log" || fail "postinst did not say that the daemon is left running"
kill -0 "$cpid" || fail "Debian's daemon was stopped"
kill -0 "$h1" || fail "the holder was killed"
[ "$(lease_line c-sanlock)" = "$line" ] || fail "the lease changed: $(lease_line c-sanlock)"
ok "postinst said Debian's daemon cannot hand over and left it running: pid $cpid serves, the holder keeps $line"

echo "== 3. the operator's switch to gosanlock's daemon; C client and python3-sanlock on it"
release 1
inroot c-sanlock client rem_lockspace -s "LS:1:$share/ls:0" >/dev/null || fail "rem_lockspace on Debian's daemon"
inroot c-sanlock client shutdown >/dev/null || fail "sanlock client shutdown of Debian's daemon"
wait_for 30 "Debian's daemon to exit" gone "$cpid"
start_daemon
gpid=$(daemon_pid)
[ "$(readlink "/proc/$gpid/exe")" = "$root/usr/sbin/sanlock" ] || fail "daemon pid $gpid runs $(readlink "/proc/$gpid/exe")"
inroot c-sanlock client add_lockspace -s "LS:1:$share/ls:0" -o 2 >"$share/c-add.log" 2>&1 || { cat "$share/c-add.log"; fail "C client add_lockspace on our daemon"; }
inroot c-sanlock client status | grep -q "^s LS:1:$share/ls:0" || fail "C client status does not list the lockspace"
holder 2 R1
h2=$hpid
line=$(lease_line c-sanlock)
[ -n "$line" ] || fail "C client status does not list the lease: $(inroot c-sanlock client status)"
inroot c-sanlock client host_status -s LS | grep -q '^1 timestamp' || fail "C client host_status: $(inroot c-sanlock client host_status -s LS)"
ok "our daemon (pid $gpid): Debian's C client added the lockspace and lists python3-sanlock's lease $line"

echo "== 4. upgrade to a newer build while python3-sanlock holds its lease"
ts0=$(host_ts)
[ -n "$ts0" ] || fail "no timestamp of host 1 in: $(inroot sanlock client host_status -s LS)"
t0=$(date +%s.%N)
inroot "${APT[@]}" install "$share/gosanlock-new.deb" >"$share/apt3.log" 2>&1 || { cat "$share/apt3.log"; fail "apt-get install the newer gosanlock"; }
echo "   (apt-get install took $(since "$t0") s)"
sed -n 's/^/   | /; /gosanlock:/p' "$share/apt3.log"
[[ "$(pkgstate gosanlock)" == "installed $version.1-1" ]] || fail "gosanlock: $(pkgstate gosanlock)"
grep -q 'gosanlock: handed over: pid' "$share/apt3.log" || fail "postinst did not hand the daemon over"
npid=$(daemon_pid)
pids+=("$npid")
[ "$npid" != "$gpid" ] || fail "the daemon's pid did not change"
wait_for 10 "the old image to exit" gone "$gpid"
[ "$(readlink "/proc/$npid/exe")" = "$root/usr/sbin/sanlock" ] || fail "the new image runs $(readlink "/proc/$npid/exe")"
ok "gosanlock upgraded to $version.1-1: the daemon was handed over from pid $gpid to pid $npid, which runs the new binary"
kill -0 "$h2" || fail "the holder is gone"
after=$(lease_line c-sanlock)
[ "$after" = "$line" ] || fail "the lease changed across the upgrade: '$line' -> '$after'"
ok "python3-sanlock (pid $h2) keeps the same lease: $after"
ts1=$(host_ts)
# -o 2: a renewal every 4 s; wait for two after the upgrade.
wait_for 20 "a renewal after the upgrade" renewed_after "$ts1"
ts2=$(host_ts)
wait_for 20 "a second renewal after the upgrade" renewed_after "$ts2"
ok "renewals go on: host 1's timestamp $ts0 before, $ts1 at the upgrade, $(host_ts) now"
release 2
ok "the holder released its lease on the connection it opened before the upgrade"

echo "== 5. Debian's sanlock back"
inroot sanlock client rem_lockspace -s "LS:1:$share/ls:0" >/dev/null || fail "rem_lockspace on our daemon"
inroot "${APT[@]}" install --no-install-recommends sanlock >"$share/apt4.log" 2>&1 || { cat "$share/apt4.log"; fail "apt-get install sanlock"; }
sed -n 's/^/   | /; /gosanlock:/p' "$share/apt4.log"
[[ "$(pkgstate sanlock)" == "$debver" ]] || fail "sanlock: $(pkgstate sanlock)"
[[ "$(pkgstate gosanlock)" != installed* ]] || fail "gosanlock is still installed"
wait_for 10 "our daemon to stop" gone "$npid"
cmp -s "$root/usr/sbin/sanlock" "$root/usr/local/sbin/c-sanlock" || fail "/usr/sbin/sanlock is not Debian's again"
ok "apt put Debian's sanlock ${debver#installed } back; our prerm stopped our idle daemon"
start_daemon
cpid=$(daemon_pid)
inroot sanlock client add_lockspace -s "LS:1:$share/ls:0" -o 2 >/dev/null || fail "add_lockspace on Debian's daemon again"
holder 3 R1
line=$(lease_line sanlock)
[ -n "$line" ] || fail "Debian's daemon does not list the lease"
release 3
inroot sanlock client rem_lockspace -s "LS:1:$share/ls:0" >/dev/null
inroot sanlock client shutdown >/dev/null
wait_for 30 "Debian's daemon to exit" gone "$cpid"
ok "Debian's daemon (pid $cpid) works again: lockspace, python3-sanlock lease $line, shutdown"

echo "== 6. a host that has no sanlock user: our .deb creates it; an idle Debian daemon is left running"
inroot userdel sanlock
inroot groupdel sanlock 2>/dev/null || true
! inroot getent passwd sanlock >/dev/null || fail "userdel sanlock"
# Debian's daemon runs, idle. Its log file is unlinked (it writes on to
# the open file), so that the one there after the install is the
# postinst's.
start_daemon
cpid=$(daemon_pid)
rm -f "$root/var/log/sanlock.log"
inroot "${APT[@]}" install "$share/gosanlock-new.deb" >"$share/apt5.log" 2>&1 || { cat "$share/apt5.log"; fail "apt-get install gosanlock"; }
sed -n 's/^/   | /; /gosanlock:/p' "$share/apt5.log"
grep -q 'gosanlock: it holds no lockspace; it is left running' "$share/apt5.log" || fail "postinst did not say that the idle daemon is left running"
kill -0 "$cpid" || fail "Debian's idle daemon was stopped"
ok "without systemd, postinst left Debian's idle daemon (pid $cpid) running and said how to switch"
inroot id -nG sanlock | grep -qw disk || fail "the sanlock user is not in group disk: $(inroot id sanlock)"
[ -f "$root/var/log/sanlock.log" ] || fail "no /var/log/sanlock.log"
inroot c-sanlock client shutdown >/dev/null || fail "sanlock client shutdown of Debian's daemon"
wait_for 30 "Debian's daemon to exit" gone "$cpid"
start_daemon
gpid=$(daemon_pid)
# Unprivileged (SANLOCK_PRIVILEGED=0) the daemon keeps its uid but gives
# the run directory to -U's user, the sanlock user by default.
owner=$(stat -c %u "$root/run/sanlock")
[ "$owner" = "$(inroot id -u sanlock)" ] || fail "/run/sanlock belongs to uid $owner, not to sanlock ($(inroot id -u sanlock))"
inroot sanlock client shutdown >/dev/null
wait_for 30 "our daemon to exit" gone "$gpid"
grep -q "sanlock daemon started" "$root/var/log/sanlock.log" || fail "the daemon did not log to /var/log/sanlock.log"
! grep -q "not found, using uid" "$root/var/log/sanlock.log" || fail "$(grep "not found, using uid" "$root/var/log/sanlock.log")"
ok "postinst created the sanlock user ($(inroot id sanlock)) and /var/log/sanlock.log; our daemon (pid $gpid) found the user"

echo "== 7. the .rpm's scripts: install, upgrade while a lease is held, erase (rpm --root on the same root)"
# rpm runs the scriptlets chrooted in the root, with its Debian tools
# (useradd, no systemd): what they do with a daemon is what is checked.
rpmq() { rpm --root "$root" "$@" 2>&1 | grep -v -e 'use Alien' -e 'know what you are doing' || true; }
inroot "${APT[@]}" purge gosanlock >"$share/apt6.log" 2>&1 || { cat "$share/apt6.log"; fail "apt-get purge gosanlock"; }
rpm --root "$root" --initdb
rpmq -i --nodeps "$share/gosanlock-old.rpm" >"$share/rpm1.log"
sed 's/^/   | /' "$share/rpm1.log"
[ "$(rpm --root "$root" -q --qf '%{VERSION}' gosanlock)" = "$version" ] || fail "rpm -i: $(cat "$share/rpm1.log")"
grep -q 'gosanlock: no sanlock daemon is running' "$share/rpm1.log" || fail "%posttrans did not run"
start_daemon
gpid=$(daemon_pid)
inroot sanlock client add_lockspace -s "LS:1:$share/ls:0" -o 2 >/dev/null || fail "add_lockspace"
holder 4 R1
h4=$hpid
line=$(lease_line sanlock)
rpmq -U --nodeps "$share/gosanlock-new.rpm" >"$share/rpm2.log"
sed 's/^/   | /' "$share/rpm2.log"
[ "$(rpm --root "$root" -q --qf '%{VERSION}' gosanlock)" = "$version.1" ] || fail "rpm -U: $(cat "$share/rpm2.log")"
grep -q 'gosanlock: handed over: pid' "$share/rpm2.log" || fail "%posttrans did not hand the daemon over"
npid=$(daemon_pid)
pids+=("$npid")
[ "$npid" != "$gpid" ] || fail "the daemon's pid did not change"
wait_for 10 "the old image to exit" gone "$gpid"
kill -0 "$h4" || fail "the holder is gone"
[ "$(lease_line sanlock)" = "$line" ] || fail "the lease changed across the rpm upgrade: '$line' -> '$(lease_line sanlock)'"
release 4
ok "rpm -U to $version.1: %posttrans handed the daemon over (pid $gpid -> $npid); python3-sanlock kept $line"
inroot sanlock client rem_lockspace -s "LS:1:$share/ls:0" >/dev/null || fail "rem_lockspace"
rpmq -e --nodeps gosanlock >"$share/rpm3.log"
sed 's/^/   | /' "$share/rpm3.log"
grep -q "gosanlock: stopping the sanlock daemon (pid $npid)" "$share/rpm3.log" || fail "%preun did not stop the idle daemon"
wait_for 10 "our daemon to stop" gone "$npid"
[ ! -e "$root/usr/sbin/sanlock" ] || fail "rpm -e left /usr/sbin/sanlock"
ok "rpm -e: %preun stopped the idle daemon, the files are gone"
echo "$n passed, 0 failed"
