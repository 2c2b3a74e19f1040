#!/usr/bin/env bash
# Soak the mixed cluster: real sanlock daemons (one C, two of ours by
# default) on one lockspace, holder processes looping acquire -> record ->
# release on one resource, storage faults (latency, EIO, hangs) and host
# pauses injected through the harness, every holding checked for
# exclusion and lver order. Runs until stopped (Ctrl-C) or for a duration
# or count; prints acquisitions per second, faults injected and violations
# (which must be 0) every interval. Needs root. See docs/harness.md.
#
#   scripts/soak.sh                      # until Ctrl-C
#   scripts/soak.sh -duration 30m        # or -count 100000
#   scripts/soak.sh -kinds go,go,go -holders 3 -shared 0 -faults=false
#   SOAK_DURATION=10m scripts/soak.sh    # what `make soak` runs
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [ ${#args[@]} -eq 0 ] && [ -n "${SOAK_DURATION:-}" ]; then
	args=(-duration "$SOAK_DURATION")
fi
go build -o "${TMPDIR:-/tmp}/gosanlock-soak" ./testdisk/harness/soak
exec "${TMPDIR:-/tmp}/gosanlock-soak" "${args[@]}"
