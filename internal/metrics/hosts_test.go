package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/promtext"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// sharedDisk is one host's view of a shared in-memory disk: closing it
// keeps the disk, and once broken every write fails with EIO.
type sharedDisk struct {
	*testdisk.Mem
	broken *atomic.Bool
}

func (d sharedDisk) WriteAt(ctx context.Context, p []byte, off int64) error {
	if d.broken.Load() {
		return syscall.EIO
	}
	return d.Mem.WriteAt(ctx, p, off)
}

func (sharedDisk) Close() error { return nil }

// series returns the value of the series of fams named name whose labels
// are exactly kv (name/value pairs, in any order); ok is false when there
// is none.
func series(fams []promtext.Family, name string, kv ...string) (v float64, ok bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		want[kv[i]] = kv[i+1]
	}
	for _, f := range fams {
		if f.Name != name {
			continue
		}
	next:
		for _, s := range f.Series {
			if len(s.Labels) != len(want) {
				continue
			}
			for _, l := range s.Labels {
				if w, ok := want[l.Name]; !ok || w != l.Value {
					continue next
				}
			}
			return s.Value, true
		}
	}
	return 0, false
}

// TestHostGauges: two hosts join lockspace LS (io_timeout 1) on a shared
// disk; host 1's gauges show itself and host 2 LIVE. Host 2's writes then
// fail, so its lease stops changing: host 1 reports it FAIL after
// 8 x io_timeout and DEAD after 8 x io_timeout + the watchdog fire timeout
// (60 s), its seconds since renewal growing. Simulated time.
func TestHostGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		mem := testdisk.NewMem(1<<20, 512)
		require.NoError(t, diskfmt.WriteLockspace(ctx, mem, 0, 0, "LS", 1, 0))
		var mgrs [2]*manager.Manager
		var broken [2]atomic.Bool
		var wg sync.WaitGroup
		for i := range mgrs {
			open := func(string) (diskfmt.Device, error) { return sharedDisk{mem, &broken[i]}, nil }
			mgrs[i] = manager.New(manager.Setup{Open: open, Context: ctx, HostName: []string{"hostA", "hostB"}[i],
				RunKillpath: func([]string) error { return nil }, Kill: func(int, syscall.Signal) error { return nil },
				Settings: manager.Settings{WatchdogFireTimeout: 60}})
			ls := wire.Lockspace{Name: "LS", HostID: uint64(i + 1), Disk: wire.Disk{Path: "/mem"}}
			wg.Go(func() {
				assert.NoError(t, mgrs[i].Lockspaces.Add(ctx, manager.AddRequest{Lockspace: ls, IOTimeout: 1}))
			})
		}
		wg.Wait()
		defer func() {
			cancel()
			for _, m := range mgrs {
				m.Stop()
			}
		}()
		ls1 := mgrs[0].Lockspaces
		state := func(fams []promtext.Family, id string) string {
			var out string
			for _, s := range hostStates {
				if v, ok := series(fams, "sanlock_host_state", "host_id", id, "lockspace", "LS", "state", s.String()); ok && v == 1 {
					out += s.String()
				}
			}
			return out
		}
		// Each host renews every 2 s; two changes of host 2's lease make it LIVE.
		time.Sleep(6 * time.Second)
		synctest.Wait()
		fams := collectHosts(ls1)
		assert.Equal(t, "LIVE", state(fams, "1"), "own entry")
		assert.Equal(t, "LIVE", state(fams, "2"))
		v, _ := series(fams, "sanlock_host_alive", "host_id", "2", "lockspace", "LS")
		assert.Equal(t, 1.0, v)
		since, ok := series(fams, "sanlock_host_seconds_since_renewal", "host_id", "2", "lockspace", "LS")
		assert.True(t, ok)
		assert.LessOrEqual(t, since, 4.0)

		broken[1].Store(true)
		time.Sleep(15 * time.Second)
		synctest.Wait()
		fams = collectHosts(ls1)
		assert.Equal(t, "FAIL", state(fams, "2"))
		v, _ = series(fams, "sanlock_host_alive", "host_id", "2", "lockspace", "LS")
		assert.Equal(t, 0.0, v)
		since2, _ := series(fams, "sanlock_host_seconds_since_renewal", "host_id", "2", "lockspace", "LS")
		assert.Greater(t, since2, 8.0)

		time.Sleep(60 * time.Second)
		synctest.Wait()
		fams = collectHosts(ls1)
		assert.Equal(t, "DEAD", state(fams, "2"))
		assert.Equal(t, "LIVE", state(fams, "1"))
		since3, _ := series(fams, "sanlock_host_seconds_since_renewal", "host_id", "2", "lockspace", "LS")
		assert.Greater(t, since3, 68.0)
	})
}
