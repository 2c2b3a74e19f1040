package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// lastError asks td's daemon for this process's last failure.
func (td *testDaemon) lastError() client.LastError {
	td.t.Helper()
	le, err := td.cl.LastError(context.Background())
	require.NoError(td.t, err)
	return le
}

// TestLastErrorAddLockspace: a failed add_lockspace leaves its cause for
// the process that asked: the open's path and errno for a missing disk,
// the lockspace already joined; before any failure there is nothing to
// tell.
func TestLastErrorAddLockspace(t *testing.T) {
	t.Parallel()
	rc := newResCluster(t, 1, 1, manager.Setup{})
	td := rc.tds[0]
	_, err := td.cl.LastError(context.Background())
	assert.ErrorIs(t, err, client.ErrNoLastError)

	missing := filepath.Join(td.dir, "nope")
	err = td.cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "X", HostID: 1, Disk: wire.Disk{Path: missing}}, 0, 1)
	require.Equal(t, rescode.RvENODEV, rescode.ErrorCode(err))
	le := td.lastError()
	assert.Equal(t, wire.CmdAddLockspace, le.Cmd)
	assert.Equal(t, rescode.RvENODEV, le.Code)
	assert.Equal(t, "open "+missing+": no such file or directory", le.Cause)
	assert.Less(t, le.Age, time.Minute)
	assert.Equal(t, le.Cause, td.cl.Cause(context.Background(), wire.CmdAddLockspace, rescode.RvENODEV))
	assert.Empty(t, td.cl.Cause(context.Background(), wire.CmdAddLockspace, rescode.RvEINVAL), "another code")
	assert.Empty(t, td.cl.Cause(context.Background(), wire.CmdAcquire, rescode.RvENODEV), "another command")

	// The disk is there, but not the lockspace asked for.
	other := startDaemon(t, nil)
	for _, k := range []struct {
		name   string
		offset uint64
		code   int
		cause  string
	}{
		{"LS", 1000, rescode.RvEINVAL, "offset 1000 is not a multiple of the 512-byte sector of " + rc.path},
		{"XX", 0, int(rescode.ErrLeaderLockspace), "the lease at " + rc.path + ":0 belongs to lockspace LS, not XX"},
		{"LS", 1 << 20, int(rescode.ErrLeaderMagic), "no lockspace at " + rc.path + ":1048576: the delta lease of host_id 1 is not initialised"},
	} {
		ls := &wire.Lockspace{Name: k.name, HostID: 1, Disk: wire.Disk{Path: rc.path, Offset: k.offset}}
		err = other.cl.AddLockspace(context.Background(), ls, 0, 1)
		require.Equal(t, k.code, rescode.ErrorCode(err), k.cause)
		assert.Equal(t, k.cause, other.lastError().Cause)
	}

	err = td.cl.AddLockspace(context.Background(), rc.ls[0], 0, 1)
	require.Equal(t, rescode.RvEEXIST, rescode.ErrorCode(err))
	assert.Equal(t, "lockspace LS is already joined", td.lastError().Cause)

	err = td.cl.RemLockspace(context.Background(), &wire.Lockspace{Name: "NOPE", HostID: 1, Disk: wire.Disk{Path: missing}}, 0)
	require.Equal(t, rescode.RvENOENT, rescode.ErrorCode(err))
	assert.Equal(t, "lockspace NOPE is not joined", td.lastError().Cause)
	_, err = td.cl.HostStatus(context.Background(), "NOPE")
	require.Equal(t, rescode.RvENOSPC, rescode.ErrorCode(err))
	le = td.lastError()
	assert.Equal(t, wire.CmdHostStatus, le.Cmd)
	assert.Equal(t, "no lockspace NOPE", le.Cause)

	// A success leaves the last failure as it was (as errno does): the
	// caller compares Cmd and Code with the failure it saw.
	require.NoError(t, td.cl.Hello(context.Background(), time.Second))
	_, err = td.cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rescode.RvENOSPC, td.lastError().Code)
}

// TestLastErrorAcquire: the causes of failed acquires: a lease held by
// another process of this host (its pid), a lockspace not joined, a
// lease held by another host (its host_id, name and the age of its last
// renewal), an offset off the sector grid, an unregistered connection;
// and of a release of a lease the process does not hold.
func TestLastErrorAcquire(t *testing.T) {
	t.Parallel()
	rc := newResCluster(t, 2, 1, manager.Setup{})
	ctx := context.Background()
	h1, err := rc.tds[0].cl.Register(ctx)
	require.NoError(t, err)
	defer h1.Close()
	require.NoError(t, h1.Acquire(ctx, []wire.Resource{rc.res(0, 0)}, 0, nil))

	// Another process of host 1 (here, another registered connection).
	h1b, err := rc.tds[0].cl.Register(ctx)
	require.NoError(t, err)
	defer h1b.Close()
	err = h1b.Acquire(ctx, []wire.Resource{rc.res(0, 0)}, 0, nil)
	require.Error(t, err)
	le := rc.tds[0].lastError()
	assert.Equal(t, rescode.ErrorCode(err), le.Code)
	assert.Equal(t, fmt.Sprintf("resource LS:R0 is held on this host by pid %d", os.Getpid()), le.Cause)

	td := rc.tds[1]
	h2, err := td.cl.Register(ctx)
	require.NoError(t, err)
	defer h2.Close()

	notj := rc.res(0, 0)
	notj.LockspaceName = "NOTJ"
	err = h2.Acquire(ctx, []wire.Resource{notj}, 0, nil)
	require.Equal(t, rescode.RvENOSPC, rescode.ErrorCode(err))
	le = td.lastError()
	assert.Equal(t, wire.CmdAcquire, le.Cmd)
	assert.Equal(t, rescode.RvENOSPC, le.Code)
	assert.Equal(t, "lockspace NOTJ is not joined", le.Cause)

	err = h2.Acquire(ctx, []wire.Resource{rc.res(0, 0)}, 0, nil)
	require.Error(t, err)
	le = td.lastError()
	assert.Equal(t, rescode.ErrorCode(err), le.Code)
	assert.Regexp(t, `^held by host_id 1 \(host1\) generation \d+, its host_id lease renewed \d+ s ago$`, le.Cause)

	odd := rc.res(0, 0)
	odd.Disks[0].Offset = 1000
	err = h2.Acquire(ctx, []wire.Resource{odd}, 0, nil)
	require.Equal(t, rescode.RvEINVAL, rescode.ErrorCode(err))
	assert.Contains(t, td.lastError().Cause, "offset 1000 is not a multiple of the 512-byte sector")

	_, err = h2.Release(ctx, []wire.Resource{rc.res(0, 0)}, 0)
	require.Equal(t, rescode.RvEPERM, rescode.ErrorCode(err))
	le = td.lastError()
	assert.Equal(t, wire.CmdRelease, le.Cmd)
	assert.Equal(t, "the process does not hold resource LS:R0", le.Cause)

	// ACQUIRE naming this connection without a REGISTER on it.
	q := wire.NewRequest(wire.CmdAcquire, 0, 1, selfPid)
	q.Resources = []wire.Resource{rc.res(0, 0)}
	p, err := td.cl.Do(ctx, q)
	require.NoError(t, err)
	require.Equal(t, int32(rescode.RvEBUSY), p.Header.Result())
	assert.Equal(t, "the asking process has not registered on this connection", td.lastError().Cause)
}

// TestLastErrorHostIDInUse: add_lockspace of a host_id a live host holds
// fails with the owner's host name and generation and how recently it
// renewed.
func TestLastErrorHostIDInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("a join waits out the owner's renewals")
	}
	t.Parallel()
	rc := newResCluster(t, 1, 0, manager.Setup{}, func(c *Config) { c.WatchdogFireTimeout = 1 })
	td := startDaemon(t, func(c *Config, _ *Deps) { c.OurHostName = "host9"; c.WatchdogFireTimeout = 1 })
	td.cl.Timeout = time.Minute
	err := td.cl.AddLockspace(context.Background(), rc.ls[0], 0, 1)
	require.Equal(t, int(rescode.ErrHostIDBusy), rescode.ErrorCode(err))
	le := td.lastError()
	assert.Equal(t, wire.CmdAddLockspace, le.Cmd)
	assert.Regexp(t, `^host_id 1 is in use by host1 \(generation \d+\), renewed less than \d+ s ago$`, le.Cause)
}

// TestLastErrorOnlyItsProcess: a failure is told to the process that
// failed only: another pid, the same pid of another uid or of another
// process (a pid reused) get nothing; old failures expire and the table
// stays bounded.
func TestLastErrorOnlyItsProcess(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tb := newFailureTable()
	tb.now = func() time.Time { return now }
	tb.record(100, failure{uid: 5, start: 77, cmd: wire.CmdAcquire, code: -28, cause: "lockspace X is not joined"})
	f, age, ok := tb.lookup(100, 5, 77)
	require.True(t, ok)
	assert.Equal(t, "lockspace X is not joined", f.cause)
	assert.Zero(t, age)
	for _, k := range []struct {
		pid, uid int
		start    uint64
	}{{101, 5, 77}, {100, 6, 77}, {100, 5, 78}, {0, 5, 77}, {-1, 5, 77}} {
		_, _, ok := tb.lookup(k.pid, k.uid, k.start)
		assert.False(t, ok, "%+v", k)
	}
	now = now.Add(failureTTL + time.Second)
	_, _, ok = tb.lookup(100, 5, 77)
	assert.False(t, ok, "expired")

	for pid := 1; pid <= maxFailures+50; pid++ {
		now = now.Add(time.Millisecond)
		tb.record(pid, failure{cmd: wire.CmdAcquire, code: -1, cause: strings.Repeat("x", 2*maxCauseLen)})
	}
	assert.Equal(t, maxFailures, tb.len())
	_, _, ok = tb.lookup(1, 0, 0)
	assert.False(t, ok, "the oldest went")
	f, _, ok = tb.lookup(maxFailures+50, 0, 0)
	require.True(t, ok)
	assert.Len(t, f.cause, maxCauseLen)
}

// TestLastErrorOverTheWire: the daemon answers LAST_ERROR with the
// failure of the pid on the other end of the connection only (here,
// in-memory connections that name their pid).
func TestLastErrorOverTheWire(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	td.srv.fails.record(os.Getpid()+1, failure{uid: os.Getuid(), cmd: wire.CmdAcquire, code: -28, cause: "not mine"})
	_, err := td.cl.LastError(context.Background())
	assert.ErrorIs(t, err, client.ErrNoLastError, "another pid's failure")

	td.srv.fails.record(os.Getpid(), failure{uid: os.Getuid(), start: procStart(os.Getpid()), cmd: wire.CmdAcquire,
		code: -28, cause: "mine"})
	le := td.lastError()
	assert.Equal(t, client.LastError{Cmd: wire.CmdAcquire, Code: -28, Cause: "mine", Age: le.Age}, le)
}

// TestProcStart reads this process's start time and refuses what is not
// a process.
func TestProcStart(t *testing.T) {
	t.Parallel()
	assert.NotZero(t, procStart(os.Getpid()))
	assert.Equal(t, procStart(os.Getpid()), procStart(os.Getpid()))
	assert.Zero(t, procStart(0))
	assert.Zero(t, procStart(1<<30))
}

// TestLastErrorNotGosanlock: LastError gives ErrNotGosanlock, within its
// wait, when the daemon does not answer private commands.
func TestLastErrorNotGosanlock(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	td.srv.Handle(wire.CmdLastError, ClassKeep, func(context.Context, *Conn, *wire.Request) error { return nil })
	start := time.Now()
	_, err := td.cl.LastError(context.Background())
	assert.True(t, errors.Is(err, client.ErrNotGosanlock), "%v", err)
	assert.Less(t, time.Since(start), client.LastErrorWait+2*time.Second)
}
