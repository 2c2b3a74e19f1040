// Package sanlog is the daemon's logging: zap cores that write sanlock's
// log line format (docs/cli.md "Logging")
//
//	YYYY-MM-DD HH:MM:SS <monotonic seconds> [<tid>]: <prefix><message>[ key=value...]
//
// to the log file, syslog, -D's stderr and the in-memory ring of LOG_DUMP,
// with sanlock's priorities (-L, -S), and the JSON form of log_format =
// json. Code logs with zap and structured fields; TID and Prefix are the
// two fields the line format places itself.
package sanlog

import (
	"bytes"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// DefaultRingSize is the size of the in-memory log returned by LOG_DUMP
// (docs/cli.md "Logging").
const DefaultRingSize = 1 << 20

// Field keys that the sanlock line format consumes instead of printing them
// as key=value.
const (
	tidKey    = "tid"
	prefixKey = "log-prefix"
)

// TID sets the "[<thread id>]" part of a log line (default: the daemon pid).
func TID(id int) zap.Field { return zap.Int(tidKey, id) }

// Prefix sets the text printed before the message, such as "s1 " for
// lockspace 1 or "s1:r2 " for resource 2 in it (docs/cli.md "Logging").
func Prefix(p string) zap.Field { return zap.String(prefixKey, p) }

// Priority maps a zap level to the syslog priority sanlock compares with
// -L/-S: error 3, warning 4, info 6, debug 7; DPanic and above are 2.
func Priority(l zapcore.Level) int {
	switch {
	case l <= zapcore.DebugLevel:
		return 7
	case l == zapcore.InfoLevel:
		return 6
	case l == zapcore.WarnLevel:
		return 4
	case l == zapcore.ErrorLevel:
		return 3
	}
	return 2
}

// PriorityEnabler enables the levels whose priority is <= max; max < 0
// disables the sink.
type PriorityEnabler int

func (p PriorityEnabler) Enabled(l zapcore.Level) bool { return int(p) >= 0 && Priority(l) <= int(p) }

// MonoSeconds returns CLOCK_MONOTONIC in whole seconds, the second number on
// every log line and the monotime of STATUS.
func MonoSeconds() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)
}

// lineFormat renders sanlock log lines:
//
//	YYYY-MM-DD HH:MM:SS <monotonic seconds> [<tid>]: <prefix><message>[ key=value...]
type lineFormat struct {
	utc bool
	pid int
	now func() time.Time
	mon func() uint64
}

// text returns "<prefix><message>[ key=value...]" and the tid to print.
func (f *lineFormat) text(ent zapcore.Entry, fields []zapcore.Field) ([]byte, int) {
	tid, prefix := f.pid, ""
	var extra bytes.Buffer
	for _, fl := range fields {
		switch {
		case fl.Key == tidKey && fl.Type == zapcore.Int64Type:
			tid = int(fl.Integer)
			continue
		case fl.Key == prefixKey && fl.Type == zapcore.StringType:
			prefix = fl.String
			continue
		}
		enc := zapcore.NewMapObjectEncoder()
		fl.AddTo(enc)
		v, ok := enc.Fields[fl.Key]
		if !ok {
			continue // zap.Skip and namespaces
		}
		fmt.Fprintf(&extra, " %s=%v", fl.Key, v)
	}
	b := make([]byte, 0, len(prefix)+len(ent.Message)+extra.Len()+1)
	b = append(b, prefix...)
	b = append(b, ent.Message...)
	b = append(b, extra.Bytes()...)
	return b, tid
}

// Text is a message and its fields as the line format prints them after
// the prefix: "<message>[ key=value...]" (the tid and prefix fields left
// out). wdmd's log uses it for its own line format.
func Text(msg string, fields []zapcore.Field) string {
	b, _ := (&lineFormat{}).text(zapcore.Entry{Message: msg}, fields)
	return string(b)
}

func (f *lineFormat) line(ent zapcore.Entry, fields []zapcore.Field) []byte {
	text, tid := f.text(ent, fields)
	t := ent.Time
	if t.IsZero() {
		t = f.now()
	}
	if f.utc {
		t = t.UTC()
	}
	b := make([]byte, 0, 40+len(text))
	b = t.AppendFormat(b, "2006-01-02 15:04:05")
	b = append(b, ' ')
	b = strconv.AppendUint(b, f.mon(), 10)
	b = append(b, " ["...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, "]: "...)
	b = append(b, text...)
	return append(b, '\n')
}

// sink receives formatted output.
type sink interface {
	put(ent zapcore.Entry, fields []zapcore.Field) error
	sync() error
}

// writerSink writes whole lines to an io.Writer (stderr, the log file, the
// ring), serialised.
type writerSink struct {
	mu  sync.Mutex
	fmt *lineFormat
	w   io.Writer
}

func (s *writerSink) put(ent zapcore.Entry, fields []zapcore.Field) error {
	line := s.fmt.line(ent, fields)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.w.Write(line)
	return err
}

func (s *writerSink) sync() error {
	if f, ok := s.w.(interface{ Sync() error }); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = f.Sync()
	}
	return nil
}

// syslogSink sends the text (syslog adds its own time stamp).
type syslogSink struct {
	fmt *lineFormat
	w   *syslog.Writer
}

func (s *syslogSink) put(ent zapcore.Entry, fields []zapcore.Field) error {
	text, _ := s.fmt.text(ent, fields)
	m := string(text)
	switch Priority(ent.Level) {
	case 7:
		return s.w.Debug(m)
	case 6:
		return s.w.Info(m)
	case 4:
		return s.w.Warning(m)
	case 3:
		return s.w.Err(m)
	}
	return s.w.Crit(m)
}

func (s *syslogSink) sync() error { return nil }

// lineCore is a zapcore.Core writing sanlock lines to one sink. No
// sampling: repeated renewal errors must never be dropped.
type lineCore struct {
	zapcore.LevelEnabler
	out    sink
	fields []zapcore.Field
}

var _ zapcore.Core = (*lineCore)(nil)

func (c *lineCore) With(fields []zapcore.Field) zapcore.Core {
	f := make([]zapcore.Field, 0, len(c.fields)+len(fields))
	f = append(append(f, c.fields...), fields...)
	return &lineCore{LevelEnabler: c.LevelEnabler, out: c.out, fields: f}
}

func (c *lineCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *lineCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	all := fields
	if len(c.fields) > 0 {
		all = append(append(make([]zapcore.Field, 0, len(c.fields)+len(fields)), c.fields...), fields...)
	}
	return c.out.put(ent, all)
}

func (c *lineCore) Sync() error { return c.out.sync() }

// Ring is the in-memory log of LOG_DUMP: a byte ring of fixed size that
// keeps the newest output.
type Ring struct {
	mu      sync.Mutex
	buf     []byte
	pos     int  // next write position
	full    bool // every byte of buf holds data
	aligned bool // when full: the oldest byte starts a line
}

// NewRing returns a ring of size bytes (size <= 0: DefaultRingSize).
func NewRing(size int) *Ring {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &Ring{buf: make([]byte, size)}
}

// Write appends p, overwriting the oldest bytes when full. It never fails.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, size := len(p), len(r.buf)
	if n == 0 {
		return 0, nil
	}
	if n >= size {
		switch {
		case n > size:
			r.aligned = p[n-size-1] == '\n'
		case r.full || r.pos > 0:
			r.aligned = r.buf[(r.pos-1+size)%size] == '\n' // newest old byte
		default:
			r.aligned = true // nothing was dropped
		}
		copy(r.buf, p[n-size:])
		r.pos, r.full = 0, true
		return n, nil
	}
	end := r.pos + n
	newPos := end % size
	if r.full || end > size {
		// Old data is dropped; the last dropped byte sits just before
		// the new oldest byte and is about to be overwritten.
		r.aligned = r.buf[(newPos-1+size)%size] == '\n'
		r.full = true
	} else if end == size {
		r.aligned, r.full = true, true
	}
	k := copy(r.buf[r.pos:], p)
	copy(r.buf, p[k:])
	r.pos = newPos
	return n, nil
}

// Dump returns a copy of the contents, oldest first. After a wrap a partial
// first line is dropped.
func (r *Ring) Dump() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.pos]...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.pos:]...)
	out = append(out, r.buf[:r.pos]...)
	if !r.aligned {
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			out = out[i+1:]
		}
	}
	return out
}

// Options say where the daemon logs (docs/cli.md "Logging").
type Options struct {
	UTC             bool   // logfile_use_utc: UTC timestamps in every sink
	JSON            bool   // log_format = json: the log file and stderr in JSON
	RingSize        int    // the in-memory log (<= 0: DefaultRingSize)
	Stderr          bool   // -D: everything to stderr too
	LogFile         string // "" = none
	LogfilePriority int    // -L (-1: no log file)
	SyslogPriority  int    // -S (-1: no syslog)
}

// Sinks is the daemon's logger and what it owns.
type Sinks struct {
	Logger  *zap.Logger
	Ring    *Ring
	closers []io.Closer
}

// Close syncs the logger and closes the log file and syslog.
func (l *Sinks) Close() {
	_ = l.Logger.Sync()
	for _, c := range l.closers {
		_ = c.Close()
	}
	l.closers = nil
}

// Open builds the daemon logger (docs/cli.md "Logging"): the log file at
// -L priority (skipped if it cannot be opened), syslog at -S priority,
// stderr with -D (everything), the ring (everything), plus extra (tests).
// log_format = json changes the log file and stderr only (json.go).
func Open(o Options, stderr io.Writer, extra zapcore.Core) *Sinks {
	f := &lineFormat{utc: o.UTC, pid: os.Getpid(), now: time.Now, mon: MonoSeconds}
	ls := &Sinks{Ring: NewRing(o.RingSize)}
	cores := []zapcore.Core{
		&lineCore{LevelEnabler: zapcore.DebugLevel, out: &writerSink{fmt: f, w: ls.Ring}},
	}
	if o.Stderr && stderr != nil {
		cores = append(cores, textOrJSON(o.JSON, stderr, zapcore.DebugLevel, f))
	}
	if o.LogFile != "" && o.LogfilePriority >= 0 {
		if fh, err := os.OpenFile(o.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			ls.closers = append(ls.closers, fh)
			cores = append(cores, textOrJSON(o.JSON, fh, PriorityEnabler(o.LogfilePriority), f))
		}
	}
	if o.SyslogPriority >= 0 {
		if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_ERR, "sanlock"); err == nil {
			ls.closers = append(ls.closers, w)
			cores = append(cores, &lineCore{LevelEnabler: PriorityEnabler(o.SyslogPriority), out: &syslogSink{fmt: f, w: w}})
		}
	}
	if extra != nil {
		cores = append(cores, extra)
	}
	ls.Logger = zap.New(zapcore.NewTee(cores...))
	return ls
}
