package cli

import (
	"context"

	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
)

// daemonMain is `sanlock daemon`: the config file and the options have
// already been applied to the daemon settings; add the environment, leave
// the foreground unless -D or under systemd, then serve until shutdown. Startup errors are
// logged by the daemon itself (as sanlock does) and give exit status 1.
func daemonMain(inv *Invocation) int {
	cfg := inv.opts.cfg
	cfg.ApplyEnv(nil)
	// Under a systemd Type=notify unit the daemon stays the process systemd
	// started (sdnotify.Active) and reports readiness itself.
	if !sdnotify.Active() {
		parent, err := daemon.Daemonize(cfg)
		if err != nil {
			return 1
		}
		if parent {
			return 0
		}
	}
	startPprof(inv.f.ErrOut)
	if err := daemon.Run(context.Background(), cfg, daemon.Deps{Stderr: inv.f.ErrOut}); err != nil {
		return 1
	}
	return 0
}
