package proctest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// TestReexecLockspaceProcess: a daemon joined to a lockspace (io_timeout
// 1: a renewal every 2 s) reexecs several times; `sanlock client status`
// shows the same generation and acquire time after each, the renewal
// history goes on in the new image without a gap over the renewal
// interval (+1 s of whole-second rounding), and the lease on disk keeps
// its generation. A reexec whose new image fails after the old one has
// paused its renewals (it cannot open the lockspace's disk) leaves the
// old image renewing.
func TestReexecLockspaceProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 0)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, d.cl.AddLockspace(context.Background(), ls, 0, 1))
	// The SET_CONFIG flags are handed over too.
	require.NoError(t, d.cl.SetConfig(context.Background(), "LS", wire.ConfigUsed))
	require.NoError(t, d.cl.SetConfig(context.Background(), "LS", wire.ConfigUsedByOrphans))
	before := d.spaceStatus("LS")
	assert.Equal(t, "1", before["host_generation"])
	assert.Equal(t, "1", before["external_used"])
	assert.Equal(t, "1", before["used_by_orphans"])

	checkHistory := func() []uint64 {
		t.Helper()
		ts := d.renewals("LS")
		require.NotEmpty(t, ts)
		for i := 1; i < len(ts); i++ {
			assert.LessOrEqual(t, ts[i]-ts[i-1], uint64(3), "renewal gap at %d: %v", i, ts)
		}
		return ts
	}
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(i*700) * time.Millisecond) // different phases of the renewal
		old, now := d.reexec()
		require.NotEqual(t, old, now)
		st := d.spaceStatus("LS")
		for _, k := range []string{"host_generation", "acquire_last_success", "io_timeout", "list",
			"external_used", "used_by_orphans"} {
			assert.Equal(t, before[k], st[k], k)
		}
		checkHistory()
	}
	// Renewals go on in the last image.
	last := checkHistory()
	require.Eventually(t, func() bool {
		ts := d.renewals("LS")
		return ts[len(ts)-1] > last[len(last)-1]
	}, 10*time.Second, 100*time.Millisecond)

	// The new image cannot open the disk: it fails after COMMIT (the old
	// image had paused its renewals), and the old image renews on.
	require.NoError(t, os.Rename(path, path+".away"))
	p, n := d.pid(), d.failures()
	require.NoError(t, syscall.Kill(p, syscall.SIGUSR1))
	require.Eventually(t, func() bool { return d.failures() > n }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, os.Rename(path+".away", path))
	assert.Equal(t, p, d.pid())
	out, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	assert.Contains(t, string(out), "failed at commit", "the failure came after the quiesce")
	last = checkHistory()
	require.Eventually(t, func() bool {
		ts := d.renewals("LS")
		return ts[len(ts)-1] > last[len(last)-1]
	}, 10*time.Second, 100*time.Millisecond)
	checkHistory()

	// The lease on disk: ours, generation 1, live.
	dev, err := diskio.OpenFile(path)
	require.NoError(t, err)
	defer dev.Close()
	g, _ := diskfmt.LookupGeometry(512, diskfmt.Align1M)
	ld, _, err := diskfmt.ReadDeltaLeader(context.Background(), dev, 0, g, "LS", 1)
	require.NoError(t, err)
	assert.EqualValues(t, 1, ld.OwnerGeneration)
	assert.NotZero(t, ld.Timestamp)

	// A clean leave still releases (once no longer used externally).
	require.NoError(t, d.cl.SetConfig(context.Background(), "LS", wire.ConfigUnused))
	require.NoError(t, d.cl.RemLockspace(context.Background(), ls, 0))
	ld, _, err = diskfmt.ReadDeltaLeader(context.Background(), dev, 0, g, "LS", 1)
	require.NoError(t, err)
	assert.Zero(t, ld.Timestamp)
}

// TestReexecLeasesProcess: a holder with R0 (EX) and R1 (SH) and two
// orphans (R2 EX and R4 SH, persistent, their holder gone) go through
// several reexecs:
// the holder's inquire answer (lver included) is unchanged on its old
// connection, the orphan is still listed, another client can neither take
// R0 nor R2 but acquires and releases R3, and in the end the holder
// releases its leases on the last image.
func TestReexecLeasesProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, "-w", "0")
	f := newLeaseFixture(t, d, lockspaceFile(t, 5), []orphanSpec{{2, 0}, {4, wire.ResShared}})
	res, holder, state, orphaned := f.res, f.holder, f.state, f.orphaned
	var err error
	var n int

	check := func() {
		t.Helper()
		inq, err := holder.Inquire(context.Background())
		got, n := inq.State, inq.Count
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Equal(t, state, got)
		assert.True(t, orphaned(), "orphan R2 listed")
		other, err := d.cl.Register(context.Background())
		require.NoError(t, err)
		defer other.Close()
		assert.Error(t, other.Acquire(context.Background(), []wire.Resource{res(0, 0)}, 0, nil), "R0 is held")
		assert.Error(t, other.Acquire(context.Background(), []wire.Resource{res(2, 0)}, 0, nil), "R2 is an orphan")
		assert.Error(t, other.Acquire(context.Background(), []wire.Resource{res(4, 0)}, 0, nil), "R4 is an SH orphan")
		require.NoError(t, other.Acquire(context.Background(), []wire.Resource{res(3, 0), res(1, wire.ResShared)}, 0, nil))
		_, err = other.Release(context.Background(), nil, wire.RelAll)
		require.NoError(t, err)
	}
	check()
	before := d.spaceStatus("LS")
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(i*500) * time.Millisecond)
		d.reexec()
		check()
		assert.Equal(t, before["host_generation"], d.spaceStatus("LS")["host_generation"])
	}
	ts := d.renewals("LS")
	for i := 1; i < len(ts); i++ {
		assert.LessOrEqual(t, ts[i]-ts[i-1], uint64(3), "renewal gap at %d: %v", i, ts)
	}
	// The leases are still released normally by the last image.
	_, err = holder.Release(context.Background(), nil, wire.RelAll)
	require.NoError(t, err)
	inq, ierr := holder.Inquire(context.Background())
	n, err = inq.Count, ierr
	require.NoError(t, err)
	assert.Zero(t, n)
	other, err := d.cl.Register(context.Background())
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Acquire(context.Background(), []wire.Resource{res(0, 0)}, 0, nil))
}

// TestReexecEventListenerProcess: an event listener (REG_EVENT) of a
// lockspace that two daemons share survives several reexecs of its
// daemon on the same connection: nothing is pending or closed after them,
// an event the other host sets reaches it from the last image, and
// END_EVENT works there.
func TestReexecEventListenerProcess(t *testing.T) {
	t.Parallel()
	d1, d2 := twoHosts(t)
	ev, err := d1.cl.RegEvent(context.Background(), "LS")
	require.NoError(t, err)
	defer ev.Conn().Close()
	for i := 0; i < 3; i++ {
		time.Sleep(time.Duration(i*600) * time.Millisecond)
		old, now := d1.reexec()
		require.NotEqual(t, old, now)
		_, err = ev.GetEvent()
		require.Equal(t, rescode.RvEAGAIN, testutil.Code(err), "listener open, nothing pending: %v", err)
	}
	assert.Zero(t, d1.failures())
	require.NoError(t, d2.cl.SetEvent(context.Background(), "LS", wire.HostEvent{HostID: 1, Event: 0x77, Data: 0x99}, 0))
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	cb, err := ev.WaitEvent(wctx)
	cancel()
	require.NoError(t, err)
	assert.Equal(t, wire.HostEvent{HostID: 1, Event: 0x77, Data: 0x99}, cb.HostEvent)
	assert.Equal(t, uint64(2), cb.FromHostID)
	require.NoError(t, d1.cl.EndEvent(context.Background(), ev))
}

// The host table changes hands with its lockspace (docs/upgrade.md
// "Adopting lockspaces"): right after each reexec of host 1's daemon,
// host 2 is LIVE there (a rebuilt table would answer -EAGAIN, then
// UNKNOWN for 8 x io_timeout) and its host_status record keeps its owner,
// generation and times, which only move forward.
func TestReexecHostTableProcess(t *testing.T) {
	t.Parallel()
	d1, _ := twoHosts(t)
	live := func() bool {
		h, err := d1.cl.GetHosts(context.Background(), "LS", 2)
		return err == nil && len(h) == 1 && h[0].State() == wire.HostLive
	}
	require.Eventually(t, live, 40*time.Second, 100*time.Millisecond)
	host2 := func() map[string]uint64 {
		recs, err := d1.cl.HostStatus(context.Background(), "LS")
		require.NoError(t, err)
		for _, r := range recs {
			if r.Data32 != 2 {
				continue
			}
			out := map[string]uint64{}
			for _, f := range strings.Fields(r.Text) {
				k, v, _ := strings.Cut(f, "=")
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					out[k] = n
				}
			}
			return out
		}
		t.Fatalf("no record of host 2 in %v", recs)
		return nil
	}
	for i := 0; i < 4; i++ {
		time.Sleep(time.Duration(i*500) * time.Millisecond)
		before := host2()
		old, now := d1.reexec()
		require.NotEqual(t, old, now)
		h, err := d1.cl.GetHosts(context.Background(), "LS", 2)
		require.NoError(t, err, "reexec %d: the table is there at once", i)
		require.Len(t, h, 1)
		assert.Equal(t, uint32(wire.HostLive), h[0].State(), "reexec %d", i)
		after := host2()
		for _, k := range []string{"owner_id", "owner_generation", "io_timeout"} {
			assert.Equal(t, before[k], after[k], "reexec %d: %s", i, k)
		}
		for _, k := range []string{"last_check", "last_live", "timestamp"} {
			assert.GreaterOrEqual(t, after[k], before[k], "reexec %d: %s", i, k)
		}
		t.Logf("reexec %d: before %v after %v", i, before, after)
	}
	assert.Zero(t, d1.failures())
}

// An upgrade from the previous release (docs/upgrade.md
// "Upgrading from the previous release"): the serving image writes the
// state in format 1 (GOSANLOCK_HANDOVER_WRITE_FORMAT=1) through the real
// exchange (control channel, memfd, SCM_RIGHTS) and our binary, which
// reads 1..2, takes over: the pid changes, a registered client keeps its
// registration on its old connection, and the new image serves new
// clients and joins. A format-1 state with a joined lockspace is refused
// (format 1 has no record to continue renewals from): the reexec fails
// and the old image serves on.
func TestReexecFromFormat1Process(t *testing.T) {
	t.Parallel()
	d := startProcDaemonEnv(t, []string{"GOSANLOCK_HANDOVER_WRITE_FORMAT=1"}, "-w", "0")
	h, err := d.cl.Register(context.Background())
	require.NoError(t, err)
	defer h.Close()
	registered := func() bool { return d.hasClient(t, os.Getpid()) }
	// REGISTER has no reply: the daemon lists the client once it has read it.
	require.Eventually(t, registered, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 2; i++ {
		old, now := d.reexec()
		require.NotEqual(t, old, now)
		_, err = h.Inquire(context.Background())
		require.NoError(t, err, "the registered connection is served by the new image")
		require.True(t, registered(), "reexec %d: the registration survives", i)
	}
	b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	assert.Equal(t, 2, strings.Count(string(b), " format 1"), "both handovers wrote format 1")
	assert.Zero(t, d.failures())

	// The new image serves: a join works; then a format-1 handover of a
	// joined lockspace fails cleanly.
	path := lockspaceFile(t, 0)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, d.cl.AddLockspace(context.Background(), ls, 0, 1))
	pid := d.pid()
	require.NoError(t, syscall.Kill(pid, syscall.SIGUSR1))
	require.Eventually(t, func() bool { return d.failures() == 1 }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, pid, d.pid())
	_, err = h.Inquire(context.Background())
	require.NoError(t, err)
	require.True(t, registered())
	st := d.spaceStatus("LS")
	assert.Equal(t, "1", st["host_generation"], "%v", st)
}
