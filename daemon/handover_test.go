package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// reexecFixture is one daemon joined to "LS" with a registered holder of
// R0 (EX) and R1 (SH), and R2 free for other clients.
type reexecFixture struct {
	rc     *resCluster
	td     *testDaemon
	holder *client.Reg
	state  string
}

func newReexecFixture(t *testing.T) *reexecFixture {
	rc := newResCluster(t, 1, 3, manager.Setup{})
	td := rc.tds[0]
	h, err := td.cl.Register(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	require.NoError(t, h.Acquire(context.Background(), []wire.Resource{rc.res(0, 0), rc.res(1, wire.ResShared)}, 0, nil))
	inq, err := h.Inquire(context.Background())
	state, n := inq.State, inq.Count
	require.NoError(t, err)
	require.Equal(t, 2, n)
	return &reexecFixture{rc: rc, td: td, holder: h, state: state}
}

// intact checks that the holder still holds what it held, with the same
// lver, and that the daemon serves other clients.
func (f *reexecFixture) intact(t *testing.T) {
	t.Helper()
	inq, err := f.holder.Inquire(context.Background())
	state, n := inq.State, inq.Count
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, f.state, state)
	other, err := f.td.cl.Register(context.Background())
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Acquire(context.Background(), []wire.Resource{f.rc.res(2, 0)}, 0, nil))
	_, err = other.Release(context.Background(), nil, wire.RelAll)
	require.NoError(t, err)
}

// TestReexecSnapshotState: the daemon's state maps onto a handover.State
// that encodes and validates: listener, pid file, connections with their
// registration, the lockspace with its generation and last renewal, and
// the tokens EX and SH with their lver.
func TestReexecSnapshotState(t *testing.T) {
	t.Parallel()
	f := newReexecFixture(t)
	snap, err := f.td.srv.Snapshot()
	require.NoError(t, err)
	defer f.td.srv.releaseHandoverFiles()
	st := snap.State
	_, err = handover.Encode(st)
	require.NoError(t, err)
	require.Len(t, snap.Files, st.NumFDs)
	assert.Equal(t, filepath.Join(f.td.dir, SockName), st.Listener.Path)
	assert.Equal(t, filepath.Join(f.td.dir, PidFileName), st.PidFile.Path)
	var reg *handover.Client
	for i := range st.Clients {
		if st.Clients[i].Registered {
			reg = &st.Clients[i]
		}
	}
	require.NotNil(t, reg)
	assert.Equal(t, os.Getpid(), reg.Pid)
	require.Len(t, st.Lockspaces, 1)
	ls := st.Lockspaces[0]
	assert.Equal(t, "LS", ls.Name)
	assert.EqualValues(t, 1, ls.HostID)
	assert.EqualValues(t, 1, ls.Generation)
	assert.NotZero(t, ls.Timestamp)
	assert.NotEmpty(t, ls.History)
	require.Len(t, st.Tokens, 2)
	modes := map[string]handover.Mode{}
	for _, tk := range st.Tokens {
		modes[tk.Resource] = tk.Mode
		assert.Equal(t, os.Getpid(), tk.Pid)
		assert.True(t, st.Clients[tk.Client].Registered)
		if tk.Mode == handover.ModeEX {
			assert.EqualValues(t, 1, tk.Lver)
		}
	}
	assert.Equal(t, map[string]handover.Mode{"R0": handover.ModeEX, "R1": handover.ModeSH}, modes)
}

// TestReexecQuiesceResume: a quiesced daemon answers nothing until it
// resumes; then the request sent meanwhile is answered and the leases
// are as they were.
func TestReexecQuiesceResume(t *testing.T) {
	t.Parallel()
	f := newReexecFixture(t)
	srv := f.td.srv
	for i := 0; i < 5; i++ {
		_, err := srv.Quiesce()
		require.NoError(t, err)
		srv.releaseHandoverFiles()
		var wg sync.WaitGroup
		done := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.holder.Inquire(context.Background())
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("answered while quiesced: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		srv.Resume()
		wg.Wait()
		require.NoError(t, <-done)
		f.intact(t)
	}
}

// TestReexecFails: a reexec into a binary that exits at start, or that
// sends garbage, fails with a handover error and leaves the daemon
// serving with every lease intact.
func TestReexecFails(t *testing.T) {
	t.Parallel()
	f := newReexecFixture(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte("#!/bin/sh\nprintf 'not a handover' >&3\nsleep 1\n"), 0o755))
	for _, path := range []string{"/bin/false", garbage, filepath.Join(dir, "missing")} {
		_, err := f.td.srv.reexecTo(context.Background(), path)
		var he *handover.Error
		require.True(t, errors.As(err, &he), "%s: %v", path, err)
		assert.Contains(t, err.Error(), "the old image keeps serving")
		f.intact(t)
	}
	// The same through the command: the error and its reason come back.
	err := f.td.cl.Reexec(context.Background()) // startExe is /bin/false here
	assert.Equal(t, rescode.RvEAGAIN, testutil.Code(err))
	assert.Contains(t, err.Error(), "handover to /bin/false failed at ready")
	f.intact(t)
	// Our own binary, which cannot open the lease file (renamed away):
	// it fails after the daemon quiesced and paused its renewals, and the
	// daemon resumes with every lease (and renews on).
	lastRenewal := func() uint64 {
		recs, err := f.td.cl.Renewal(context.Background(), "LS")
		require.NoError(t, err)
		var ts uint64
		for _, r := range recs {
			_, _ = fmt.Sscanf(r.Text, "timestamp=%d", &ts)
		}
		return ts
	}
	before := lastRenewal()
	require.NoError(t, os.Rename(f.rc.path, f.rc.path+".away"))
	_, err = f.td.srv.reexecTo(context.Background(), reexecBinary(t))
	require.NoError(t, os.Rename(f.rc.path+".away", f.rc.path))
	var he *handover.Error
	require.True(t, errors.As(err, &he), "%v", err)
	assert.Contains(t, err.Error(), "failed at commit")
	f.intact(t)
	require.Eventually(t, func() bool { return lastRenewal() > before }, 10*time.Second, 50*time.Millisecond,
		"renewals go on")
}

func init() {
	// The in-process daemons of these tests hand over to our binary, and
	// never to the test binary (a reexec without a path).
	reexecArgs = func() []string { return []string{"sanlock", "daemon", "-D", "-w", "0", "-l", "0"} }
	startExe = "/bin/false"
}

// reexecBinary is our sanlock binary (testutil.SanlockBinary).
func reexecBinary(t *testing.T) string { return testutil.SanlockBinary(t) }
