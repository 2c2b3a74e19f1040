package cli

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/testutil/inproc"
)

// TestOwnerCountdown: a plain acquire of a lease whose owner host has
// stopped renewing draws, on a terminal, the owner and the seconds until
// its host lease has timed out, counting down, and succeeds once that
// host is dead. The in-process daemon runs on a synctest clock: the
// minute of waiting takes none.
func TestOwnerCountdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dmn := inproc.StartInMemory(t, 1)
		disk := dmn.Disk

		// Host 2 held host_id 2 and wrote its delta lease once.
		g, err := diskfmt.GeometryForWrite(0, disk.SectorSize())
		if err != nil {
			t.Fatal(err)
		}
		const gen2 = 3
		if err := diskfmt.WriteDeltaHost(ctx, disk, 0, diskfmt.DeltaHost{Geometry: g, Space: "LS", HostID: 2,
			Generation: gen2, HostName: "deadhost", Timestamp: 5000, IOTimeout: 1}); err != nil {
			t.Fatal(err)
		}
		// It owns R1: the paxos leader names host_id 2 of that generation.
		sec := make([]byte, disk.SectorSize())
		if err := disk.ReadAt(ctx, sec, 1<<20); err != nil {
			t.Fatal(err)
		}
		l, err := diskfmt.DecodeLeader(sec)
		if err != nil {
			t.Fatal(err)
		}
		l.OwnerID, l.OwnerGeneration, l.Lver, l.Timestamp = 2, gen2, 1, 5000
		l.WriteID, l.WriteGeneration, l.WriteTimestamp = 2, gen2, 5000
		l.Seal(sec)
		if err := disk.WriteAt(ctx, sec, 1<<20); err != nil {
			t.Fatal(err)
		}

		// Our daemon joins as host_id 1 and a process of ours registers.
		cl := dmn.Client()
		ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: dmn.Path}}
		if err := cl.AddLockspace(ctx, ls, 0, 1); err != nil {
			t.Fatalf("add_lockspace: %v", err)
		}
		reg, err := cl.Register(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		// Our renewals read host 2's lease at the join (that first sight
		// counts as live) and again, unchanged, a few seconds later: from
		// then on an acquire waits for host 2 to be dead instead of
		// answering that it is alive. REGISTER has no reply: the sleep
		// also lets the daemon take it.
		time.Sleep(5 * time.Second)

		var errb syncBuffer
		start := time.Now()
		out, rc := runMainF(t, func(f *Factory) {
			f.Dial = func() (*client.Client, error) { return dmn.Client(), nil }
			f.ErrOut = &errb
			f.ErrTTY = true
		}, "client", "acquire", "-p", strconv.Itoa(os.Getpid()), "-r", "LS:R1:"+dmn.Path+":1M")
		waited := time.Since(start)
		got := errb.String()
		t.Logf("after %v: rc %d, stdout %q, stderr %q", waited, rc, out, got)
		if rc != 0 || !strings.HasSuffix(out, "acquire done 0\n") {
			t.Fatalf("acquire: rc %d, %q", rc, out)
		}
		dead := delta.HostDeadSeconds(1, delta.DefaultWatchdogFireTimeout)
		if waited < 2*time.Second || waited > time.Duration(dead+20)*time.Second {
			t.Errorf("the acquire took %v; host 2 is dead %d s after its last renewal seen", waited, dead)
		}

		re := regexp.MustCompile(`\r\x1b\[Ksanlock: acquire LS:R1: owner host_id 2 \(deadhost\)(?: [A-Z_]+)? renewed (\d+) s ago; free in (\d+) s`)
		m := re.FindAllStringSubmatch(got, -1)
		if len(m) < 3 {
			t.Fatalf("%d countdown lines, want several: %q", len(m), got)
		}
		prevAgo, prevLeft := -1, dead+1
		for _, s := range m {
			ago, _ := strconv.Atoi(s[1])
			left, _ := strconv.Atoi(s[2])
			if ago < prevAgo || left > prevLeft {
				t.Errorf("not counting down: %q after renewed %d s ago, free in %d s", s[0], prevAgo, prevLeft)
			}
			if ago+left != dead && left != 0 {
				t.Errorf("%q: renewed ago + free in = %d, want host_dead_seconds %d", s[0], ago+left, dead)
			}
			prevAgo, prevLeft = ago, left
		}
		// Drawn once a second from 2 s on, it counts down to host 2's
		// death, when the acquire succeeds.
		first, _ := strconv.Atoi(m[0][2])
		last, _ := strconv.Atoi(m[len(m)-1][2])
		if last >= first || last > 1 || len(m) < first-last {
			t.Errorf("%d lines, free in from %d s to %d s: %q", len(m), first, last, got)
		}
		if strings.Contains(got, "owner host_id 1 ") {
			t.Errorf("our own host is shown as the owner waited for: %q", got)
		}
		if !strings.HasSuffix(got, "\r\x1b[K") {
			t.Errorf("the line is not cleared at the end: %q", got)
		}
	})
}
