package delta

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Logging: the delta lease and the runner log with zap, a message in
// sanlock's wording followed by structured fields (docs/cli.md "Logging").
// The caller gives the logger (Config.Log, Lease.Log) and adds what delta
// does not know, such as the disk path; nil discards the lines.

// resultField is the result code of err as log text, "-202 (SANLK_AIO_TIMEOUT)".
func resultField(err error) zap.Field {
	return zap.String("result", rescode.CodeOf(err).LogString())
}

// causeField is err as text for a log line (diskfmt.Cause), with the
// "I/O timeout after N s" prefix when ioTimeout is known.
func causeField(err error, ioTimeout int) zap.Field {
	return zap.String("cause", diskfmt.Cause(err, ioTimeout))
}

// nopOr returns l, or a logger that discards everything when l is nil.
func nopOr(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}

// logfLogger adapts the Logf form of Config (kept for callers not yet
// converted) to a zap.Logger: each entry becomes one call of f with the
// message followed by " key=value" for each field.
func logfLogger(f func(format string, args ...any)) *zap.Logger {
	return zap.New(&logfCore{f: f})
}

type logfCore struct {
	f      func(format string, args ...any)
	fields []zapcore.Field
}

func (c *logfCore) Enabled(zapcore.Level) bool { return true }

func (c *logfCore) With(fields []zapcore.Field) zapcore.Core {
	return &logfCore{f: c.f, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *logfCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(ent, c)
}

func (c *logfCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	var b strings.Builder
	b.WriteString(ent.Message)
	for _, fl := range append(append([]zapcore.Field(nil), c.fields...), fields...) {
		enc := zapcore.NewMapObjectEncoder()
		fl.AddTo(enc)
		if v, ok := enc.Fields[fl.Key]; ok {
			fmt.Fprint(&b, " ", fl.Key, "=", v)
		}
	}
	c.f("%s", b.String())
	return nil
}

func (c *logfCore) Sync() error { return nil }

// ownerFields are the owner fields of a delta lease record, after hostID
// (ours) when it is not 0.
func ownerFields(hostID uint64, r *diskfmt.Leader) []zap.Field {
	f := make([]zap.Field, 0, 5)
	if hostID != 0 {
		f = append(f, zap.Uint64("host_id", hostID))
	}
	return append(f, zap.Uint64("owner_id", r.OwnerID), zap.Uint64("owner_generation", r.OwnerGeneration),
		zap.Uint64("timestamp", r.Timestamp), zap.String("owner_name", diskfmt.NameString(r.ResourceName[:])))
}
