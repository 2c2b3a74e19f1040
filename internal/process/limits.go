package process

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetLimits raises RLIMIT_MEMLOCK, RLIMIT_RTPRIO and RLIMIT_CORE to
// unlimited (privileged mode only, docs/cli.md "Startup" step 3). Failure is fatal
// and reported as sanlock does: "cannot set the limits for memlock 1".
func SetLimits() error {
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	for _, l := range []struct {
		res  int
		name string
	}{{unix.RLIMIT_MEMLOCK, "memlock"}, {unix.RLIMIT_RTPRIO, "rtprio"}, {unix.RLIMIT_CORE, "core dumps"}} {
		if err := unix.Setrlimit(l.res, &inf); err != nil {
			return fmt.Errorf("cannot set the limits for %s %d", l.name, errnoOf(err))
		}
	}
	return nil
}

func errnoOf(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	return -1
}

// DropPrivileges does initgroups for userName (when set), setgid, setuid
// and sets the process dumpable again (privileged mode with -U/-G,
// docs/cli.md "Startup" steps 1 and 8).
func DropPrivileges(userName string, uid, gid int) error {
	if userName != "" {
		if u, err := user.Lookup(userName); err == nil {
			if ids, err := u.GroupIds(); err == nil {
				gids := make([]int, 0, len(ids))
				for _, g := range ids {
					if n, err := strconv.Atoi(g); err == nil {
						gids = append(gids, n)
					}
				}
				// syscall.Setgroups sets the groups of every thread of
				// the process; x/sys/unix's sets only the calling one.
				if err := syscall.Setgroups(gids); err != nil {
					return fmt.Errorf("initgroups failed: %w", err)
				}
			}
		}
	}
	if err := unix.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d failed: %w", gid, err)
	}
	if err := unix.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d failed: %w", uid, err)
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return nil
}

// Mlock applies mlock_level (-l): 0 none, 1 current pages, 2 current and
// future.
func Mlock(level int) error {
	switch level {
	case 0:
		return nil
	case 1:
		return unix.Mlockall(unix.MCL_CURRENT)
	default:
		return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE)
	}
}

// HighPriority sets SCHED_RR at priority 99 with reset-on-fork (-h). The
// policy applies to the calling thread only: Go cannot set it for every
// runtime thread.
func HighPriority() error {
	const schedResetOnFork = 0x40000000
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR | schedResetOnFork, Priority: 99}
	return unix.SchedSetAttr(0, &attr, 0)
}
