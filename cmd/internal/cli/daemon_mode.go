package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/memtune"
	"github.com/gosanlock/gosanlock/internal/process"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
)

// DaemonOptions is what "sanlock daemon" runs with: the daemon settings
// (config file and options applied) and stderr.
type DaemonOptions struct {
	Config *daemon.Config
	ErrOut io.Writer
}

// NewCmdDaemon is "sanlock daemon [options]", with sanlock's option syntax
// scanned by the command itself (see newClientCmd). runF, when not
// nil, receives the options instead of starting the daemon (tests).
func NewCmdDaemon(f *Factory, runF func(*DaemonOptions) error) *cobra.Command {
	cmd := newOptionsCmd(f, "daemon", "", "daemon [options]", commandShort("daemon"), func(o *options) error {
		opts := &DaemonOptions{Config: o.cfg, ErrOut: f.ErrOut}
		if runF != nil {
			return runF(opts)
		}
		return exitWith(runDaemon(opts))
	})
	cmd.Long = "sanlock daemon [options]\n" + daemonOptionsHelp
	return cmd
}

// runDaemon is `sanlock daemon`: the config file and the options have
// already been applied to the daemon settings; add the environment, leave
// the foreground unless -D or under systemd, then serve until shutdown. Startup errors are
// logged by the daemon itself (as sanlock does) and give exit status 1.
// The config-file warnings and a daemon already running on the run
// directory are also said on stderr (docs/cli.md "Diagnostics on stderr").
func runDaemon(opts *DaemonOptions) int {
	cfg := opts.Config
	cfg.ApplyEnv(nil)
	if !cfg.Debug {
		// With -D the daemon's log, these lines included, goes to stderr.
		for _, w := range cfg.FileWarnings() {
			fmt.Fprintln(opts.ErrOut, w)
		}
	}
	// Under a systemd Type=notify unit the daemon stays the process systemd
	// started (sdnotify.Active) and reports readiness itself.
	if !sdnotify.Active() {
		parent, err := daemon.Daemonize(cfg)
		if err != nil {
			sayStartError(opts.ErrOut, err)
			return 1
		}
		if parent {
			return 0
		}
	}
	tuning := memtune.Start()
	startPprof(opts.ErrOut)
	if err := daemon.Run(context.Background(), cfg, daemon.Deps{Stderr: opts.ErrOut, Tuning: tuning}); err != nil {
		sayStartError(opts.ErrOut, err)
		return 1
	}
	return 0
}

// sayStartError puts "sanlock daemon: already running (pid N)" on w when
// err is the lock of another daemon; the daemon's log has sanlock's
// lockfile line.
func sayStartError(w io.Writer, err error) {
	var le *process.LockfileError
	if errors.Is(err, daemon.ErrLocked) && errors.As(err, &le) {
		fmt.Fprintf(w, "sanlock daemon: %s\n", le.Running())
	}
}
