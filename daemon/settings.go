package daemon

import (
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/manager"
)

// Config is the daemon's settings, parsed by package daemon/config.
type Config = config.Config

// managerSettings are the options of cfg the lease manager follows.
func managerSettings(c *Config) manager.Settings {
	return manager.Settings{
		IOTimeout: c.IOTimeout, UseWatchdog: c.UseWatchdog, WdmdSocket: c.WdmdSocket, WatchdogFireTimeout: c.WatchdogFireTimeout,
		KillGraceSeconds: c.KillGraceSeconds, SetBitmapSeconds: c.SetBitmapSeconds,
		RenewalHistorySize: c.RenewalHistorySize, RenewalReadExtendSet: c.RenewalReadExtendSet,
		RenewalReadExtendSec: c.RenewalReadExtendSec, DebugRenew: c.DebugRenew, ShRetries: c.ShRetries,
		WriteInitIOTimeout: c.WriteInitIOTimeout,
		DeltaVersion:       c.DeltaCreateVersion(), PaxosVersion: c.PaxosCreateVersion(),
		GenerationDir: c.GenerationDir,
	}
}
