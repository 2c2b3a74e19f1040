package daemon

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/internal/process"
)

// setPriority applies -l (mlockall) and -h (SCHED_RR at max priority with
// reset-on-fork, the calling thread only); failures are logged and the
// daemon goes on.
func (s *Server) setPriority() {
	if err := process.Mlock(s.cfg.MlockLevel); err != nil {
		s.lg.Error("mlockall failed", zap.String("cause", process.Strerror(err)))
	}
	if s.cfg.HighPriority {
		if err := process.HighPriority(); err != nil {
			s.lg.Error("set scheduler RR|RESET_ON_FORK priority 99 failed", zap.String("cause", process.Strerror(err)))
		}
	}
}

// Daemonize implements "without -D, fork and let the parent exit 0" (docs/cli.md
// "Startup" step 2): unless cfg.Debug is set or this process is already the
// background child (config.EnvDaemonized, or a live re-exec), it starts the
// background child (process.Background) and returns true: the caller (cmd/)
// then exits 0. It returns false when the caller should go on and run the
// daemon itself. When another daemon already holds the run directory's
// lock it starts nothing and returns that lock error (ErrLocked, with the
// holder's pid), so that the caller can say so and exit 1.
func Daemonize(cfg *Config) (parent bool, err error) {
	if cfg.Debug || os.Getenv(config.EnvDaemonized) == "1" || handover.Inherited() {
		return false, nil
	}
	if err := process.CheckPidFile(filepath.Join(cfg.RunDir, PidFileName)); err != nil {
		return false, err
	}
	if err := process.Background(config.EnvDaemonized); err != nil {
		return false, err
	}
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
		return runAdopted(ctx, cfg, deps) // live upgrade: adopt.go
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
// notification, and the signals (SIGUSR1: live upgrade, handover.go).
func (s *Server) serveSignals(ctx context.Context, sigs chan os.Signal) error {
	stopMetrics, err := s.startMetrics()
	if err != nil && s.rx.adopted {
		// The old image may still hold the port for a moment: serve on.
		s.lg.Error("metrics after takeover", zap.Error(err))
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
				go s.reexecAndExit()
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
