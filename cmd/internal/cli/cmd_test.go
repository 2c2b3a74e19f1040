package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewCmdClientAction checks what the scanning of one action's
// arguments puts into its options (parsing alone: runF receives them, no
// daemon is asked).
func TestNewCmdClientAction(t *testing.T) {
	for _, c := range []struct {
		name   string
		action string
		args   []string
		check  func(t *testing.T, o *ClientOptions)
		out    string // what scanning printed
		status int    // 0: runF was called
	}{
		{name: "acquire", action: "acquire", args: []string{"-r", "LS:R:/p:1048576", "-p", "12", "--wait", "2s"},
			check: func(t *testing.T, o *ClientOptions) {
				assert.Equal(t, "acquire", o.Action)
				assert.Equal(t, 12, o.opts.pid)
				require.Len(t, o.opts.resources, 1)
				assert.Equal(t, "R", o.opts.resources[0].Name)
				assert.Equal(t, uint64(1048576), o.opts.resources[0].Disks[0].Offset)
				assert.Equal(t, 2*time.Second, o.opts.acquireWait)
			}},
		{name: "gets -h is hosts", action: "gets", args: []string{"-h", "1"},
			check: func(t *testing.T, o *ClientOptions) { assert.Equal(t, 1, o.opts.getHosts) }},
		{name: "status -o is sort", action: "status", args: []string{"-o", "s", "--json"},
			check: func(t *testing.T, o *ClientOptions) {
				assert.Equal(t, byte('s'), o.opts.sortArg)
				assert.True(t, o.opts.json)
			}},
		{name: "command -c ends the scan", action: "command", args: []string{"-r", "LS:R:/p:0", "-c", "/bin/echo", "-p", "x"},
			check: func(t *testing.T, o *ClientOptions) {
				assert.Equal(t, "/bin/echo", o.opts.command)
				assert.Equal(t, []string{"-p", "x"}, o.opts.commandArgs)
				assert.Equal(t, -1, o.opts.pid)
			}},
		{name: "glued value", action: "status", args: []string{"-Dx"},
			out: "unknown option -Dx\nspace required before option value\n", status: 1},
		{name: "--wait only for acquire", action: "release", args: []string{"--wait", "1s"},
			out: "unknown option --wait\nspace required before option value\n", status: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			f := testFactory(&out, &errb)
			a, ok := clientActionNamed(c.action)
			require.True(t, ok)
			var got *ClientOptions
			cmd := NewCmdClientAction(f, a, func(o *ClientOptions) error { got = o; return nil })
			cmd.SetArgs(c.args)
			err := cmd.Execute()
			f.Out.Flush()
			assert.Equal(t, c.out, out.String())
			if c.status != 0 {
				assert.Equal(t, exitError(c.status), err)
				assert.Nil(t, got, "runF called after an option error")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, got)
			c.check(t, got)
		})
	}
}

// TestNewCmdDirectAction: the path argument of dump and the size options.
func TestNewCmdDirectAction(t *testing.T) {
	var out, errb bytes.Buffer
	f := testFactory(&out, &errb)
	a, ok := directActionNamed("dump")
	require.True(t, ok)
	var got *DirectOptions
	cmd := NewCmdDirectAction(f, a, func(o *DirectOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"/dev/x:1M", "-Z", "4096", "-A", "8M"})
	require.NoError(t, cmd.Execute())
	require.NotNil(t, got)
	assert.Equal(t, "dump", got.Action)
	assert.Equal(t, "/dev/x:1M", got.opts.pathArg)
	assert.Equal(t, 4096, got.opts.sector)
	assert.Empty(t, out.String())
}

// TestNewCmdDaemon: the daemon options reach the daemon settings.
func TestNewCmdDaemon(t *testing.T) {
	var out, errb bytes.Buffer
	f := testFactory(&out, &errb)
	var got *DaemonOptions
	cmd := NewCmdDaemon(f, func(o *DaemonOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"-D", "-w", "0", "-e", "host1"})
	require.NoError(t, cmd.Execute())
	require.NotNil(t, got)
	assert.True(t, got.Config.Debug)
	assert.Equal(t, "host1", got.Config.OurHostName)
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
