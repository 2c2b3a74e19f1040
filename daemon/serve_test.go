package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// pipeListener is an in-memory listener for Serve: dial hands it one end
// of a net.Pipe that claims the given peer pid.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type pidConn struct {
	net.Conn
	pid int
}

func (c pidConn) PeerPid() int { return c.pid }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(pid int) net.Conn {
	a, b := net.Pipe()
	l.conns <- pidConn{b, pid}
	return a
}

// call sends q on c and returns the reply header and payload.
func call(t *testing.T, c net.Conn, q *wire.Request) (wire.Header, []byte) {
	t.Helper()
	b, err := q.MarshalBinary()
	require.NoError(t, err)
	_, err = c.Write(b)
	require.NoError(t, err)
	hb := make([]byte, wire.HeaderSize)
	_, err = io.ReadFull(c, hb)
	require.NoError(t, err)
	var h wire.Header
	require.NoError(t, h.Decode(hb))
	body := make([]byte, int(h.Length)-wire.HeaderSize)
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	return h, body
}

// nopClose keeps a shared in-memory disk open when the manager closes it.
type nopClose struct{ *testdisk.Mem }

func (nopClose) Close() error { return nil }

// serveInMemory starts a daemon with a lease manager built on mg on an
// in-memory listener, inside a synctest bubble; it stops with the test.
func serveInMemory(t *testing.T, mg manager.Setup, host string) (*pipeListener, *observer.ObservedLogs) {
	t.Helper()
	cfg := testutil.DaemonConfig(t.TempDir())
	cfg.OurHostName = host
	core, logs := observer.New(zapcore.DebugLevel)
	s := New(cfg, Deps{Manager: mg, LogCore: core, Stderr: io.Discard})
	ln := newPipeListener()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		assert.True(t, errors.Is(<-served, ErrServerClosed))
	})
	return ln, logs
}

// TestServeInMemory runs the whole daemon over in-memory connections in
// simulated time: join a lockspace on an in-memory disk, acquire, inquire
// and release a lease for a registered client, leave the lockspace. No
// socket, no real disk, no wall-clock wait (testing/synctest).
func TestServeInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disk := testdisk.NewMem(4<<20, 512)
		ctx := context.Background()
		require.NoError(t, diskfmt.WriteLockspace(ctx, disk, 0, 0, "LS", 1, 0))
		g, err := diskfmt.GeometryForWrite(0, 512)
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: disk, Offset: 1 << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: "R1"}))
		open := func(string) (diskfmt.Device, error) { return nopClose{disk}, nil }
		mg := manager.Setup{Open: open}

		// The lease "paths" must exist: a release checks that its disk is
		// still there (as 3.8.5's reopen does).
		path := filepath.Join(t.TempDir(), "disk")
		require.NoError(t, os.WriteFile(path, nil, 0o644))
		ln, logs := serveInMemory(t, mg, "hostA")

		c := ln.dial(4242)
		defer c.Close()
		h, _ := call(t, c, client.NewRequest(wire.CmdVersion, 0, 0, 0))
		assert.Equal(t, wire.DaemonVersion, h.Data2)

		ls := wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
		q := client.NewRequest(wire.CmdAddLockspace, 0, 1, 0)
		q.Lockspace = &ls
		h, _ = call(t, ln.dial(0), q)
		require.Equal(t, int32(0), h.Result(), "add_lockspace")

		reg := ln.dial(4242)
		defer reg.Close()
		b, err := client.NewRequest(wire.CmdRegister, 0, 0, 0).MarshalBinary()
		require.NoError(t, err)
		_, err = reg.Write(b)
		require.NoError(t, err)
		res := wire.Resource{LockspaceName: "LS", Name: "R1", Disks: []wire.Disk{{Path: path, Offset: 1 << 20}}}
		q = client.NewRequest(wire.CmdAcquire, 0, 0, 0xffffffff)
		q.Resources = []wire.Resource{res}
		h, _ = call(t, reg, q)
		require.Equal(t, int32(0), h.Result(), "acquire")
		assert.NotEmpty(t, logs.FilterMessageSnippet("cmd_register").All())

		h, body := call(t, reg, client.NewRequest(wire.CmdInquire, 0, 0, 0xffffffff))
		require.Equal(t, int32(0), h.Result(), "inquire")
		assert.Equal(t, uint32(1), h.Data2)
		assert.Contains(t, string(body), "LS:R1:"+path+":1048576")

		q = client.NewRequest(wire.CmdRelease, 0, 0, 0xffffffff)
		q.Resources = []wire.Resource{res}
		h, _ = call(t, reg, q)
		require.Equal(t, int32(0), h.Result(), "release")

		q = client.NewRequest(wire.CmdRemLockspace, 0, 0, 0)
		q.Lockspace = &ls
		h, _ = call(t, ln.dial(0), q)
		require.Equal(t, int32(0), h.Result(), "rem_lockspace")

	})
}

// A lockspace on a hung disk must not delay the other lockspaces or the
// socket; its add fails with -202 after its io_timeout (3 s, simulated).
func TestHungLockspaceIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disk := testdisk.NewMem(1<<20, 512)
		require.NoError(t, diskfmt.WriteLockspace(context.Background(), disk, 0, 0, "LS", 1, 0))
		open := func(p string) (diskfmt.Device, error) {
			if strings.HasSuffix(p, "/hung") {
				return hangDev{}, nil
			}
			return nopClose{disk}, nil
		}
		ln, _ := serveInMemory(t, manager.Setup{Open: open}, "hostA")
		lsReq := func(cmd wire.Cmd, flags, data uint32, ls wire.Lockspace) *wire.Request {
			q := client.NewRequest(cmd, flags, data, 0)
			q.Lockspace = &ls
			return q
		}

		hung := wire.Lockspace{Name: "HUNG", HostID: 1, Disk: wire.Disk{Path: "/var/tmp/hung"}}
		errc := make(chan int32, 1)
		start := time.Now()
		go func() {
			h, _ := call(t, ln.dial(0), lsReq(wire.CmdAddLockspace, 0, 3, hung))
			errc <- h.Result()
		}()
		synctest.Wait()
		h, _ := call(t, ln.dial(0), lsReq(wire.CmdInqLockspace, 0, 0, hung))
		require.Equal(t, int32(rescode.RvEINPROGRESS), h.Result())

		ls := wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: "/good"}}
		h, _ = call(t, ln.dial(0), lsReq(wire.CmdAddLockspace, wire.AddAsync, 1, ls))
		require.Equal(t, int32(0), h.Result())
		h, _ = call(t, ln.dial(0), client.NewRequest(wire.CmdGetLockspaces, 0, 0, 0))
		assert.Equal(t, uint32(2), h.Data2, "get_lockspaces lists both")
		st := ln.dial(0)
		h, _ = call(t, st, client.NewRequest(wire.CmdStatus, 0, 0, 0))
		assert.Equal(t, int32(0), h.Result())
		recs, err := io.ReadAll(st)
		require.NoError(t, err)
		assert.NotEmpty(t, recs, "status answers while the add hangs")

		assert.Equal(t, int32(client.SanlkAIOTimeout), <-errc, "the hung add times out after its io_timeout")
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "simulated time (synctest): not before its io_timeout")
		h, _ = call(t, ln.dial(0), lsReq(wire.CmdInqLockspace, wire.InqWait, 0, ls))
		require.Equal(t, int32(0), h.Result())
		h, _ = call(t, ln.dial(0), lsReq(wire.CmdRemLockspace, 0, 0, ls))
		require.Equal(t, int32(0), h.Result())
	})
}

// register opens a connection for pid and registers it.
func register(t *testing.T, ln *pipeListener, pid int) net.Conn {
	t.Helper()
	c := ln.dial(pid)
	t.Cleanup(func() { c.Close() })
	b, err := client.NewRequest(wire.CmdRegister, 0, 0, 0).MarshalBinary()
	require.NoError(t, err)
	_, err = c.Write(b)
	require.NoError(t, err)
	return c
}

// TestResourceSlowDiskIsolated: while the disk of one resource hangs, an
// acquire of a resource on another disk completes at once; the hung one
// fails with -202 after io_timeout (simulated time).
func TestResourceSlowDiskIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disk := testdisk.NewMem(2<<20, 512)
		ctx := context.Background()
		require.NoError(t, diskfmt.WriteLockspace(ctx, disk, 0, 0, "LS", 1, 0))
		g, err := diskfmt.GeometryForWrite(0, 512)
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: disk, Offset: 1 << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: "R0"}))
		good := filepath.Join(t.TempDir(), "good") // exists: a release checks its disk
		require.NoError(t, os.WriteFile(good, nil, 0o644))
		slow := filepath.Join(t.TempDir(), "slow")
		open := func(p string) (diskfmt.Device, error) {
			if p == slow {
				return hangDev{}, nil
			}
			return nopClose{disk}, nil
		}
		mg := manager.Setup{Open: open}
		ln, _ := serveInMemory(t, mg, "host1")
		q := client.NewRequest(wire.CmdAddLockspace, 0, 1, 0)
		q.Lockspace = &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: good}}
		h, _ := call(t, ln.dial(0), q)
		require.Equal(t, int32(0), h.Result())
		acquire := func(c net.Conn, name, path string) int32 {
			q := client.NewRequest(wire.CmdAcquire, 0, 0, 0xffffffff)
			q.Resources = []wire.Resource{{LockspaceName: "LS", Name: name, Disks: []wire.Disk{{Path: path, Offset: 1 << 20}}}}
			h, _ := call(t, c, q)
			return h.Result()
		}

		hung := make(chan int32, 1)
		slowReg := register(t, ln, 1001)
		go func() { hung <- acquire(slowReg, "SLOW", slow) }()
		synctest.Wait() // the slow acquire is on its disk
		reg := register(t, ln, 1002)
		start := time.Now()
		require.Equal(t, int32(0), acquire(reg, "R0", good))
		q = client.NewRequest(wire.CmdRelease, 0, 0, 0xffffffff)
		q.Resources = []wire.Resource{{LockspaceName: "LS", Name: "R0", Disks: []wire.Disk{{Path: good, Offset: 1 << 20}}}}
		h, _ = call(t, reg, q)
		require.Equal(t, int32(0), h.Result())
		assert.Less(t, time.Since(start), 900*time.Millisecond, "simulated time (synctest): other disk not delayed by the hung one")
		assert.Equal(t, int32(rescode.ErrAIOTimeout), <-hung)
	})
}
