package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// Timing of the dead-owner tests: io_timeout 1 and the default
// watchdog_fire_timeout (the 3.8.5 binary has no setting for it).
const (
	ioTimeout       = 1
	watchdogFire    = 60
	hostDeadSeconds = 8*ioTimeout + watchdogFire // 68
	// takeoverSlack bounds how late after host_dead_seconds the takeover
	// may come: the taker notices the last renewal up to one renewal
	// interval late and polls the owner's lease once a second.
	takeoverSlack = 2*ioTimeout + 6
)

func monoNow(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// TestDeadOwnerTakeover: a resource held by a host whose daemon was
// SIGKILLed is acquired by another host only after host_dead_seconds
// (counted from the dead host's last renewal), while an OWNER_NOWAIT
// acquire fails at once with -247. One subtest per kind of taker, with an
// owner of the other kind (both C when $GOSANLOCK_HARNESS_KINDS has no go);
// they run at the same time because each waits about 70 s (concurrent
// t.Run calls, not t.Parallel, so that they take one slot of -parallel).
func TestDeadOwnerTakeover(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	defer wg.Wait()
	cOnly := !strings.Contains(os.Getenv("GOSANLOCK_HARNESS_KINDS"), "go") && os.Getenv("GOSANLOCK_HARNESS_KINDS") != ""
	pairs := [][2]harness.Kind{{harness.Go, harness.C}, {harness.C, harness.Go}}
	if cOnly {
		pairs = [][2]harness.Kind{{harness.C, harness.C}, {harness.C, harness.C}}
	}
	if s := os.Getenv("GOSANLOCK_HARNESS_DEADOWNER"); s != "" {
		pairs = deadOwnerPairs(t, s)
	}
	for _, p := range pairs {
		owner, taker := p[0], p[1]
		name := fmt.Sprintf("%s_owner_%s_taker", owner, taker)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, func(t *testing.T) { deadOwner(t, owner, taker) })
		}()
	}
}

// deadOwnerPairs parses $GOSANLOCK_HARNESS_DEADOWNER: owner:taker pairs
// of host kinds, e.g. "c511:c395,c395:go".
func deadOwnerPairs(t *testing.T, s string) [][2]harness.Kind {
	var pairs [][2]harness.Kind
	for _, f := range strings.Split(s, ",") {
		o, tk, ok := strings.Cut(f, ":")
		ks, err := harness.ParseKinds(o + "," + tk)
		if !ok || err != nil {
			t.Fatalf("GOSANLOCK_HARNESS_DEADOWNER: %q is not owner:taker (%v)", f, err)
		}
		pairs = append(pairs, [2]harness.Kind{ks[0], ks[1]})
	}
	return pairs
}

func deadOwner(t *testing.T, ownerKind, takerKind harness.Kind) {
	c := newCluster(t)
	const ls = "lsd"
	if err := c.InitLockspace("ls", ls, ioTimeout); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r", 8); err != nil {
		t.Fatal(err)
	}
	hosts := addHosts(t, c, "d", []harness.Kind{ownerKind, takerKind}, ls, "ls")
	owner, taker := hosts[0], hosts[1]
	if err := taker.WaitHostState(ctxTimeout(t, 15*time.Second), ls, 1, client.HostLive); err != nil {
		t.Fatal(err)
	}

	// The owner's holder acquires and holds.
	log := filepath.Join(owner.Dir, "holder.log")
	_, out, err := owner.StartProc("holder", holderBin, "-host", owner.Name, "-ls", ls, "-res", "r",
		"-path", owner.Path("res"), "-log", log, "-n", "1", "-hold", "1h", "-holdmax", "0")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if strings.Contains(string(b), "holding lver=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner's holder did not acquire: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held, err := c.ReadLeader("res", 0)
	if err != nil {
		t.Fatal(err)
	}
	if held.OwnerID != 1 || held.Timestamp == 0 {
		t.Fatalf("resource leader after the owner's acquire: owner %d timestamp %d", held.OwnerID, held.Timestamp)
	}

	// The owner host dies.
	if _, err := owner.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := monoNow(t)
	delta, err := c.ReadLeader("ls", 0)
	if err != nil {
		t.Fatal(err)
	}
	lastRenewal := time.Duration(delta.Timestamp) * time.Second // owner's monotime, same clock as ours
	if l, err := c.ReadLeader("res", 0); err != nil || l.OwnerID != 1 || l.Timestamp == 0 || l.Lver != held.Lver {
		t.Fatalf("resource leader after the owner died: %+v %v", l, err)
	}
	t.Logf("owner %s killed %.1f s after its last renewal (timestamp %d)",
		owner.Name, (killed - lastRenewal).Seconds(), delta.Timestamp)

	reg, err := taker.Client().Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res := []client.Resource{taker.Resource(ls, "r", "res")}

	// OWNER_NOWAIT fails at once: -247 once the taker has seen the owner's
	// lease stop changing (-243 "owner alive" before that).
	sawNowait := false
	for i := 0; i < 20 && !sawNowait; i++ {
		t0 := time.Now()
		err := reg.Acquire(context.Background(), res, client.AcquireOwnerNowait, nil)
		took := time.Since(t0)
		code := client.ErrorCode(err)
		t.Logf("OWNER_NOWAIT acquire %.1f s after the kill: %d in %v",
			(monoNow(t) - killed).Seconds(), code, took.Round(time.Millisecond))
		switch {
		case err == nil:
			t.Fatalf("OWNER_NOWAIT acquired a lease of a host dead for only %.1f s", (monoNow(t) - lastRenewal).Seconds())
		case took > 3*time.Second:
			t.Fatalf("OWNER_NOWAIT acquire took %v", took)
		case code == -247:
			sawNowait = true
		case code == -243:
			time.Sleep(500 * time.Millisecond)
		default:
			t.Fatalf("OWNER_NOWAIT acquire: %v", err)
		}
	}
	if !sawNowait {
		t.Fatal("OWNER_NOWAIT acquire never returned -247")
	}

	// A blocking acquire waits for host_dead_seconds.
	t0 := time.Now()
	if err := reg.Acquire(context.Background(), res, 0, nil); err != nil {
		t.Fatalf("blocking acquire after %v: %v", time.Since(t0), err)
	}
	got := monoNow(t)
	sinceRenewal := (got - lastRenewal).Seconds()
	t.Logf("%s taker acquired the dead %s owner's lease %.1f s after the kill, %.1f s after the owner's last renewal timestamp (host_dead_seconds %d); blocking call took %v",
		takerKind, ownerKind, (got - killed).Seconds(), sinceRenewal, hostDeadSeconds, time.Since(t0).Round(time.Millisecond))
	if sinceRenewal <= hostDeadSeconds {
		t.Errorf("lease taken over %.1f s after the owner's last renewal, not more than host_dead_seconds %d", sinceRenewal, hostDeadSeconds)
	}
	if sinceRenewal > hostDeadSeconds+takeoverSlack+1 {
		t.Errorf("lease taken over %.1f s after the owner's last renewal, more than %d s late", sinceRenewal, takeoverSlack)
	}
	l, err := c.ReadLeader("res", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.OwnerID != 2 || l.Lver <= held.Lver {
		t.Errorf("resource leader after the takeover: owner %d lver %d (was lver %d)", l.OwnerID, l.Lver, held.Lver)
	}
	if _, err := reg.Release(context.Background(), res, 0); err != nil {
		t.Errorf("release: %v", err)
	}
}
