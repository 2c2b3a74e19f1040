#!/usr/bin/env bash
# Build the gosanlock packages (packaging/nfpm.yaml) into $DIST (dist/):
#
#   scripts/pkg-build.sh deb|rpm...
#
# Environment: VERSION (default: scripts/pkg-version.sh, from git),
# PKG_ARCH (Go's GOARCH, default the host's), DEB_PROVIDES_SANLOCK and
# RPM_PROVIDES_SANLOCK (the sanlock version the package provides,
# see docs/install.md), NFPM (the nfpm command; default: go run at the
# version recorded in docs/dependencies.md), DIST, and PKG_STAGED=1 to
# package the files staged by an earlier run again, under another
# VERSION (the package tests make a newer build that way).
#
# The binaries are static (CGO_ENABLED=0), built with -trimpath and
# without symbol tables (lintian knows them as Go programs by their Go
# build id); the generated files (units, gzipped man pages,
# completion scripts, the Debian changelog) are staged in
# $DIST/pkgroot/, which nfpm.yaml names.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 deb|rpm..." >&2; exit 2; }

GO=${GO:-go}
NFPM=${NFPM:-$GO run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}
DIST=${DIST:-dist}
VERSION=$(scripts/pkg-version.sh)
PKG_ARCH=${PKG_ARCH:-$($GO env GOARCH)}
# The version of the distribution's sanlock whose protocol and files the
# package stands in for: Debian 13's 3.9.5-1 by default (its sanlk-reset
# depends on exactly that version of sanlock).
DEB_PROVIDES_SANLOCK=${DEB_PROVIDES_SANLOCK:-3.9.5-1}
RPM_PROVIDES_SANLOCK=${RPM_PROVIDES_SANLOCK:-3.9.5}
# The maintainer named in the packages: the last commit's author.
PKG_MAINTAINER=${PKG_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || echo 'gosanlock developers <gosanlock@localhost>')}
export VERSION PKG_ARCH DEB_PROVIDES_SANLOCK RPM_PROVIDES_SANLOCK PKG_MAINTAINER
# Reproducible timestamps: the commit's time.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

root=dist/pkgroot
mkdir -p "$DIST"
echo "pkg-build: gosanlock $VERSION for $PKG_ARCH"
if [ "${PKG_STAGED:-}" != 1 ]; then
	rm -rf "$root"
	mkdir -p "$root"
	for b in sanlock wdmd; do
		CGO_ENABLED=0 GOOS=linux GOARCH=$PKG_ARCH $GO build -trimpath -ldflags='-s -w' \
			-o "$root/$b" ./cmd/$b
	done
	# The completion scripts come from a binary that runs here.
	gen=$root/sanlock
	if [ "$PKG_ARCH" != "$($GO env GOHOSTARCH)" ]; then
		gen=$root/sanlock-host
		CGO_ENABLED=0 $GO build -o "$gen" ./cmd/sanlock
	fi
	"$gen" completion bash >"$root/sanlock.bash"
	"$gen" completion zsh >"$root/_sanlock"
	"$gen" completion fish >"$root/sanlock.fish"
	rm -f "$root/sanlock-host"
	echo "$PKG_ARCH" >"$root/arch"
	for u in sanlock wdmd; do
		sed -e 's|@SBINDIR@|/usr/sbin|g' -e 's|@LIBEXECDIR@|/usr/libexec|g' -e 's|@SYSCONFDIR@|/etc|g' \
			"contrib/systemd/$u.service.in" >"$root/$u.service"
		gzip -9n <"docs/man/$u.8" >"$root/$u.8.gz"
	done
elif [ "$(cat "$root/arch" 2>/dev/null)" != "$PKG_ARCH" ]; then
	echo "pkg-build: PKG_STAGED=1 but $root holds no files staged for $PKG_ARCH" >&2
	exit 1
fi
{
	echo "gosanlock ($VERSION-1) unstable; urgency=medium"
	echo
	echo "  * Built from $(git rev-parse HEAD 2>/dev/null || echo 'a source tree')."
	echo
	echo " -- $PKG_MAINTAINER  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$root/changelog.gz"

for f in "$@"; do
	case "$f" in
	deb | rpm) $NFPM package --config packaging/nfpm.yaml --packager "$f" --target "$DIST/" ;;
	*) echo "pkg-build: unknown format $f (deb, rpm)" >&2; exit 2 ;;
	esac
done
