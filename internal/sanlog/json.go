package sanlog

import (
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// jsonCore writes one JSON object per line with zap's JSON encoder:
//
//	{"ts":"2026-11-25T10:41:07.123+0000","level":"error","pid":812,
//	 "mono":437,"msg":"...","log-prefix":"s1 ","tid":813}
//
// ts is RFC 3339 with milliseconds (UTC with logfile_use_utc), mono the
// CLOCK_MONOTONIC seconds of the text format, pid the daemon's pid; the
// fields of the entry follow (tid and log-prefix as in the text lines).
func jsonCore(w io.Writer, enab zapcore.LevelEnabler, f *lineFormat) zapcore.Core {
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.CallerKey = zapcore.OmitKey
	ec.StacktraceKey = zapcore.OmitKey
	ec.EncodeTime = func(t time.Time, pe zapcore.PrimitiveArrayEncoder) {
		if f.utc {
			t = t.UTC()
		}
		pe.AppendString(t.Format("2006-01-02T15:04:05.000Z0700"))
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(ec), zapcore.AddSync(w), enab)
	return &monoCore{Core: core.With([]zapcore.Field{zap.Int("pid", f.pid)}), mon: f.mon}
}

// monoCore adds the monotonic seconds of the moment each entry is written.
type monoCore struct {
	zapcore.Core
	mon func() uint64
}

func (c *monoCore) With(fields []zapcore.Field) zapcore.Core {
	return &monoCore{Core: c.Core.With(fields), mon: c.mon}
}

func (c *monoCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *monoCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	all := make([]zapcore.Field, 0, len(fields)+1)
	all = append(append(all, zap.Uint64("mono", c.mon())), fields...)
	return c.Core.Write(ent, all)
}

// textOrJSON returns the core for a file-like sink in the configured
// format.
func textOrJSON(json bool, w io.Writer, enab zapcore.LevelEnabler, f *lineFormat) zapcore.Core {
	if json {
		return jsonCore(w, enab, f)
	}
	return &lineCore{LevelEnabler: enab, out: &writerSink{fmt: f, w: w}}
}
