#!/usr/bin/env bash
# Checks `make install`: installs into a temporary tree (PREFIX inside it,
# so the units name the installed binaries) and a DESTDIR staging tree,
# then verifies the units with systemd-analyze, renders the man pages and
# loads the bash completion. Needs the Debian packages systemd
# (systemd-analyze), man-db and bash-completion.
set -euo pipefail
cd "$(dirname "$0")/.."
# Under `make -j` (make test runs this beside other steps) MAKEFLAGS names
# the parent's jobserver, whose descriptors this script does not inherit:
# drop it, or every make below warns "jobserver unavailable".
MAKEFLAGS=$(sed -E 's/ --jobserver-(auth|fds)=[^ ]*//g; s/ -j[0-9]*//g' <<<"${MAKEFLAGS:-}")
export MAKEFLAGS
tmp=$(mktemp -d /var/tmp/gosanlock-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "== make install PREFIX=$tmp/usr SYSCONFDIR=$tmp/etc"
make -s install PREFIX="$tmp/usr" SYSCONFDIR="$tmp/etc" >/dev/null
for f in usr/sbin/sanlock usr/sbin/wdmd usr/libexec/gosanlock/wdmd-watchdog-check \
	usr/share/man/man8/sanlock.8 usr/share/man/man8/wdmd.8 \
	usr/lib/systemd/system/sanlock.service usr/lib/systemd/system/wdmd.service \
	usr/share/bash-completion/completions/sanlock usr/share/zsh/site-functions/_sanlock \
	usr/share/fish/vendor_completions.d/sanlock.fish \
	etc/sanlock/sanlock.conf etc/default/sanlock etc/default/wdmd; do
	[ -s "$tmp/$f" ] || { echo "missing: $f"; exit 1; }
done
units=$tmp/usr/lib/systemd/system
grep -q "^ExecStart=$tmp/usr/sbin/sanlock daemon \$sanlock_opts$" $units/sanlock.service
grep -q "^EnvironmentFile=-$tmp/etc/default/wdmd$" $units/wdmd.service

echo "== systemd-analyze verify"
# Plain verify complains about nothing but the units themselves; any
# output is a finding.
out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$units/wdmd.service" "$units/sanlock.service" 2>&1) || {
	echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; exit 1; fi

echo "== man -l"
for p in sanlock wdmd; do
	err=$(MANWIDTH=80 man --warnings -l "$tmp/usr/share/man/man8/$p.8" 2>&1 >/dev/null)
	[ -z "$err" ] || { echo "$p.8: $err"; exit 1; }
done

echo "== bash completion"
bash -c "source $tmp/usr/share/bash-completion/completions/sanlock && complete -p sanlock" | grep -q __start_sanlock
# The script asks the installed binary for candidates.
# (The script uses the bash-completion package's helpers, as every cobra
# V2 script does; Debian package bash-completion.)
PATH="$tmp/usr/sbin:$PATH" bash -c '
	source /usr/share/bash-completion/bash_completion
	source '"$tmp"'/usr/share/bash-completion/completions/sanlock
	try() { # the words typed, then the candidates expected
		local want=$1; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
		__start_sanlock sanlock "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
		[ "${COMPREPLY[*]}" = "$want" ] || { echo "bash completion of $*: ${COMPREPLY[*]}"; exit 1; }
	}
	try add_lockspace sanlock client add_
	try locks sanlock loc
	try --json sanlock locks --' 2>/dev/null

echo "== configuration files are kept"
echo "io_timeout = 5" >>"$tmp/etc/sanlock/sanlock.conf"
out=$(make -s install PREFIX="$tmp/usr" SYSCONFDIR="$tmp/etc")
grep -q "keeping $tmp/etc/sanlock/sanlock.conf" <<<"$out"
grep -q "^io_timeout = 5$" "$tmp/etc/sanlock/sanlock.conf"

echo "== make install DESTDIR=$tmp/stage PREFIX=/usr"
make -s install DESTDIR="$tmp/stage" PREFIX=/usr >/dev/null
grep -q '^ExecStart=/usr/sbin/sanlock daemon $sanlock_opts$' "$tmp/stage/usr/lib/systemd/system/sanlock.service"
grep -q '^EnvironmentFile=-/etc/default/sanlock$' "$tmp/stage/usr/lib/systemd/system/sanlock.service"
grep -q '^ExecReload=/usr/sbin/sanlock client reexec$' "$tmp/stage/usr/lib/systemd/system/sanlock.service"
[ -s "$tmp/stage/etc/sanlock/sanlock.conf" ]
make -s uninstall DESTDIR="$tmp/stage" PREFIX=/usr
[ ! -e "$tmp/stage/usr/sbin/sanlock" ]
echo "install-check: ok"
