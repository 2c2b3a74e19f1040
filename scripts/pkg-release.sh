#!/usr/bin/env bash
# Release artefacts in $DIST (dist/): for each of $RELEASE_ARCHES
# (default amd64 arm64) the static binaries sanlock-VERSION-linux-ARCH
# and wdmd-VERSION-linux-ARCH, the .deb and the .rpm
# (scripts/pkg-build.sh), then SHA256SUMS over all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
DIST=${DIST:-dist}
VERSION=$(scripts/pkg-version.sh)
export VERSION DIST
mkdir -p "$DIST"
for a in ${RELEASE_ARCHES:-amd64 arm64}; do
	PKG_ARCH=$a scripts/pkg-build.sh deb rpm
	for b in sanlock wdmd; do
		cp dist/pkgroot/$b "$DIST/$b-$VERSION-linux-$a"
	done
done
cd "$DIST"
files=$(ls sanlock-"$VERSION"-linux-* wdmd-"$VERSION"-linux-* gosanlock_"$VERSION"-1_*.deb gosanlock-"$VERSION"-1.*.rpm)
# shellcheck disable=SC2086
sha256sum $files >SHA256SUMS
echo "release $VERSION in $DIST:"
cat SHA256SUMS
