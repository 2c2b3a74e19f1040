package interop

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// TestPrivateHelloIgnoredBySanlock: sanlock 3.8.5 ignores a private
// command (docs/protocol.md "Private commands"): no answer, nothing of
// what follows consumed (a VERSION sent after it on the same connection
// is answered), the daemon serves on. Our client then reports that the
// daemon is not one of ours, and `sanlock client reexec` says so and sends
// nothing more.
func TestPrivateHelloIgnoredBySanlock(t *testing.T) {
	needRealSanlock(t)
	t.Parallel()
	dir := testutil.ShortTempDir(t)
	realDaemon(t, dir)
	cl, err := client.Dial(dir)
	require.NoError(t, err)
	err = cl.Hello(context.Background(), 2*time.Second)
	assert.True(t, errors.Is(err, client.ErrNotGosanlock), "%v", err)

	conn, err := net.Dial("unix", cl.SockPath)
	require.NoError(t, err)
	defer conn.Close()
	for _, cmd := range []wire.Cmd{wire.CmdHello, wire.CmdReexec} {
		b, err := wire.NewRequest(cmd, 0, 0, 0).MarshalBinary()
		require.NoError(t, err)
		_, err = conn.Write(b)
		require.NoError(t, err)
	}
	v, err := wire.NewRequest(wire.CmdVersion, 0, 0, 0).MarshalBinary()
	require.NoError(t, err)
	_, err = conn.Write(v)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	p, err := wire.ReadReply(conn, wire.CmdVersion)
	require.NoError(t, err, "VERSION after the private headers")
	assert.Equal(t, wire.CmdVersion, p.Header.Cmd)
	assert.Equal(t, uint32(0x03080500), p.Header.Data2)

	out, code := runClient(t, dir, "client", "status")
	assert.Zero(t, code, out)

	cmd := exec.Command(testutil.SanlockBinary(t), "client", "reexec")
	cmd.Env = sanlockEnv(dir)
	got, err := cmd.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(got), "does not answer gosanlock's private commands")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(string(got)), "reexec done -38"), "%s", got)
	out, code = runClient(t, dir, "client", "status")
	assert.Zero(t, code, out)
}

// TestLastErrorIgnoredBySanlock: LAST_ERROR to sanlock 3.8.5 gets no
// answer; our client gives up within its short wait with ErrNotGosanlock
// and the daemon serves on.
func TestLastErrorIgnoredBySanlock(t *testing.T) {
	needRealSanlock(t)
	t.Parallel()
	dir := testutil.ShortTempDir(t)
	realDaemon(t, dir)
	cl, err := client.Dial(dir)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err == nil },
		10*time.Second, 50*time.Millisecond)
	start := time.Now()
	_, err = cl.LastError(context.Background())
	assert.True(t, errors.Is(err, client.ErrNotGosanlock), "%v", err)
	assert.Less(t, time.Since(start), client.LastErrorWait+2*time.Second)
	out, code := runClient(t, dir, "client", "status")
	assert.Zero(t, code, out)
}

// TestCClientFailureCauseStaysPrivate: a failure of the 3.8.5 `sanlock
// client` tool against our daemon prints what 3.8.5's daemon makes it
// print (the cause is kept aside, not put in the reply), and its cause
// is not told to another process.
func TestCClientFailureCauseStaysPrivate(t *testing.T) {
	needRealSanlock(t)
	t.Parallel()
	td, _ := startLS(t, "hostX", manager.Setup{})
	missing := td.dir + "/nope"
	out, code := runClient(t, td.dir, "client", "add_lockspace", "-s", "LS:1:"+missing+":0")
	assert.Equal(t, "add_lockspace done -19\n", out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:])
	assert.NotZero(t, code)
	_, err := td.cl.LastError(context.Background())
	assert.ErrorIs(t, err, client.ErrNoLastError, "another process's failure")
	td.mustVersion()
}
