package daemon

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/sanlog"
)

// logSinks is the daemon's logger (package internal/sanlog) and what it
// owns; lg is Sinks.Logger.
type logSinks struct {
	lg *zap.Logger
	*sanlog.Sinks
}

// newLogSinks opens the daemon's log sinks as cfg says, plus extra (tests).
func newLogSinks(cfg *Config, stderr io.Writer, extra zapcore.Core) *logSinks {
	sk := sanlog.Open(sanlog.Options{
		UTC:             cfg.LogfileUseUTC,
		JSON:            cfg.LogFormat == config.LogFormatJSON,
		RingSize:        cfg.LogRingSize,
		Stderr:          cfg.Debug,
		LogFile:         cfg.LogFile,
		LogfilePriority: cfg.LogfilePriority,
		SyslogPriority:  cfg.SyslogPriority,
	}, stderr, extra)
	return &logSinks{lg: sk.Logger, Sinks: sk}
}

// monoSeconds is the daemon's monotonic time in whole seconds, on the
// clock of its lease manager (CLOCK_MONOTONIC unless Deps.Manager gives
// another): the clock of the times in the host_status and renewal records,
// so STATUS's monotime can be compared with them.
func (s *Server) monoSeconds() uint64 { return clock.Monotime(s.deps.Manager.Clock) }
