package proctest

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// TestReexecPendingAddProcess: a reexec while an ADD_LOCKSPACE is in
// progress (io_timeout 3: the join takes several seconds) succeeds; the
// old image cancels the join and hands the request over, the new image
// runs it again on the same connection and the client's add_lockspace
// returns 0, answered by the new image; an inq_lockspace WAIT of another
// client in flight at the same time is handed over too and answers 0. A
// reexec with nothing pending still works afterwards.
func TestReexecPendingAddProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 0)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	cl := *d.cl
	cl.Timeout = 90 * time.Second
	errc := make(chan error, 1)
	go func() { errc <- cl.AddLockspace(context.Background(), ls, 0, 3) }()
	require.Eventually(t, func() bool {
		out, err := d.run("client", "status")
		return err == nil && strings.Contains(out, "s LS:1:")
	}, 10*time.Second, 20*time.Millisecond, "the add is in progress")
	// Another client waits for the add (inq_lockspace WAIT): it must
	// not see the lockspace vanish while the add moves to the new image.
	inqc := make(chan error, 1)
	go func() { inqc <- cl.InqLockspace(context.Background(), ls, wire.InqWait) }()
	inqActive := fmt.Sprintf("cmd_active=%d ", wire.CmdInqLockspace)
	require.Eventually(t, func() bool {
		recs, err := d.cl.Status(context.Background(), wire.StateClient)
		require.NoError(t, err)
		for _, r := range recs {
			if strings.Contains(r.Text, inqActive) {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the inq is in progress")
	old, _ := d.reexec()
	for _, c := range []chan error{errc, inqc} {
		select {
		case err := <-c:
			require.NoError(t, err, "add_lockspace and inq_lockspace WAIT answered 0 by the new image")
		case <-time.After(90 * time.Second):
			t.Fatal("add_lockspace or inq_lockspace not answered")
		}
	}
	assert.NotEqual(t, old, d.pid())
	assert.Equal(t, 2, d.logCount("cancelled for reexec"), "the old image cancelled the add and the inq")
	assert.Equal(t, 2, d.logCount("handed-over request runs"), "... and the new image ran them")
	assert.Zero(t, d.failures())
	require.NoError(t, d.cl.InqLockspace(context.Background(), ls, 0), "joined")
	st := d.spaceStatus("LS")
	assert.Equal(t, "3", st["io_timeout"])
	// Nothing pending: a reexec as before.
	d.reexec()
	require.NoError(t, d.cl.InqLockspace(context.Background(), ls, 0))
	assert.Equal(t, st["host_generation"], d.spaceStatus("LS")["host_generation"])
}

// TestReexecPendingAcquireProcess: host 2 holds R0 and stops (SIGSTOP),
// so host 1's ACQUIRE of R0 waits on the owner's liveness, having
// written nothing. A reexec of host 1's daemon then succeeds: the old
// image cancels the acquire before its first write and hands it over,
// the new image runs it again on the same connection (docs/upgrade.md
// "Pending requests"). Host 2 resumes and the acquire is answered -243
// by the new image (the owner is alive): host 1 holds nothing, host 2
// still holds R0, its leader unchanged. (If the loaded machine stopped
// host 2 past its renewal fail time, host 2 gives R0 up and the answer
// is 0: then host 1 holds it and host 2 nothing.) A reexec with nothing
// pending then succeeds.
func TestReexecPendingAcquireProcess(t *testing.T) {
	t.Parallel()
	d1 := startProcDaemon(t, "-w", "0")
	d2 := startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 1)
	ls1 := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	ls2 := &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}
	require.NoError(t, d1.cl.AddLockspace(context.Background(), ls1, wire.AddAsync, 2))
	require.NoError(t, d2.cl.AddLockspace(context.Background(), ls2, 0, 2))
	require.NoError(t, d1.cl.InqLockspace(context.Background(), ls1, wire.InqWait))
	r0 := wire.Resource{LockspaceName: "LS", Name: "R0", Disks: []wire.Disk{{Path: path, Offset: 1 << 20}}}
	h2, err := d2.cl.Register(context.Background())
	require.NoError(t, err)
	defer h2.Close()
	require.NoError(t, h2.Acquire(context.Background(), []wire.Resource{r0}, 0, nil))
	inq, err := h2.Inquire(context.Background())
	state2 := inq.State
	require.NoError(t, err)
	leader := func() string {
		out, err := d2.run("direct", "dump", fmt.Sprintf("%s:%d", path, 1<<20))
		require.NoError(t, err, out)
		return out
	}
	before := leader()
	// Host 1 must have seen host 2 alive once (else it answers -243 at
	// once while its table is young).
	require.Eventually(t, func() bool {
		h, err := d1.cl.GetHosts(context.Background(), "LS", 2)
		return err == nil && len(h) == 1 && h[0].State() == wire.HostLive
	}, 40*time.Second, 100*time.Millisecond)

	d1.cl.Timeout = 120 * time.Second
	h1, err := d1.cl.Register(context.Background())
	require.NoError(t, err)
	defer h1.Close()
	p2 := d2.pid()
	require.NoError(t, syscall.Kill(p2, syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(p2, syscall.SIGCONT)
		}
	}()
	// Once host 1's renewal checks no longer see host 2's timestamp
	// change (a check every 4 s at io_timeout 2), the acquire waits on
	// the owner's liveness; before that it answers -243 at once.
	var errc chan error
	deadline := time.Now().Add(15 * time.Second)
	for waiting := false; !waiting; {
		errc = make(chan error, 1)
		go func() { errc <- h1.Acquire(context.Background(), []wire.Resource{r0}, 0, nil) }()
		select {
		case err := <-errc:
			require.Equal(t, int(rescode.ErrAcquireIDLive), client.ErrorCode(err), "%v", err)
			require.True(t, time.Now().Before(deadline), "the acquire never waited")
			time.Sleep(500 * time.Millisecond)
		case <-time.After(1500 * time.Millisecond):
			waiting = true
		}
	}
	old, now := d1.reexec()
	assert.NotEqual(t, old, now)
	assert.Zero(t, d1.failures())
	assert.Equal(t, 1, d1.logCount("cmd_acquire cancelled for reexec"), "the old image cancelled the acquire")
	// The new image writes its pid file before it runs the handed-over
	// request, so its log line may come a moment after reexec returns.
	assert.Eventually(t, func() bool {
		return d1.logCount("cmd_acquire handed-over request runs") == 1
	}, 10*time.Second, 10*time.Millisecond, "... and the new image runs it")
	select {
	case err := <-errc:
		t.Fatalf("acquire answered while host 2 is stopped: %v", err)
	default:
	}
	assert.Equal(t, before, leader(), "the cancelled acquire wrote nothing")
	require.NoError(t, syscall.Kill(p2, syscall.SIGCONT))
	stopped = false
	select {
	case err = <-errc:
	case <-time.After(120 * time.Second):
		t.Fatal("acquire not answered")
	}
	assert.Equal(t, now, d1.pid(), "answered by the new image")
	inq, ierr := h1.Inquire(context.Background())
	n1 := inq.Count
	require.NoError(t, ierr)
	inq, ierr = h2.Inquire(context.Background())
	got, n2 := inq.State, inq.Count
	require.NoError(t, ierr)
	if err == nil {
		// Host 2 was stopped past its renewal fail time: it gave R0 up,
		// and the new image's acquire won it.
		t.Logf("host 2 lost its lease while stopped; host 1 acquired R0")
		assert.Equal(t, 1, n1, "host 1 holds R0")
		assert.Zero(t, n2, "host 2 holds nothing")
	} else {
		assert.Equal(t, int(rescode.ErrAcquireIDLive), client.ErrorCode(err), "%v", err)
		assert.Zero(t, n1, "host 1 holds nothing")
		assert.Equal(t, state2, got, "host 2 still holds R0")
	}
	old, now = d1.reexec()
	assert.NotEqual(t, old, now)
	inq, err = h1.Inquire(context.Background())
	n := inq.Count
	require.NoError(t, err)
	assert.Equal(t, n1, n)
}
