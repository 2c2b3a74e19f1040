package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
