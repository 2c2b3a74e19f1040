package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"strconv"
	"syscall"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/manager"
	"golang.org/x/sys/unix"
)

// setLimits raises RLIMIT_MEMLOCK, RLIMIT_RTPRIO and RLIMIT_CORE to
// unlimited (privileged mode only, docs/cli.md "Startup" step 3). Failure is fatal
// and reported as sanlock does: "cannot set the limits for memlock 1".
func setLimits() error {
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

// dropPrivileges does initgroups, setgid, setuid and sets the process
// dumpable again (privileged mode with -U/-G, docs/cli.md "Startup" steps 1 and 8).
func dropPrivileges(cfg *Config) error {
	if cfg.UserName != "" {
		if u, err := user.Lookup(cfg.UserName); err == nil {
			if ids, err := u.GroupIds(); err == nil {
				gids := make([]int, 0, len(ids))
				for _, g := range ids {
					if n, err := strconv.Atoi(g); err == nil {
						gids = append(gids, n)
					}
				}
				if err := unix.Setgroups(gids); err != nil {
					return fmt.Errorf("initgroups failed: %w", err)
				}
			}
		}
	}
	if err := unix.Setgid(cfg.GID); err != nil {
		return fmt.Errorf("setgid %d failed: %w", cfg.GID, err)
	}
	if err := unix.Setuid(cfg.UID); err != nil {
		return fmt.Errorf("setuid %d failed: %w", cfg.UID, err)
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return nil
}

// setPriority applies -l (mlockall) and -h (SCHED_RR at max priority with
// reset-on-fork); failures are logged and the daemon goes on. The
// scheduling policy applies to the calling thread only: Go cannot set it
// for every runtime thread.
func (s *Server) setPriority() {
	switch s.cfg.MlockLevel {
	case 0:
	case 1:
		if err := unix.Mlockall(unix.MCL_CURRENT); err != nil {
			s.lg.Error(fmt.Sprintf("mlockall failed: %s", strerror(err)))
		}
	default:
		if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
			s.lg.Error(fmt.Sprintf("mlockall failed: %s", strerror(err)))
		}
	}
	if s.cfg.HighPriority {
		const schedResetOnFork = 0x40000000
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR | schedResetOnFork, Priority: 99}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			s.lg.Error(fmt.Sprintf("set scheduler RR|RESET_ON_FORK priority 99 failed: %s", strerror(err)))
		}
	}
}

// Daemonize implements "without -D, fork and let the parent exit 0" (docs/cli.md
// "Startup" step 2) for a Go program, which cannot fork: unless cfg.Debug is set
// or this process is already the background child, it starts the same
// executable with the same arguments, stdio on /dev/null, in a new session,
// with config.EnvDaemonized=1, and returns true: the caller (cmd/) then exits 0.
// It returns false when the caller should go on and run the daemon itself.
func Daemonize(cfg *Config) (parent bool, err error) {
	if cfg.Debug || os.Getenv(config.EnvDaemonized) == "1" || handover.Inherited() {
		return false, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer null.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), config.EnvDaemonized+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	_ = cmd.Process.Release()
	return true, nil
}

// Run is `sanlock daemon`: Start, then serve until a shutdown. SIGTERM,
// SIGINT and SIGHUP request a normal shutdown, which is ignored while
// lockspaces exist (docs/cli.md "Signals and exit"). When ctx ends the daemon stops at once.
// Run returns nil after a normal exit (exit status 0) and the startup error
// otherwise (exit status 1). The caller handles Daemonize first.
func Run(ctx context.Context, cfg *Config, deps Deps) error {
	_ = os.Unsetenv(config.EnvDaemonized) // not for the programs we start
	if handover.Inherited() {
		return runAdopted(ctx, cfg, deps) // live re-exec: reexec_new.go
	}
	if deps.Lockspaces == nil && deps.Manager == nil {
		deps.Manager = manager.New(manager.Config{})
	}
	s := New(cfg, deps)
	sigs := notifySignals()
	defer signal.Stop(sigs)
	if err := s.Start(); err != nil {
		return err
	}
	return s.serveSignals(ctx, sigs)
}

// notifySignals starts catching the daemon's signals.
func notifySignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	return sigs
}

// serveSignals runs a started daemon until it stops: metrics, systemd
// notification, and the signals (SIGUSR1: live re-exec, reexec.go).
func (s *Server) serveSignals(ctx context.Context, sigs chan os.Signal) error {
	stopMetrics, err := s.startMetrics()
	if err != nil && s.rx.adopted {
		// The old image may still hold the port for a moment: serve on.
		s.lg.Error("metrics after takeover: " + err.Error())
		stopMetrics, err = func() {}, nil
	}
	if err != nil {
		s.Stop()
		return err
	}
	defer stopMetrics()
	defer s.notifySystemd()()
	for {
		select {
		case sig := <-sigs:
			s.lg.Debug("signal received", zap.String("signal", sig.String()))
			if sig == syscall.SIGUSR1 {
				go s.reexecAndExit("")
				continue
			}
			s.RequestShutdown(false)
		case <-ctx.Done():
			s.Stop()
			return nil
		case <-s.Done():
			return nil
		}
	}
}
