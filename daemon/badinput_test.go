package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// expectClosed sends b and requires that the daemon closes the connection
// without writing anything.
func expectClosed(t *testing.T, td *testDaemon, name string, b []byte) {
	t.Helper()
	c := td.dial()
	_, err := c.Write(b)
	require.NoError(t, err, name)
	got := testutil.ReadAllTimeout(t, c, 5*time.Second)
	assert.Empty(t, got, "%s: daemon must not answer", name)
}

func TestBadHeadersCloseConnection(t *testing.T) {
	td := startDaemon(t, nil)
	// A registered connection elsewhere must survive all of this.
	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()

	m := wire.Magic
	cases := []struct {
		name string
		b    []byte
	}{
		{"bad magic", testutil.RawHeader(0x12345678, 1, wire.CmdVersion, 0, 32, 0, 0, 0)},
		{"zero header", make([]byte, 32)},
		{"proto major 2 status", testutil.RawHeader(m, 0x00020000, wire.CmdStatus, 0, 32, 0, 0, 0)},
		{"length 2^32-1", testutil.RawHeader(m, 1, wire.CmdVersion, 0, 0xffffffff, 0, 0, 0)},
		{"length 2^32-32", testutil.RawHeader(m, 1, wire.CmdAddLockspace, 0, 0xffffffe0, 0, 0, 0)},
		{"length 2^31", testutil.RawHeader(m, 1, wire.CmdSetLVB, 0, 1<<31, 0, 0, 0)},
		{"length over max", testutil.RawHeader(m, 1, wire.CmdAcquire, 0, 32+wire.DefaultMaxPayload+1, 0, 1, 0xffffffff)},
		{"set_lvb length near 2^32", append(testutil.RawHeader(m, 1, wire.CmdSetLVB, 0, 0xfffffff0, 0, 0, 0), make([]byte, 128)...)},
		{"truncated lockspace", append(testutil.RawHeader(m, 1, wire.CmdAddLockspace, 0, 32+1104, 0, 0, 0), make([]byte, 100)...)},
		{"truncated host_status", append(testutil.RawHeader(m, 1, wire.CmdHostStatus, 0, 32, 0, 0, 0), make([]byte, 1103)...)},
		{"truncated disk", append(testutil.RawHeader(m, 1, wire.CmdAlign, 0, 32+1040, 0, 0, 0), make([]byte, 1039)...)},
		{"half header", testutil.RawHeader(m, 1, wire.CmdVersion, 0, 32, 0, 0, 0)[:17]},
	}
	for _, tc := range cases {
		c := td.dial()
		_, err := c.Write(tc.b)
		require.NoError(t, err, tc.name)
		require.NoError(t, c.CloseWrite(), tc.name)
		got := testutil.ReadAllTimeout(t, c, 5*time.Second)
		assert.Empty(t, got, "%s: daemon must not answer", tc.name)
		td.mustVersion()
	}
	// Without a half-close: the daemon closes on its own for everything it
	// can judge from the header.
	for _, tc := range cases[:8] {
		expectClosed(t, td, tc.name, tc.b)
	}
	// The registered connection was never disturbed.
	require.NoError(t, reg.Restrict(context.Background(), 0))
	select {
	case ci := <-td.deaths:
		t.Fatalf("unexpected client death %+v", ci)
	default:
	}
}

func TestPayloadResultErrors(t *testing.T) {
	td := startDaemon(t, nil)
	m := wire.Magic
	// As sanlock 3.8.5 (measured): ACQUIRE resolves its target first, so
	// an unregistered self gets -EBUSY and an unknown pid -ESRCH, whatever
	// the payload.
	u := td.dial()
	_, err := u.Write(testutil.RawHeader(m, 1, wire.CmdAcquire, 0, 32+56, 5, 0xffffffff, 0xffffffff))
	require.NoError(t, err)
	p, err := wire.ReadReply(u, wire.CmdAcquire)
	require.NoError(t, err)
	assert.Equal(t, int32(rescode.RvEBUSY), p.Result())
	_, err = u.Write(testutil.RawHeader(m, 1, wire.CmdAcquire, 0, 32+56, 5, 9, 999999))
	require.NoError(t, err)
	p, err = wire.ReadReply(u, wire.CmdAcquire)
	require.NoError(t, err)
	assert.Equal(t, int32(rescode.RvESRCH), p.Result())

	c := td.dial()
	_, err = c.Write(testutil.RawHeader(m, 1, wire.CmdRegister, 0, 32, 0, 0, 0))
	require.NoError(t, err)
	// ACQUIRE with 2^32-1 resources from a registered client: answered
	// with -E2BIG like sanlock, nothing allocated, connection kept.
	_, err = c.Write(testutil.RawHeader(m, 1, wire.CmdAcquire, 0, 32+56, 5, 0xffffffff, 0xffffffff))
	require.NoError(t, err)
	p, err = wire.ReadReply(c, wire.CmdAcquire)
	require.NoError(t, err)
	assert.Equal(t, int32(rescode.RvE2BIG), p.Result())
	assert.Equal(t, uint32(5), p.Header.Seq)

	// READ_RESOURCE with num_disks 0: -ERANGE with the resource echoed
	// (160 bytes, as sanlock), so a client reading a resource reply does
	// not wait for bytes that never come.
	r0 := wire.Resource{LockspaceName: "LS", Name: "R1", LVer: 5}
	r0b, err := r0.AppendBinary(nil)
	require.NoError(t, err)
	_, err = c.Write(append(testutil.RawHeader(m, 1, wire.CmdReadResource, 0, uint32(32+len(r0b)), 0, 0, 0), r0b...))
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err = wire.ReadReply(c, wire.CmdReadResource)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Time{})
	assert.Equal(t, int32(rescode.RvERANGE), p.Result())
	assert.Equal(t, uint32(32+wire.ResourceSize), p.Header.Length)
	require.NotNil(t, p.Resource)
	assert.Equal(t, "R1", p.Resource.Name)

	// Resource with num_disks out of range: -ERANGE, the rest drained.
	res := wire.Resource{LockspaceName: "LS", Name: "R", NumDisks: 9}
	rb, err := res.AppendBinary(nil)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(rb[124:], 9)
	msg := append(testutil.RawHeader(m, 1, wire.CmdRequest, 0, uint32(32+len(rb)+200), 0, 0, 0), rb...)
	msg = append(msg, make([]byte, 200)...)
	_, err = c.Write(msg)
	require.NoError(t, err)
	p, err = wire.ReadReply(c, wire.CmdRequest)
	require.NoError(t, err)
	assert.Equal(t, int32(rescode.RvERANGE), p.Result())

	// Same connection still in sync.
	_, err = c.Write(testutil.RawHeader(m, 1, wire.CmdVersion, 0, 32, 0, 0, 0))
	require.NoError(t, err)
	p, err = wire.ReadReply(c, wire.CmdVersion)
	require.NoError(t, err)
	assert.Equal(t, wire.DaemonVersion, p.Header.Data2)
}

func TestStalledPayloadDoesNotBlockOthers(t *testing.T) {
	td := startDaemon(t, nil)
	c := td.dial()
	_, err := c.Write(append(testutil.RawHeader(wire.Magic, 1, wire.CmdAddLockspace, 0, 32+1104, 0, 0, 0), make([]byte, 10)...))
	require.NoError(t, err)
	for range 10 {
		td.mustVersion()
	}
	// Stop still completes with the stalled reader.
	done := make(chan struct{})
	go func() { td.srv.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop blocked on a stalled connection")
	}
}

func TestRestrictAllIgnoresCommands(t *testing.T) {
	td := startDaemon(t, nil)
	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()
	require.NoError(t, reg.Restrict(context.Background(), wire.RestrictAll))
	c := reg.Conn()
	_, err = c.Write(testutil.RawHeader(wire.Magic, 1, wire.CmdVersion, 0, 32, 0, 0, 0))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	var b [1]byte
	_, err = c.Read(b[:])
	var ne net.Error
	require.ErrorAs(t, err, &ne, "no reply expected")
	assert.True(t, ne.Timeout())
}

// TestRandomMessages sends seeded random and mutated messages, each on its
// own connection; every connection must end (answered or closed), no
// handler may panic, and a long-lived registered client keeps working.
func TestRandomMessages(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	// Every disk is one in-memory disk and no signal or kill program
	// leaves the manager: whatever a message asks, no file of this host
	// and no process is touched.
	st, _ := memLockspace(t)
	st.Kill = func(int, syscall.Signal) error { return nil }
	st.RunKillpath = func([]string) error { return nil }
	td := startDaemon(t, func(c *Config, d *Deps) {
		d.Manager = st
		c.LogRingSize = 64 << 10
	})
	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5a17))
	valid := [][]byte{}
	for _, q := range []*wire.Request{
		client.NewRequest(wire.CmdStatus, 0, 0, 0),
		client.NewRequest(wire.CmdVersion, 0, 0, 0),
		client.NewRequest(wire.CmdLogDump, 0, 0, 0),
		client.NewRequest(wire.CmdRegister, 0, 0, 0),
		{Header: wire.NewHeader(wire.CmdInqLockspace, 0, 0, 0), Lockspace: &wire.Lockspace{Name: "LS"}},
		{Header: wire.NewHeader(wire.CmdHostStatus, 0, 0, 0), Lockspace: &wire.Lockspace{Name: "LS"}},
		{Header: wire.NewHeader(wire.CmdAcquire, 0, 1, 0xffffffff),
			Resources: []wire.Resource{{LockspaceName: "LS", Name: "R", Disks: []wire.Disk{{Path: "/x"}}}}},
		{Header: wire.NewHeader(wire.CmdSetLVB, 0, 0, 0),
			Resources: []wire.Resource{{LockspaceName: "LS", Name: "R", NumDisks: 1}}, LVB: []byte("hello")},
	} {
		b, err := q.MarshalBinary()
		require.NoError(t, err)
		valid = append(valid, b)
	}

	for i := range n {
		var msg []byte
		switch rng.IntN(4) {
		case 0: // pure noise
			msg = make([]byte, rng.IntN(300))
			for j := range msg {
				msg[j] = byte(rng.Uint32())
			}
		case 1: // valid header, random fields
			msg = testutil.RawHeader(wire.Magic, rng.Uint32()&0x3, wire.Cmd(rng.IntN(45)), rng.Uint32(),
				randLength(rng), rng.Uint32(), rng.Uint32(), rng.Uint32())
			msg = append(msg, make([]byte, rng.IntN(2400))...)
		default: // a valid message, mutated and/or truncated
			msg = append([]byte(nil), valid[rng.IntN(len(valid))]...)
			for range rng.IntN(4) {
				msg[rng.IntN(len(msg))] = byte(rng.Uint32())
			}
			if rng.IntN(2) == 0 {
				msg = msg[:rng.IntN(len(msg)+1)]
			}
		}
		if len(msg) >= 12 {
			// Never ask for a (forced) exit, a reexec or for disk access.
			switch wire.Cmd(binary.LittleEndian.Uint32(msg[8:])) {
			case wire.CmdShutdown, wire.CmdShutdownWait, wire.CmdAlign, wire.CmdReexec:
				binary.LittleEndian.PutUint32(msg[8:], uint32(wire.CmdVersion))
			}
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: td.srv.SockPath(), Net: "unix"})
		require.NoError(t, err)
		_, _ = c.Write(msg) // the daemon may close first
		_ = c.CloseWrite()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.Copy(io.Discard, c)
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("message %d (seed %d) hung: % x", i, seed, msg)
		}
		if i%1000 == 0 {
			td.mustVersion()
			require.NoError(t, reg.Restrict(context.Background(), 0), "registered client broken after message %d (seed %d)", i, seed)
		}
	}
	td.mustVersion()
	require.NoError(t, reg.Restrict(context.Background(), 0))
	select {
	case <-td.srv.Done():
		t.Fatal("daemon stopped")
	default:
	}
}

func randLength(rng *rand.Rand) uint32 {
	switch rng.IntN(4) {
	case 0:
		return 32
	case 1:
		return 0xffffffff - rng.Uint32N(64)
	case 2:
		return rng.Uint32()
	}
	return 32 + rng.Uint32N(3000)
}

// TestUnknownCommandsAnswered: a command number the daemon does not know,
// under sanlock's magic, is answered -ENOSYS after its announced payload
// is dropped, and the connection serves on; one that announces more than
// the daemon takes is answered, then closed. (Both C daemons leave such a
// client waiting for ever.)
func TestUnknownCommandsAnswered(t *testing.T) {
	td := startDaemon(t, nil)
	m := wire.Magic
	for _, tc := range []struct {
		name    string
		b       []byte
		goesOn  bool
		payload int
	}{
		{"cmd 0", testutil.RawHeader(m, 1, 0, 0, 32, 0, 0, 0), true, 0},
		{"cmd 45", testutil.RawHeader(m, 1, 45, 0, 32, 0, 0, 0), true, 0},
		{"cmd 99 with payload", testutil.RawHeader(m, 1, 99, 0, 32+700, 0, 0, 0), true, 700},
		{"cmd 255 short length", testutil.RawHeader(m, 1, 255, 0, 3, 0, 0, 0), true, 0},
		{"cmd max", testutil.RawHeader(m, 1, 0xffffffff, 0, 32, 0, 0, 0), true, 0},
		{"cmd 46 over max", testutil.RawHeader(m, 1, 46, 0, 32+wire.DefaultMaxPayload+1, 0, 0, 0), false, 0},
	} {
		c := td.dial()
		msg := append(tc.b, bytes.Repeat([]byte{0x10, 0x20, 0x28, 0x04}, tc.payload/4)...)
		_, err := c.Write(msg)
		require.NoError(t, err, tc.name)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		var hb [wire.HeaderSize]byte
		_, err = io.ReadFull(c, hb[:])
		require.NoError(t, err, "%s: an answer", tc.name)
		var h wire.Header
		require.NoError(t, h.Decode(hb[:]))
		assert.EqualValues(t, rescode.RvENOSYS, h.Result(), tc.name)
		assert.Equal(t, binary.LittleEndian.Uint32(tc.b[8:]), uint32(h.Cmd), tc.name)
		if !tc.goesOn {
			require.NoError(t, c.CloseWrite())
			assert.Empty(t, testutil.ReadAllTimeout(t, c, 5*time.Second), tc.name)
			continue
		}
		v, err := wire.NewRequest(wire.CmdVersion, 0, 0, 0).MarshalBinary()
		require.NoError(t, err)
		_, err = c.Write(v)
		require.NoError(t, err)
		p, err := wire.ReadReply(c, wire.CmdVersion)
		require.NoError(t, err, "%s: the connection serves on", tc.name)
		assert.Equal(t, wire.DaemonVersion, p.Header.Data2)
	}
	td.mustVersion()
}
