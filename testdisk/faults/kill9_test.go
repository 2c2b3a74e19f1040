package faults_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// TestKill9DuringBallots kills one host's daemon with SIGKILL at random
// moments while holders on both hosts acquire and release one resource in
// a loop (so most kills land inside an acquire or release ballot), then
// restarts it, rejoins and restarts its holder. Promised: no two
// exclusive holdings overlap, lver never goes back (on disk between rounds
// and across the recorded holdings). Short: 3 kills; full: 15.
func TestKill9DuringBallots(t *testing.T) {
	needReal(t)
	for _, k := range kinds(false) {
		t.Run(string(k), func(t *testing.T) { kill9(t, k) })
	}
}

func kill9(t *testing.T, kind harness.Kind) {
	c := newCluster(t)
	const ls = "lsk"
	if err := c.InitLockspace("ls", ls, sfIO); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r", 8); err != nil {
		t.Fatal(err)
	}
	a, err := c.AddHost(kind, "k"+string(kind))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AddHost(kind, "o"+string(kind))
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range []*harness.Host{a, b} {
		if err := h.AddLockspace(ls, uint64(i+1), "ls", sfIO); err != nil {
			t.Fatal(err)
		}
	}
	var logs []string
	startHolder := func(h *harness.Host, n int) {
		log := filepath.Join(h.Dir, fmt.Sprintf("holdings.%d", n))
		logs = append(logs, log)
		if _, _, err := h.StartProc(fmt.Sprintf("holder%d", n), holderBin(), "-host", h.Name, "-ls", ls, "-res", "r",
			"-path", h.Path("res"), "-log", log); err != nil {
			t.Fatal(err)
		}
	}
	startHolder(a, 0)
	startHolder(b, 0)

	rounds := pick(3, 15)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var lvers []uint64
	var rejoin []time.Duration
	for i := 1; i <= rounds; i++ {
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		d := a.Daemon()
		_ = syscall.Kill(d.PID(), syscall.SIGKILL)
		_ = d.Wait(10 * time.Second)
		if ld, err := c.ReadLeader("res", 0); err == nil {
			lvers = append(lvers, ld.Lver)
		}
		t0 := time.Now()
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		if err := a.AddLockspace(ls, 1, "ls", sfIO); err != nil {
			t.Fatal(err)
		}
		rejoin = append(rejoin, time.Since(t0).Round(10*time.Millisecond))
		startHolder(a, i)
	}
	time.Sleep(2 * time.Second)
	for _, h := range []*harness.Host{a, b} {
		for _, p := range h.Procs() {
			_ = p.Signal(syscall.SIGTERM)
			_ = p.Wait(5 * time.Second)
		}
	}
	if ld, err := c.ReadLeader("res", 0); err == nil {
		lvers = append(lvers, ld.Lver)
	}
	hs, err := harness.ReadHoldings(logs...)
	if err != nil {
		t.Fatal(err)
	}
	bad := harness.Check(hs)
	for i := 1; i < len(lvers); i++ {
		if lvers[i] < lvers[i-1] {
			bad = append(bad, fmt.Sprintf("lver on disk went back: %d after %d", lvers[i], lvers[i-1]))
		}
	}
	t.Logf("%s: %d kill -9 of a daemon during ballots; %s; lver on disk after each kill %v; rejoin took %v; violations %d",
		kind, rounds, harness.Summary(hs), lvers, rejoin, len(bad))
	for _, v := range bad {
		t.Errorf("SAFETY: %s", v)
	}
	if len(hs) < rounds {
		t.Errorf("only %d holdings recorded", len(hs))
	}
}
