// Package wdmdcli is the wdmd command: the watchdog multiplexing daemon of
// sanlock 3.8.5 (options, output, files and socket protocol of
// docs/wdmd.md) around the pure test loop of package wdmd.
package wdmdcli

import (
	"context"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/internal/sanlog"
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/watchdog"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

// Main runs wdmd with args (args[0] is the program name) and returns the
// exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	argv0 := "wdmd"
	if len(args) > 0 {
		argv0 = args[0]
		args = args[1:]
	}
	status := 0
	cmd := &cobra.Command{
		Use:                "wdmd",
		DisableFlagParsing: true, // getopt rules, see parse
		SilenceErrors:      true,
		SilenceUsage:       true,
		Args:               cobra.ArbitraryArgs,
		Run: func(_ *cobra.Command, args []string) {
			status = run(argv0, args, stdout, stderr)
		},
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetHelpCommand(&cobra.Command{Hidden: true})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return status
}

func run(argv0 string, args []string, stdout, stderr io.Writer) int {
	o, act := parse(argv0, args, stderr)
	switch act {
	case actHelp:
		fmt.Fprint(stdout, usage)
		return 0
	case actVersion:
		fmt.Fprintf(stdout, "wdmd version %s\n", Version)
		return 0
	case actDump:
		text, err := wdmdclient.Dump(o.runDir + "/wdmd.sock")
		if err != nil {
			return 1
		}
		fmt.Fprint(stdout, text)
		return 0
	}
	if o.testDevice != "" && testDevice == nil {
		fmt.Fprintln(stderr, "wdmd: --test-device: this wdmd is built without test device support (go build -tags wdmd_testdev)")
		return 1
	}
	if o.forceFire && o.tryTimeout == 0 {
		fmt.Fprintln(stderr, "Use force fire (-F) with a timeout (-t).")
		return 1
	}
	if o.tryTimeout != 0 {
		return wdmd.TryTimeout(context.Background(), o.driver(), wdmd.TryOptions{
			First: o.device, Timeout: o.tryTimeout, Force: o.forceFire, Clock: clock.NewSystem(), Wall: time.Now,
		}, stdout, stderr)
	}
	if o.probe || o.tryGiven {
		// -t 0 probes, as wdmd 3.9 does.
		return probe(o, stdout, stderr)
	}
	return daemon(o, stderr)
}

// testDevice dials a served emulated device bank (--test-device). It is
// nil in the production binary: only a wdmd built with -tags wdmd_testdev
// (testdevice.go) links the emulated device.
var testDevice func(socket string) wdmd.Driver

// driver is the watchdog driver: the real /dev/watchdog*, or a served
// test device bank.
func (o *options) driver() wdmd.Driver {
	if o.testDevice != "" {
		return testDevice(o.testDevice)
	}
	return watchdog.Driver{}
}

// logger writes wdmd's log as a zap core: the error-level lines to syslog
// (ident wdmd, facility daemon, level err), and with -D every line to
// stderr as "<epoch> <date> <time>  <msg>[ key=value...]", as wdmd 3.9
// and later print it.
type logger struct {
	mu     sync.Mutex
	sys    *syslog.Writer
	stderr io.Writer // nil without -D
}

// zapLogger is l as the *zap.Logger the wdmd packages take.
func (l *logger) zapLogger() *zap.Logger { return zap.New(&logCore{l: l}) }

// logCore is the zapcore.Core over a logger.
type logCore struct {
	l      *logger
	fields []zapcore.Field
}

func (c *logCore) Enabled(zapcore.Level) bool { return true }

func (c *logCore) With(fields []zapcore.Field) zapcore.Core {
	return &logCore{l: c.l, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *logCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(ent, c)
}

func (c *logCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	all := append(append([]zapcore.Field(nil), c.fields...), fields...)
	c.l.line(ent.Level < zapcore.ErrorLevel, sanlog.Text(ent.Message, all))
	return nil
}

func (c *logCore) Sync() error { return nil }

func newLogger(ident string, foreground bool, stderr io.Writer) *logger {
	l := &logger{}
	if w, err := syslog.New(syslog.LOG_ERR|syslog.LOG_DAEMON, ident); err == nil {
		l.sys = w
	}
	if foreground {
		l.stderr = stderr
	}
	return l
}

func (l *logger) line(debug bool, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sys != nil && !debug {
		_ = l.sys.Err(msg)
	}
	if l.stderr != nil {
		now := time.Now()
		fmt.Fprintf(l.stderr, "%d %s  %s\n", now.Unix(), now.Format("2006-01-02 15:04:05"), msg)
	}
}

func (l *logger) close() {
	if l.sys != nil {
		_ = l.sys.Close()
	}
}

func probe(o *options, stdout, stderr io.Writer) int {
	f, err := os.OpenFile(o.marker, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		const msg = "cannot probe watchdog devices while wdmd is in use."
		fmt.Fprintln(stderr, msg)
		l := newLogger("wdmd-probe", false, nil)
		l.line(false, msg)
		l.close()
		return 1
	}
	_ = f.Close()
	defer os.Remove(o.marker)
	if !wdmd.Probe(o.driver(), o.device, wdmd.DefaultFireTimeout, stdout, stderr) {
		return 1
	}
	return 0
}
