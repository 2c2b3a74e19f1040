package daemon

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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

// monoSeconds is CLOCK_MONOTONIC in whole seconds, as on every log line.
func monoSeconds() uint64 { return sanlog.MonoSeconds() }
