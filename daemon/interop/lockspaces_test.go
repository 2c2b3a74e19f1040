package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// waitHosts polls get_hosts until it stops answering -EAGAIN.
func waitHosts(t *testing.T, cl *client.Client, ls string, id uint64) []wire.Host {
	t.Helper()
	var hosts []wire.Host
	require.Eventually(t, func() bool {
		var err error
		hosts, err = cl.GetHosts(context.Background(), ls, id)
		if testutil.Code(err) == rescode.RvEAGAIN {
			return false
		}
		require.NoError(t, err)
		return true
	}, 10*time.Second, 100*time.Millisecond)
	return hosts
}

func TestLockspaceLifecycle(t *testing.T) {
	t.Parallel()
	td, lss := startLS(t, "hostA", manager.Setup{})
	cl := td.cl
	path := testutil.LeaseFile(t, 1<<20)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}

	require.NoError(t, cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: path}}, 0, 1))
	rd, io, err := cl.ReadLockspace(context.Background(), &wire.Lockspace{Disk: wire.Disk{Path: path}})
	require.NoError(t, err)
	assert.Equal(t, "LS", rd.Name)
	assert.Equal(t, uint64(1), rd.HostID, "host_id 0 reads host 1")
	assert.Equal(t, uint32(wire.ResAlign1M|wire.ResSector512), rd.Flags)
	assert.Equal(t, uint32(1), io)

	assert.Equal(t, rescode.RvENOENT, testutil.Code(cl.InqLockspace(context.Background(), ls, 0)))
	start := time.Now()
	require.NoError(t, cl.AddLockspace(context.Background(), ls, 0, 1))
	t.Logf("add_lockspace (sync, io_timeout 1) took %v", time.Since(start))
	assert.NoError(t, cl.InqLockspace(context.Background(), ls, 0))
	assert.NoError(t, cl.InqLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: ls.Disk}, 0), "host_id 0 matches any")
	assert.Equal(t, rescode.RvEEXIST, testutil.Code(cl.AddLockspace(context.Background(), ls, 0, 1)))
	assert.Equal(t, rescode.RvEINVAL, testutil.Code(cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LS", HostID: 2, Disk: ls.Disk}, 0, 1)))
	assert.Equal(t, rescode.RvEINVAL, testutil.Code(cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LT", HostID: 1, Disk: ls.Disk}, 0, 1)))
	assert.Equal(t, rescode.RvEINVAL, testutil.Code(cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LT", HostID: 0, Disk: ls.Disk}, 0, 1)))

	list, err := cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}, list[0])

	hosts := waitHosts(t, cl, "LS", 0)
	require.Len(t, hosts, 1)
	assert.Equal(t, uint64(1), hosts[0].HostID)
	assert.Equal(t, uint64(1), hosts[0].Generation)
	assert.Equal(t, uint32(1), hosts[0].IOTimeout)
	assert.Equal(t, uint32(wire.HostLive), hosts[0].Flags)
	hosts, err = cl.GetHosts(context.Background(), "LS", 5)
	require.NoError(t, err)
	assert.Equal(t, []wire.Host{{HostID: 5, Flags: wire.HostFree}}, hosts)
	hosts, err = cl.GetHosts(context.Background(), "LS", 2001)
	require.NoError(t, err)
	assert.Empty(t, hosts)
	_, err = cl.GetHosts(context.Background(), "nope", 0)
	assert.Equal(t, rescode.RvENOENT, testutil.Code(err))

	recs, err := cl.HostStatus(context.Background(), "LS")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, uint32(1), recs[0].Data32)
	assert.Regexp(t, `^last_check=\d+ last_live=\d+ last_req=0 owner_id=1 owner_generation=1 timestamp=\d+ io_timeout=1 `+
		`no_timeout=0 dead_ext=0 found_dead_ext_gen=0 wrote_dead_ext_gen=0 host_flags=0x3 host_state=LIVE owner_name=hostA$`, recs[0].Text)

	require.Eventually(t, func() bool {
		recs, err = cl.Renewal(context.Background(), "LS")
		return err == nil && len(recs) >= 2
	}, 10*time.Second, 100*time.Millisecond)
	for _, r := range recs {
		assert.Equal(t, uint32(wire.StateRenewal), r.Type)
		assert.Regexp(t, `^timestamp=\d+ read_ms=\d+ write_ms=\d+ next_timeouts=0 next_errors=0$`, r.Text)
	}
	assert.True(t, strings.HasPrefix(recs[0].Text, "timestamp="+fmt.Sprint(recs[0].Data64)+" read_ms=0 write_ms=0"), recs[0].Text)
	_, err = cl.Renewal(context.Background(), "nope")
	assert.Equal(t, rescode.RvENOSPC, testutil.Code(err))

	st, err := cl.Status(context.Background(), 0)
	require.NoError(t, err)
	var lsRecs []wire.StateRecord
	for _, r := range st {
		if r.Type == wire.StateLockspace {
			lsRecs = append(lsRecs, r)
		}
	}
	require.Len(t, lsRecs, 1)
	assert.Regexp(t, `^list=spaces space_id=1 version=0x00030004 io_timeout=1 sector_size=512 align_size=1048576 host_generation=1 `+
		`renew_fail=0 space_dead=0 killing_pids=0 used_retries=0 external_used=0 used_by_orphans=0 `+
		`no_timeout=0 no_watchdog=0 caw=0 caw_dev=0:0 caw_off=0 `+
		`renewal_read_extend_sec=1 set_max_sectors_kb=0 corrupt_result=0 acquire_last_result=1 renewal_last_result=1 `+
		`acquire_last_attempt=\d+ acquire_last_success=\d+ renewal_last_attempt=\d+ renewal_last_success=\d+$`, lsRecs[0].Text)
	assert.Equal(t, uint32(512), lsRecs[0].Lockspace.Disk.Pad1)
	assert.Equal(t, uint64(1), lsRecs[0].Data64)

	assert.Equal(t, rescode.RvEINVAL, testutil.Code(cl.SetConfig(context.Background(), "LS", 0)))
	assert.Equal(t, rescode.RvENOENT, testutil.Code(cl.SetConfig(context.Background(), "nope", wire.ConfigUsed)))
	assert.NoError(t, cl.SetConfig(context.Background(), "LS", wire.ConfigUsed))
	assert.NoError(t, cl.SetConfig(context.Background(), "LS", wire.ConfigUnused))
	assert.NoError(t, cl.ExamineLockspace(context.Background(), ls))

	// A plain shutdown is refused while a lockspace exists.
	assert.Equal(t, rescode.RvEBUSY, testutil.Code(cl.ShutdownWait(context.Background(), false)))

	start = time.Now()
	require.NoError(t, cl.RemLockspace(context.Background(), ls, 0))
	t.Logf("rem_lockspace (sync) took %v", time.Since(start))
	assert.Equal(t, rescode.RvENOENT, testutil.Code(cl.InqLockspace(context.Background(), ls, 0)))
	assertReleased(t, path, "LS", 1)
	assert.Equal(t, rescode.RvENOENT, testutil.Code(cl.RemLockspace(context.Background(), ls, 0)))

	// Async add: in progress, listed with ADD, then joined.
	require.NoError(t, cl.AddLockspace(context.Background(), ls, wire.AddAsync, 1))
	assert.Equal(t, rescode.RvEINPROGRESS, testutil.Code(cl.InqLockspace(context.Background(), ls, 0)))
	assert.Equal(t, rescode.RvEINPROGRESS, testutil.Code(cl.AddLockspace(context.Background(), ls, 0, 1)))
	list, err = cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, uint32(wire.LSFAdd), list[0].Flags)
	st, err = cl.Status(context.Background(), wire.StateLockspace)
	require.NoError(t, err)
	assert.Regexp(t, `^list=add space_id=2 version=0x00000000 io_timeout=1 .* host_generation=0 .* acquire_last_result=0 renewal_last_result=0 `+
		`acquire_last_attempt=0 acquire_last_success=0 renewal_last_attempt=0 renewal_last_success=0$`, st[len(st)-1].Text)
	recs, err = cl.HostStatus(context.Background(), "LS")
	require.NoError(t, err, "a lockspace being added is found")
	assert.Empty(t, recs)
	require.NoError(t, cl.InqLockspace(context.Background(), ls, wire.InqWait))
	list, err = cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint32(0), list[0].Flags)

	// Async rem: eventually gone.
	require.NoError(t, cl.RemLockspace(context.Background(), ls, wire.RemAsync))
	require.Eventually(t, func() bool { return testutil.Code(cl.InqLockspace(context.Background(), ls, 0)) == rescode.RvENOENT }, 10*time.Second, 50*time.Millisecond)

	// Rem of an add in progress aborts it.
	errc := make(chan error, 1)
	go func() { errc <- cl.AddLockspace(context.Background(), ls, 0, 1) }()
	require.Eventually(t, func() bool {
		return testutil.Code(cl.InqLockspace(context.Background(), ls, 0)) == rescode.RvEINPROGRESS
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, cl.RemLockspace(context.Background(), ls, 0))
	rv := testutil.Code(<-errc)
	assert.Contains(t, []int{client.SanlkError, rescode.RvEPERM}, rv)
	assert.Equal(t, 0, lss.Count())

	// REM_UNUSED with no resources.
	require.NoError(t, cl.AddLockspace(context.Background(), ls, 0, 1))
	require.NoError(t, cl.RemLockspace(context.Background(), ls, wire.RemUnused))
	assert.Equal(t, 0, lss.Count())
}

// assertReleased checks that host hostID's delta lease has timestamp 0.
func assertReleased(t *testing.T, path, space string, hostID uint64) {
	t.Helper()
	l := readDelta(t, path, space, hostID)
	assert.Equal(t, uint64(0), l.Timestamp, "lease of host %d not released", hostID)
	assert.Equal(t, hostID, l.OwnerID)
}

func readDelta(t *testing.T, path, space string, hostID uint64) diskfmt.Leader {
	t.Helper()
	dev, err := diskio.OpenFile(path)
	require.NoError(t, err)
	defer dev.Close()
	g := diskfmt.Geometry{SectorSize: 512, AlignSize: 1 << 20, MaxHosts: 2000}
	l, _, err := diskfmt.ReadDeltaLeader(context.Background(), dev, 0, g, space, hostID)
	require.NoError(t, err)
	return l
}

// fakeUsage is a LockspaceUsage with one holder pid.
type fakeUsage struct {
	holders atomic.Value // []int
	dead    atomic.Int32
}

func (u *fakeUsage) SpaceResources(string) (int, int) { return len(u.SpaceHolders("")), 0 }
func (u *fakeUsage) SpaceHolders(string) []int {
	h, _ := u.holders.Load().([]int)
	return h
}
func (u *fakeUsage) SpaceDead(string) { u.dead.Add(1) }
func (u *fakeUsage) SpaceGone(string) {}
func (u *fakeUsage) Examine(string)   {}

// rem_lockspace kills the holders with SIGKILL and waits for them; the
// USED flag blocks the removal until cleared.
func TestRemKillsHoldersAndUsed(t *testing.T) {
	t.Parallel()
	u := &fakeUsage{}
	u.holders.Store([]int{4242})
	kills := make(chan string, 16)
	st := manager.Setup{Usage: u, Kill: func(pid int, sig syscall.Signal) error {
		kills <- fmt.Sprintf("%d %d", pid, int(sig))
		u.holders.Store([]int(nil))
		return nil
	}}
	td := startDaemon(t, func(c *daemon.Config, d *daemon.Deps) { c.OurHostName = "hostA"; d.Manager = st })
	cl := td.cl
	cl.Timeout = 30 * time.Second
	path := testutil.LeaseFile(t, 1<<20)
	require.NoError(t, cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: path}}, 0, 1))
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, cl.AddLockspace(context.Background(), ls, 0, 1))

	assert.Equal(t, rescode.RvEBUSY, testutil.Code(cl.RemLockspace(context.Background(), ls, wire.RemUnused)))
	require.NoError(t, cl.SetConfig(context.Background(), "LS", wire.ConfigUsed))
	require.NoError(t, cl.RemLockspace(context.Background(), ls, wire.RemAsync))
	assert.Equal(t, "4242 9", <-kills)
	require.Eventually(t, func() bool {
		st, _ := cl.Status(context.Background(), wire.StateLockspace)
		for _, r := range st {
			if r.Type == wire.StateLockspace && strings.Contains(r.Text, "space_dead=1 killing_pids=1") &&
				!strings.Contains(r.Text, "used_retries=0 ") {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "USED blocks the removal")
	assert.Equal(t, rescode.RvENOSPC, testutil.Code(cl.SetConfig(context.Background(), "LS", wire.ConfigUsed)))
	assert.Equal(t, int32(1), u.dead.Load())
	require.NoError(t, cl.SetConfig(context.Background(), "LS", wire.ConfigUnused))
	require.NoError(t, cl.InqLockspace(context.Background(), ls, 0), "still joined while dying")
	require.Eventually(t, func() bool { return testutil.Code(cl.InqLockspace(context.Background(), ls, 0)) == rescode.RvENOENT }, 10*time.Second, 50*time.Millisecond)
	assertReleased(t, path, "LS", 1)
}

// Two in-process daemons on one lease file, host_id 1 and 2: hosts see
// each other and events pass from host 2 to host 1.
func TestLockspaceEvents(t *testing.T) {
	t.Parallel()
	td1, _ := startLS(t, "hostA", manager.Setup{})
	td2, _ := startLS(t, "hostB", manager.Setup{})
	path := testutil.LeaseFile(t, 1<<20)
	require.NoError(t, td1.cl.WriteLockspace(context.Background(), &wire.Lockspace{Name: "LS", Disk: wire.Disk{Path: path}}, 0, 1))
	ls1 := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	ls2 := &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}
	require.NoError(t, td1.cl.AddLockspace(context.Background(), ls1, wire.AddAsync, 1))
	require.NoError(t, td2.cl.AddLockspace(context.Background(), ls2, 0, 1))
	require.NoError(t, td1.cl.InqLockspace(context.Background(), ls1, wire.InqWait))

	// Before joining, events cannot be registered.
	_, err := td1.cl.RegEvent(context.Background(), "nope")
	assert.Equal(t, rescode.RvENOENT, testutil.Code(err))
	ev, err := td1.cl.RegEvent(context.Background(), "LS")
	require.NoError(t, err)
	_, err = ev.GetEvent()
	assert.Equal(t, rescode.RvEAGAIN, testutil.Code(err))

	assert.Equal(t, rescode.RvEINVAL, testutil.Code(td2.cl.SetEvent(context.Background(), "LS", wire.HostEvent{HostID: 0, Event: 1}, 0)))
	assert.Equal(t, rescode.RvENOENT, testutil.Code(td2.cl.SetEvent(context.Background(), "nope", wire.HostEvent{HostID: 1, Event: 1}, 0)))
	require.NoError(t, td2.cl.SetEvent(context.Background(), "LS", wire.HostEvent{HostID: 1, Generation: 0, Event: 0x77, Data: 0x99}, 0))
	assert.Equal(t, rescode.RvEBUSY, testutil.Code(td2.cl.SetEvent(context.Background(), "LS", wire.HostEvent{HostID: 1, Event: 0x78}, 0)))

	wctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	cb, err := ev.WaitEvent(wctx)
	cancel()
	require.NoError(t, err)
	assert.Equal(t, wire.HostEvent{HostID: 1, Generation: 0, Event: 0x77, Data: 0x99}, cb.HostEvent)
	assert.Equal(t, uint64(2), cb.FromHostID)
	assert.Equal(t, uint64(1), cb.FromGeneration)
	assert.Equal(t, uint32(wire.EventCBSize), cb.Header.Length)
	require.NoError(t, td1.cl.EndEvent(context.Background(), ev))

	// Each side sees the other.
	require.Eventually(t, func() bool {
		h, err := td1.cl.GetHosts(context.Background(), "LS", 2)
		return err == nil && len(h) == 1 && h[0].Flags == wire.HostLive
	}, 15*time.Second, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		h, err := td2.cl.GetHosts(context.Background(), "LS", 1)
		return err == nil && len(h) == 1 && (h[0].Flags == wire.HostLive || h[0].Flags == wire.HostUnknown)
	}, 15*time.Second, 200*time.Millisecond)
	recs, err := td1.cl.HostStatus(context.Background(), "LS")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Contains(t, recs[1].Text, "owner_id=2 owner_generation=1 ")
	assert.Contains(t, recs[1].Text, "owner_name=hostB")

	// A listener is closed when its lockspace goes away.
	ev2, err := td1.cl.RegEvent(context.Background(), "LS")
	require.NoError(t, err)
	require.NoError(t, td1.cl.RemLockspace(context.Background(), ls1, 0))
	for err == nil { // events still set by host 2 may come first
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = ev2.WaitEvent(wctx)
		cancel()
	}
	assert.True(t, errors.Is(err, io.EOF), "listener closed: %v", err)
	require.NoError(t, td2.cl.RemLockspace(context.Background(), ls2, 0))
}
