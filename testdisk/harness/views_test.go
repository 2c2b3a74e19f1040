package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// hostTimestamp returns the delta-lease timestamp of hostID as seen by h.
func hostTimestamp(t *testing.T, h *harness.Host, ls string, hostID uint64) uint64 {
	t.Helper()
	hosts, err := h.Client().GetHosts(context.Background(), ls, hostID)
	if err != nil || len(hosts) != 1 {
		t.Fatalf("%s: get_hosts %s %d: %v %v", h.Name, ls, hostID, hosts, err)
	}
	return hosts[0].Timestamp
}

// TestViewsAndFaults runs two real C daemons on two views of one lockspace
// file: each sees the other's renewals (writes through one FUSE mount are
// read through the other, with O_DIRECT), an EIO fault on one host's view
// stops only that host's renewals, and so does a pause of the host.
func TestViewsAndFaults(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	if err := c.InitLockspace("ls", "lsv", 1); err != nil {
		t.Fatal(err)
	}
	hosts := addHosts(t, c, "v", []harness.Kind{harness.C, harness.C}, "lsv", "ls")
	a, b := hosts[0], hosts[1]
	if err := a.WaitHostState(ctxTimeout(t, 15*time.Second), "lsv", 2, client.HostLive); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitHostState(ctxTimeout(t, 15*time.Second), "lsv", 1, client.HostLive); err != nil {
		t.Fatal(err)
	}

	// Host 1's daemon saw host 2's renewals through its own view; from here
	// on the test reads host 2's delta lease from the backing file (no
	// lag), and each fault phase stays well under 8 x io_timeout so that
	// host 2 does not fail its lockspace.
	// A renewal comes every 2 s at io_timeout 1, up to about 3.5 s apart
	// (docs/delta.md "Renewal loop"), and the view lags by one more of
	// host 1's renewals: wait for a change for up to 6 s.
	ts0 := hostTimestamp(t, a, "lsv", 2)
	for deadline := time.Now().Add(6 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if ts := hostTimestamp(t, a, "lsv", 2); ts != ts0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("host 1 sees host 2's timestamp stuck at %d", ts)
		}
	}

	// advancing reports whether host 2's on-disk timestamp moves within d.
	advancing := func(d time.Duration) bool {
		read := func() uint64 {
			l, err := c.ReadLeader("ls", 512)
			if err != nil {
				t.Fatal(err)
			}
			return l.Timestamp
		}
		t0 := read()
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			time.Sleep(100 * time.Millisecond)
			if read() != t0 {
				return true
			}
		}
		return false
	}

	b.SetFault(fusefault.Fault{Mode: fusefault.Error})
	time.Sleep(300 * time.Millisecond) // let a write in flight land
	if advancing(3 * time.Second) {
		t.Fatal("host 2 renewed through a view that fails every I/O")
	}
	if st := b.FS.Stats(); st.Errors == 0 {
		t.Fatalf("no I/O failed on host 2's view: %+v", st)
	}
	if st := a.FS.Stats(); st.Errors != 0 {
		t.Fatalf("host 1's view failed I/O: %+v", st)
	}
	b.SetFault(fusefault.Fault{})
	if !advancing(4 * time.Second) {
		t.Fatal("host 2 did not renew again after the fault was cleared")
	}

	if err := b.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	paused := advancing(3 * time.Second)
	if err := b.Resume(); err != nil {
		t.Fatal(err)
	}
	if paused {
		t.Fatal("host 2 renewed while paused")
	}
	if !advancing(4 * time.Second) {
		t.Fatal("host 2 did not renew after resume")
	}

	// Hung storage: host 2's I/O is held; C sanlock's libaio submissions
	// return and time out (the daemon keeps running), and the held I/O
	// completes when the hang is released.
	b.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	time.Sleep(300 * time.Millisecond)
	if advancing(3 * time.Second) {
		t.Fatal("host 2 renewed through a hung view")
	}
	if st := b.FS.Stats(); st.Hung == 0 {
		t.Fatalf("no I/O was held on host 2's view: %+v", st)
	}
	cl := b.Client()
	cl.Timeout = 2 * time.Second
	if _, err := cl.Status(context.Background(), 1); err != nil {
		t.Fatalf("host 2's daemon does not answer while its storage hangs: %v", err)
	}
	b.SetFault(fusefault.Fault{})
	if !advancing(4 * time.Second) {
		t.Fatal("host 2 did not renew after the hang was released")
	}

	// Killing a host whose storage hangs still ends all its processes.
	b.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	time.Sleep(1500 * time.Millisecond)
	t0 := time.Now()
	if _, err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("host with hung storage killed in %v", time.Since(t0).Round(time.Millisecond))
}
