package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil/inproc"
)

const mib = 1 << 20

// TestInProcess runs the client API against our daemon inside the test
// process (internal/testutil/inproc): no root and no sanlock binary. The
// same calls against sanlock 3.8.5 are TestAgainstRealDaemon.
func TestInProcess(t *testing.T) {
	d := inproc.StartT(t, 1)
	c := d.Client()
	c.Timeout = 30 * time.Second
	ctx := context.Background()

	v, proto, err := c.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint32(client.DaemonVersion), v)
	assert.Equal(t, uint32(client.ProtoVersion), proto)

	got, iot, err := c.ReadLockspace(ctx, &client.Lockspace{Disk: client.Disk{Path: d.Path}})
	require.NoError(t, err)
	assert.Equal(t, "LS", got.Name)
	assert.Equal(t, uint32(1), iot)
	_, _, err = c.ReadLockspace(ctx, &client.Lockspace{Disk: client.Disk{Path: d.Path, Offset: 1 * mib}})
	assert.Error(t, err, "a resource lease is no lockspace")

	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}
	assert.ErrorIs(t, c.InqLockspace(ctx, ls, 0), client.ErrNotFound)
	require.NoError(t, c.AddLockspace(ctx, ls, 0, 1))
	assert.Equal(t, client.RvEEXIST, client.ErrorCode(c.AddLockspace(ctx, ls, 0, 1)))
	require.NoError(t, c.InqLockspace(ctx, ls, 0))
	lss, err := c.GetLockspaces(ctx)
	require.NoError(t, err)
	require.Len(t, lss, 1)
	assert.Equal(t, "LS", lss[0].Name)

	var hosts []client.Host
	for range 50 { // -EAGAIN until the daemon has host data
		if hosts, err = c.GetHosts(ctx, "LS", 0); client.ErrorCode(err) != client.RvEAGAIN {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	assert.Equal(t, "LIVE", hosts[0].StateName())
	recs, err := c.HostStatus(ctx, "LS")
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	assert.Contains(t, recs[0].Text, "owner_id=1")
	_, err = c.Renewal(ctx, "LS")
	assert.NoError(t, err)

	res := client.Resource{LockspaceName: "LS", Name: "R1", Disks: []client.Disk{{Path: d.Path, Offset: 1 * mib}}}
	rr, err := c.ReadResource(ctx, &client.Resource{Disks: res.Disks})
	require.NoError(t, err)
	assert.Equal(t, "R1", rr.Name)

	reg, err := c.Register(ctx)
	require.NoError(t, err)
	defer reg.Close()
	require.NoError(t, reg.Acquire(ctx, []client.Resource{res}, client.AcquireWithLVB, &client.Options{OwnerName: "gotest"}))
	inq, err := reg.Inquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, inq.Count)
	held, err := inq.Resources()
	require.NoError(t, err)
	require.Len(t, held, 1)
	assert.Equal(t, "R1", held[0].Name)
	assert.NotZero(t, held[0].LVer)
	byPid, err := c.Inquire(ctx, os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, inq, byPid, "INQUIRE by pid on a new connection")

	shr := res
	shr.Flags = client.ResShared
	require.NoError(t, reg.Convert(ctx, &shr, 0))
	inq, err = reg.Inquire(ctx)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(inq.State, ":SH"), inq.State)
	assert.Equal(t, client.RvEALREADY, client.ErrorCode(reg.Convert(ctx, &shr, 0)))
	require.NoError(t, c.Convert(ctx, os.Getpid(), &res, 0))
	inq, err = reg.Inquire(ctx)
	require.NoError(t, err)
	held, err = inq.Resources()
	require.NoError(t, err)
	require.Len(t, held, 1)
	assert.Greater(t, held[0].LVer, uint64(1), "back to exclusive: a new version")

	require.NoError(t, c.SetLVB(ctx, &res, []byte("hello")))
	lvb, err := c.GetLVB(ctx, &res, 5)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(lvb))
	owner, owners, err := c.ReadResourceOwners(ctx, &res)
	require.NoError(t, err)
	assert.Equal(t, held[0].LVer, owner.LVer)
	require.Len(t, owners, 1)
	assert.Equal(t, uint64(1), owners[0].HostID)

	st, err := c.Status(ctx, 0)
	require.NoError(t, err)
	var sawMe bool
	for _, r := range st {
		if r.Type == client.StateClient && int32(r.Data32) == int32(os.Getpid()) && r.Name == "gotest" {
			sawMe = true
		}
	}
	assert.True(t, sawMe, "STATUS lists this process")

	assert.Equal(t, client.RvEBUSY, client.ErrorCode(c.RemLockspace(ctx, ls, client.RemUnusedFlag)))
	n, err := reg.Release(ctx, []client.Resource{res}, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	inq, err = reg.Inquire(ctx)
	require.NoError(t, err)
	assert.Zero(t, inq.Count)
	_, err = reg.Release(ctx, []client.Resource{res}, 0)
	assert.Equal(t, client.RvEPERM, client.ErrorCode(err))
	// A request for the next version, recorded only (nobody holds it).
	require.NoError(t, c.Request(ctx, &res, client.RequestNextLVer, client.ForceNone))
	require.NoError(t, c.ExamineResource(ctx, &res))

	ev, err := c.RegEvent(ctx, "LS")
	require.NoError(t, err)
	_, err = ev.GetEvent()
	assert.Equal(t, client.RvEAGAIN, client.ErrorCode(err))
	require.NoError(t, c.SetEvent(ctx, "LS", client.HostEvent{HostID: 1, Event: 5, Data: 7}, 0))
	require.NoError(t, c.EndEvent(ctx, ev))

	log, err := c.LogDump(ctx)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(log, []byte("add_lockspace")))

	require.NoError(t, c.RemLockspace(ctx, ls, 0))
	assert.ErrorIs(t, c.InqLockspace(ctx, ls, 0), client.ErrNotFound)
	reg.Close()
	require.NoError(t, c.ShutdownWait(ctx, false))
}

// TestInProcessContext: a call whose context has ended returns the
// context's error; a join abandoned that way goes on in the daemon, and
// the caller undoes it.
func TestInProcessContext(t *testing.T) {
	d := inproc.StartT(t, 0)
	c := d.Client()
	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := c.Version(ended)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.Register(ended)
	assert.ErrorIs(t, err, context.Canceled)

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, c.AddLockspace(short, ls, 0, 1), context.DeadlineExceeded, "a join takes seconds")
	ctx := context.Background()
	for {
		err := c.InqLockspace(ctx, ls, client.InqWait)
		if !errors.Is(err, client.ErrInProgress) {
			require.NoError(t, err, "the abandoned join completes")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, c.RemLockspace(ctx, ls, 0))
}

// TestInMemory runs the lease calls over in-memory connections in
// simulated time (testing/synctest): a join that takes a few seconds of
// the daemon's timers takes none, and a context's deadline falls at an
// exact point of the daemon's work.
func TestInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := inproc.StartInMemory(t, 1)
		c := d.Client()
		ctx := context.Background()
		ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}

		// A join outlives a one-second context (it waits 2 x io_timeout
		// and more); the daemon completes it anyway.
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, c.AddLockspace(short, ls, 0, 1), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "simulated time: the call ends with its context")
		require.NoError(t, c.InqLockspace(ctx, ls, client.InqWait))

		reg, err := c.Register(ctx)
		require.NoError(t, err)
		defer reg.Close()
		assert.Nil(t, reg.Conn(), "not a Unix socket")
		res := client.Resource{LockspaceName: "LS", Name: "R1", Disks: []client.Disk{{Path: d.Path, Offset: 1 * mib}}}
		require.NoError(t, reg.Acquire(ctx, []client.Resource{res}, 0, nil))
		inq, err := reg.Inquire(ctx)
		require.NoError(t, err)
		held, err := inq.Resources()
		require.NoError(t, err)
		require.Len(t, held, 1)
		assert.Equal(t, "R1", held[0].Name)

		// A second registered connection of this process finds it held.
		reg2, err := c.Register(ctx)
		require.NoError(t, err)
		defer reg2.Close()
		err = reg2.Acquire(ctx, []client.Resource{res}, client.AcquireNoWait, nil)
		assert.Error(t, err, "held by the first connection")

		n, err := reg.Release(ctx, []client.Resource{res}, 0)
		require.NoError(t, err)
		assert.Zero(t, n)
		require.NoError(t, reg2.Acquire(ctx, []client.Resource{res}, 0, nil), "free once released")
		_, err = reg2.Release(ctx, nil, client.ReleaseAll)
		require.NoError(t, err)

		_, err = c.RegEvent(ctx, "LS")
		assert.Error(t, err, "event listeners need a socket")
		require.NoError(t, c.RemLockspace(ctx, ls, 0))
	})
}
