#!/usr/bin/env bash
# Check the packages that scripts/pkg-build.sh made in $DIST for
# $VERSION (default: from git): lintian (pedantic; only the overrides in
# packaging/lintian-overrides, each argued there), the .deb's control
# fields and conffiles, the .rpm's files, provides, requires and scripts
# (rpm -qp), rpmlint (packaging/gosanlock.rpmlintrc), and an install and
# upgrade of the .rpm into an empty rpm root (rpm --root, without
# scripts: the root has no shell). Needs the Debian packages lintian, rpm
# and rpmlint (scripts/test-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-dist}
VERSION=$(scripts/pkg-version.sh)
deb=$(ls "$DIST"/gosanlock_"$VERSION"-1_*.deb)
rpm=$(ls "$DIST"/gosanlock-"$VERSION"-1.*.rpm)
tmp=$(mktemp -d /var/tmp/gosanlock-pkgcheck-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "pkg-check: $*" >&2; exit 1; }

echo "== lintian $deb"
# lintian refuses nothing as root but says so; the findings are the rest.
out=$(lintian --pedantic --fail-on error,warning,info,pedantic "$deb" 2>&1 | grep -v 'running with root privileges' || true)
[ -z "$out" ] || fail "lintian: $out"
lintian --pedantic --fail-on error,warning,info,pedantic "$deb" >/dev/null 2>&1 || fail "lintian failed"

echo "== .deb control fields and conffiles"
f() { dpkg-deb -f "$deb" "$1"; }
[ "$(f Package)" = gosanlock ] || fail "Package: $(f Package)"
[ "$(f Version)" = "$VERSION-1" ] || fail "Version: $(f Version)"
[[ "$(f Provides)" == "sanlock (= "*")" ]] || fail "Provides: $(f Provides)"
[ "$(f Replaces)" = sanlock ] || fail "Replaces: $(f Replaces)"
[ "$(f Conflicts)" = sanlock ] || fail "Conflicts: $(f Conflicts)"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$tmp/conffiles"
diff <(sort "$tmp/conffiles") <(printf '%s\n' /etc/default/sanlock /etc/default/wdmd /etc/sanlock/sanlock.conf) ||
	fail "conffiles differ"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' >"$tmp/deb.list"

echo "== rpm -qpl / -qp --provides --requires --scripts $rpm"
rpm -qpl "$rpm" >"$tmp/rpm.list"
for p in /usr/sbin/sanlock /usr/sbin/wdmd /usr/libexec/gosanlock/package-handover \
	/usr/libexec/gosanlock/wdmd-watchdog-check /usr/lib/systemd/system/sanlock.service \
	/usr/lib/systemd/system/wdmd.service /usr/lib/sysusers.d/gosanlock.conf \
	/usr/lib/tmpfiles.d/gosanlock.conf /usr/share/man/man8/sanlock.8.gz /usr/share/man/man8/wdmd.8.gz \
	/usr/share/bash-completion/completions/sanlock /etc/sanlock/sanlock.conf /etc/default/sanlock \
	/etc/default/wdmd; do
	grep -qx "$p" "$tmp/rpm.list" || fail "rpm lacks $p"
	grep -qx "$p" "$tmp/deb.list" || fail "deb lacks $p"
done
grep -qx /var/log/sanlock.log "$tmp/rpm.list" || fail "rpm lacks the log file's %ghost"
diff <(rpm -qpc "$rpm" | sort) "$tmp/conffiles" || fail "rpm %config files differ from the deb's conffiles"
rpm -qp --provides "$rpm" | grep -qx "sanlock = [0-9.]*" || fail "rpm provides: $(rpm -qp --provides "$rpm")"
rpm -qp --obsoletes "$rpm" | grep -qx sanlock || fail "rpm obsoletes: $(rpm -qp --obsoletes "$rpm")"
rpm -qp --conflicts "$rpm" | grep -qx sanlock || fail "rpm conflicts: $(rpm -qp --conflicts "$rpm")"
rpm -qp --requires "$rpm" | grep -q '^shadow-utils' || fail "rpm requires: $(rpm -qp --requires "$rpm")"
scripts=$(rpm -qp --scripts "$rpm")
for s in 'postinstall scriptlet' 'preuninstall scriptlet' 'postuninstall scriptlet' 'posttrans scriptlet'; do
	grep -q "^$s" <<<"$scripts" || fail "rpm lacks its $s"
done
grep -q 'package-handover$' <<<"$scripts" || fail "rpm %posttrans does not hand over"
[ "$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm")" = "$VERSION-1" ] || fail "rpm version"

echo "== rpmlint"
rpmlint -r packaging/gosanlock.rpmlintrc "$rpm" >"$tmp/rpmlint" 2>&1 || { cat "$tmp/rpmlint"; fail rpmlint; }
grep -q ' 0 errors, 0 warnings' "$tmp/rpmlint" || { cat "$tmp/rpmlint"; fail rpmlint; }

echo "== rpm --root: install, verify, upgrade, erase (without scripts)"
r=$tmp/rpmroot
mkdir -p "$r"
rpm --root "$r" --initdb
rpm --root "$r" -i --nodeps --noscripts "$rpm" 2>&1 | grep -v -e "use Alien" -e "know what you are doing" || true
rpm --root "$r" -V --nodeps gosanlock || fail "rpm -V after install"
[ -x "$r/usr/sbin/sanlock" ] || fail "rpm root lacks /usr/sbin/sanlock"
# A newer build of the same package upgrades it, keeping a changed
# configuration file.
echo "io_timeout = 5" >>"$r/etc/sanlock/sanlock.conf"
newer=$(PKG_STAGED=1 VERSION="$VERSION.1" DIST="$tmp/newer" scripts/pkg-build.sh rpm >/dev/null && ls "$tmp"/newer/*.rpm)
rpm --root "$r" -U --nodeps --noscripts "$newer" 2>&1 | grep -v -e "use Alien" -e "know what you are doing" || true
[ "$(rpm --root "$r" -q --qf '%{VERSION}' gosanlock)" = "$VERSION.1" ] || fail "rpm upgrade"
grep -qx 'io_timeout = 5' "$r/etc/sanlock/sanlock.conf" || fail "rpm upgrade replaced a changed sanlock.conf"
rpm --root "$r" -e --nodeps --noscripts gosanlock 2>&1 | grep -v -e "use Alien" -e "know what you are doing" || true
[ ! -e "$r/usr/sbin/sanlock" ] || fail "rpm -e left /usr/sbin/sanlock"
echo "pkg-check: ok ($deb, $rpm)"
