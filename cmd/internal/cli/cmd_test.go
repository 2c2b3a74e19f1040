package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/daemon/config"
)

// TestNewCmdDaemon: each daemon option reaches its setting (parsing
// alone: runF receives the options, no daemon starts); a letter the daemon
// does not know fails before runF.
func TestNewCmdDaemon(t *testing.T) {
	for _, c := range []struct {
		args []string
		set  func(*daemon.Config) // the change from the defaults; nil: an option error
		out  string
	}{
		{nil, func(*daemon.Config) {}, ""},
		{[]string{"-D"}, func(c *daemon.Config) { c.Debug = true }, ""},
		{[]string{"-Q", "0"}, func(c *daemon.Config) { c.QuietFail = false }, ""},
		{[]string{"-R", "1"}, func(c *daemon.Config) { c.DebugRenew = true }, ""},
		{[]string{"-H", "0"}, func(c *daemon.Config) { c.RenewalHistorySize = 0 }, ""},
		{[]string{"-L", "-1"}, func(c *daemon.Config) { c.LogfilePriority = -1 }, ""},
		{[]string{"-S", "7"}, func(c *daemon.Config) { c.SyslogPriority = 7 }, ""},
		{[]string{"-U", "root"}, func(c *daemon.Config) { c.UserName = "root" }, ""},
		{[]string{"-G", "root"}, func(c *daemon.Config) { c.GroupName = "root" }, ""},
		{[]string{"-t", "1"}, func(c *daemon.Config) { c.MaxWorkerThreads = 2 }, ""},
		{[]string{"-g", "5"}, func(c *daemon.Config) { _ = c.ApplyOption('g', "5") }, ""},
		{[]string{"-g", "70"}, func(*daemon.Config) {}, ""}, // out of range: ignored
		{[]string{"-o", "3"}, func(c *daemon.Config) { c.IOTimeout = 3 }, ""},
		{[]string{"-w", "0"}, func(c *daemon.Config) { c.UseWatchdog = false }, ""},
		{[]string{"-h", "1"}, func(c *daemon.Config) { c.HighPriority = true }, ""},
		{[]string{"-l", "2"}, func(c *daemon.Config) { c.MlockLevel = 2 }, ""},
		{[]string{"-b", "30"}, func(c *daemon.Config) { c.SetBitmapSeconds = 30 }, ""},
		{[]string{"-e", "host1"}, func(c *daemon.Config) { c.OurHostName = "host1" }, ""},
		{[]string{"-a", "0"}, func(c *daemon.Config) { c.UseAIO = false }, ""},
		{[]string{"-X", "1"}, func(c *daemon.Config) { c.StrictPeer = true }, ""},
		{[]string{"-M", "127.0.0.1:9"}, func(c *daemon.Config) { c.MetricsAddress = "127.0.0.1:9" }, ""},
		{[]string{"-r", "LS:R"}, func(*daemon.Config) {}, ""}, // read, meaningless here
		{[]string{"-y", "1"}, nil, "unknown option: y\n"},
		{[]string{"-w"}, nil, "option 'w' requires arg\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			f := testFactory(&out, &errb)
			var got *DaemonOptions
			cmd := NewCmdDaemon(f, func(o *DaemonOptions) error { got = o; return nil })
			cmd.SetArgs(append([]string{}, c.args...))
			err := cmd.Execute()
			f.Out.Flush()
			assert.Equal(t, c.out, out.String())
			if c.set == nil {
				assert.Equal(t, exitError(1), err)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, got)
			want := config.DefaultConfig()
			c.set(want)
			assert.Equal(t, want, got.Config)
			assert.Equal(t, f.ErrOut, got.ErrOut)
		})
	}
}

// TestPinCommandWords: only where a command or action word is expected
// does an argument starting with '-' get a "--" before it.
func TestPinCommandWords(t *testing.T) {
	root := NewCmdRoot(testFactory(&bytes.Buffer{}, &bytes.Buffer{}))
	for _, c := range []struct{ in, want []string }{
		{nil, []string{}},
		{[]string{"-V"}, []string{"--", "-V"}},
		{[]string{"-x", "client", "status"}, []string{"--", "-x", "client", "status"}},
		{[]string{"client", "-x", "-y", "status"}, []string{"client", "--", "-x", "-y", "status"}},
		{[]string{"client", "status", "-D"}, []string{"client", "status", "-D"}},
		{[]string{"status", "-o", "p"}, []string{"status", "-o", "p"}},
		{[]string{"daemon", "-D"}, []string{"daemon", "-D"}},
		{[]string{"foo", "-q"}, []string{"foo", "-q"}},
	} {
		assert.Equal(t, c.want, pinCommandWords(root, c.in), "%q", c.in)
	}
}

// TestCommandWordsFirst: the real 3.8.5 decides by the first word, so
// "-h 1 client status" is help (cobra alone would find "client" past "-h 1",
// as our tool did before pinCommandWords).
func TestCommandWordsFirst(t *testing.T) {
	t.Setenv("SANLOCK_RUN_DIR", "/nonexistent/run")
	for _, c := range []struct {
		args []string
		out  string
		rc   int
	}{
		{[]string{"-h", "1", "client", "status"}, usageText, 0},
		{[]string{"-x", "client", "status"}, "client action \"-x\" is unknown\n", 1},
		{[]string{"client", "-x", "-y", "status"}, "client action \"-x\" is unknown\n", 1},
		{[]string{"direct", "-o", "1", "init"}, "direct action \"-o\" is unknown\n", 1},
		{[]string{"--", "status"}, "client action \"--\" is unknown\n", 1},
	} {
		out, rc := runMain(t, c.args...)
		assert.Equal(t, c.out, out, "%q", c.args)
		assert.Equal(t, c.rc, rc, "%q", c.args)
	}
}
