package cli

import (
	"bufio"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

// Factory is everything a command reaches outside its own arguments: the
// output streams, the config file, the daemon socket, lease storage, the
// clock and exec. Main builds the real one (NewFactory); tests build one
// with a config path, a device or a clock of their own. Nothing in this
// package keeps such a setting in a package variable.
type Factory struct {
	// Argv0 is the program name, as -V prints it.
	Argv0 string
	// Out is stdout: every line of the tool goes there (buffered; the
	// caller flushes it, and "client command" flushes it before exec).
	Out *bufio.Writer
	// ErrOut is stderr (the daemon's -D logging, --json scan messages,
	// exec failures).
	ErrOut io.Writer
	// ConfigPath is the config file read in every mode; $SANLOCK_CONFIG_FILE
	// names another one.
	ConfigPath string
	// BuildDate is what -V prints after "built".
	BuildDate string
	// Dial connects to the daemon for a client action.
	Dial func() (*client.Client, error)
	// OpenDevice opens lease storage for a direct action.
	OpenDevice func(path string) (diskfmt.Device, error)
	// Clock is the monotonic clock of the direct lease actions.
	Clock func() clock.Clock
	// MonotonicSeconds is the writer's monotonic time in whole seconds,
	// as a cleared lease records it.
	MonotonicSeconds func() uint64
	// Exec replaces the process ("client command -c").
	Exec func(path string, argv, env []string) error
	// OutTTY says Out ends on a terminal (see CommandOptions.OutTTY).
	OutTTY bool
	// ErrTTY says ErrOut is a terminal: the client actions that wait draw
	// their progress there (docs/cli.md "Diagnostics on stderr").
	ErrTTY bool
}

// NewFactory returns the factory of the real tool writing to stdout and
// stderr.
func NewFactory(argv0 string, stdout, stderr io.Writer) *Factory {
	return &Factory{
		Argv0:      argv0,
		Out:        bufio.NewWriter(stdout),
		ErrOut:     stderr,
		ConfigPath: defaultConfigPath,
		BuildDate:  builtString(buildDate),
		// The client package reads SANLOCK_RUN_DIR on every Dial, like
		// libsanlock reads it for every connection.
		Dial:             func() (*client.Client, error) { return client.Dial("") },
		OpenDevice:       func(path string) (diskfmt.Device, error) { return diskio.OpenFile(path) },
		Clock:            func() clock.Clock { return clock.NewSystem() },
		MonotonicSeconds: monotonicSeconds,
		Exec:             syscall.Exec,
		OutTTY:           isTerminal(stdout),
		ErrTTY:           isTerminal(stderr),
	}
}

// isTerminal reports whether w is an open terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
