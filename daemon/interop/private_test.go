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
