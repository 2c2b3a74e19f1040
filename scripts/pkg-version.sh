#!/usr/bin/env bash
# The package version: $VERSION when set, else from git. A tag vX.Y.Z
# gives X.Y.Z, and N commits after it X.Y.Z+N.gHASH; with no tag,
# 0.0+gitN.gHASH (N = commits in HEAD), so that each later commit has a
# higher version. The result is valid for dpkg and rpm (no '-', no '_').
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VERSION:-}" ]; then
	v=$VERSION
elif d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
	v=$(sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)$/+\1.g\2/' <<<"$d")
else
	v="0.0+git$(git rev-list --count HEAD).g$(git rev-parse --short HEAD)"
fi
if ! [[ $v =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	echo "pkg-version: '$v' is not a package version (digits first, then letters, digits, '.', '+', '~')" >&2
	exit 1
fi
echo "$v"
