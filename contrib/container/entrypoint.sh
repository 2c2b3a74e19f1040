#!/bin/bash
# Entry point of contrib/container/Dockerfile: starts wdmd (unless
# WATCHDOG=none) and the sanlock daemon in the foreground, logging to
# the container's output, and exits when either of them exits, so the
# container runtime sees the failure. docs/container.md.
set -euo pipefail

watchdog=${WATCHDOG:-device}
sanlock_opts=${SANLOCK_OPTS:-}
wdmd_opts=${WDMD_OPTS:-}
pids=()
stopping=0
# Stop in reverse start order, each before the next: sanlock (which exits
# only when it has no lockspace left), then wdmd (clean close of the
# device), then the emulated device.
stop() {
	stopping=1
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || continue
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap 'stop' TERM INT

case $watchdog in
device)
	if ! ls /dev/watchdog* >/dev/null 2>&1; then
		echo "gosanlock: no /dev/watchdog* in the container: load softdog on the host" \
			"(modprobe softdog) and run with --device /dev/watchdog --device /dev/watchdog0," \
			"or set WATCHDOG=emulated (no protection)" >&2
		exit 1
	fi
	wdmd -D $wdmd_opts &
	pids+=($!)
	;;
emulated)
	echo "gosanlock: WARNING: emulated watchdog: a failed host is NOT reset" >&2
	wdmd-testdev -socket /run/wdmd-testdev.sock -exit-on-fire &
	pids+=($!)
	for _ in $(seq 50); do [ -S /run/wdmd-testdev.sock ] && break; sleep 0.1; done
	# wdmd-emulated: wdmd built with -tags wdmd_testdev (the production wdmd
	# does not link the emulated device).
	wdmd-emulated -D --test-device /run/wdmd-testdev.sock $wdmd_opts &
	pids+=($!)
	;;
none)
	echo "gosanlock: WARNING: WATCHDOG=none: leases are not backed by a watchdog" >&2
	sanlock_opts="-w 0 $sanlock_opts"
	;;
*)
	echo "gosanlock: WATCHDOG must be device, emulated or none" >&2
	exit 1
	;;
esac

if [ "$watchdog" != none ]; then
	for _ in $(seq 100); do [ -S /run/wdmd/wdmd.sock ] && break; sleep 0.1; done
	[ -S /run/wdmd/wdmd.sock ] || { echo "gosanlock: wdmd did not start" >&2; stop; exit 1; }
fi

# Without CAP_SYS_RESOURCE (the default for containers) the privileged
# start cannot raise its limits; run unprivileged then.
if ! (ulimit -l unlimited) 2>/dev/null; then
	export SANLOCK_PRIVILEGED=${SANLOCK_PRIVILEGED:-0}
fi
sanlock daemon -D $sanlock_opts &
pids+=($!)

status=0
wait -n "${pids[@]}" || status=$?
if [ "$stopping" = 1 ]; then
	exit 0 # stopped by TERM/INT: every daemon has exited
fi
echo "gosanlock: a daemon exited (status $status); stopping the others" >&2
stop
exit "$status"
