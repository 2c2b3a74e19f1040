package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// startLS starts an in-process daemon with the real lockspace manager.
func startLS(t *testing.T, host string, st manager.Setup) (*testDaemon, *manager.Lockspaces) {
	t.Helper()
	td := startDaemon(t, func(c *Config, d *Deps) {
		c.OurHostName = host
		d.Manager = st
	})
	td.cl.Timeout = 30 * time.Second
	return td, td.srv.Manager().Lockspaces
}

func TestAddLockspaceErrors(t *testing.T) {
	t.Parallel()
	td, _ := startLS(t, "hostA", manager.Setup{})
	cl := td.cl
	zero := testutil.LeaseFile(t, 1<<20)
	good := testutil.LeaseFile(t, 1<<20)
	require.NoError(t, cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: good}}, 0, 1))
	for _, tc := range []struct {
		name string
		ls   wire.Lockspace
		want int
	}{
		{"empty name", wire.Lockspace{HostID: 1, Disk: wire.Disk{Path: good}}, rescode.RvEINVAL},
		{"host_id 0", wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: good}}, rescode.RvEINVAL},
		{"no path", wire.Lockspace{Name: "LS", HostID: 1}, rescode.RvEINVAL},
		{"missing file", wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: good + ".none"}}, rescode.RvENODEV},
		{"no lease", wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: zero}}, client.SanlkLeaderMagic},
		{"host_id too big", wire.Lockspace{Name: "LS", HostID: 2001, Disk: wire.Disk{Path: good}}, client.SanlkAddLSInvalidHostID},
		{"wrong name", wire.Lockspace{Name: "LX", HostID: 1, Disk: wire.Disk{Path: good}}, client.SanlkLeaderLockspace},
	} {
		assert.Equal(t, tc.want, testutil.Code(cl.AddLockspace(context.Background(), &tc.ls, 0, 1)), tc.name)
	}
	assert.Equal(t, 0, td.srv.Manager().Lockspaces.Count())
	_, _, err := cl.ReadLockspace(context.Background(), &wire.Lockspace{Disk: wire.Disk{Path: zero}})
	t.Logf("read_lockspace of a zero file: %d", testutil.Code(err))
	assert.Equal(t, rescode.RvENODEV, testutil.Code(cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS"}, 0, 1)))
}

// hangDev is a device whose I/O blocks until the context ends.
type hangDev struct{ diskfmt.Device }

func (hangDev) ReadAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return fmt.Errorf("hang: %w", rescode.ErrIOTimeout)
}
func (hangDev) WriteAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return fmt.Errorf("hang: %w", rescode.ErrIOTimeout)
}
func (hangDev) SectorSize() int { return 512 }
func (hangDev) Close() error    { return nil }

// An add_lockspace or a write_lockspace that passes io_timeout 0 uses the
// daemon's io_timeout (-o, io_timeout), as 3.9.5 and 5.1.1 do (measured:
// a 3.9.5 daemon started with -o 3 joined such a request at 3 and wrote 3
// into its delta lease; write_lockspace wrote 3, 5.1.1's with -o 4 wrote 4).
func TestAddLockspaceDaemonIOTimeout(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, func(c *Config, d *Deps) {
		c.OurHostName = "hostIO"
		c.IOTimeout = 1
	})
	td.cl.Timeout = 30 * time.Second
	path := testutil.LeaseFile(t, 1<<20)
	ls := wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	// WRITE_LOCKSPACE with 0 writes it too (measured on 3.9.5 and 5.1.1).
	require.NoError(t, td.cl.WriteLockspace(context.Background(), &ls, 0, 0))
	_, io, err := td.cl.ReadLockspace(context.Background(), &ls)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), io, "io_timeout written by write_lockspace 0")
	require.NoError(t, td.cl.AddLockspace(context.Background(), &ls, 0, 0))
	recs, err := td.cl.Status(context.Background(), 0)
	require.NoError(t, err)
	var text string
	for _, r := range recs {
		if r.Type == wire.StateLockspace {
			text = r.Text
		}
	}
	assert.Contains(t, text, " io_timeout=1 ")
	hs, err := td.cl.HostStatus(context.Background(), "LS")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	assert.Contains(t, hs[0].Text, " io_timeout=1 ", "the io_timeout written into our delta lease")
	require.NoError(t, td.cl.RemLockspace(context.Background(), &ls, 0))
}
