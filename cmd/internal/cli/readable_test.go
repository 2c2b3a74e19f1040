package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil/inproc"
)

// readableDaemon starts an in-process daemon (no root needed), joins
// lockspace LS as host 1 and holds R1 exclusively from this process; it
// sets SANLOCK_RUN_DIR for the in-process tool and returns the daemon.
func readableDaemon(t *testing.T) *inproc.Daemon {
	t.Helper()
	d := inproc.StartT(t, 2)
	t.Setenv("SANLOCK_RUN_DIR", d.RunDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := d.Client()
	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}
	if err := cl.AddLockspace(ctx, ls, 0, 1); err != nil {
		t.Fatalf("add_lockspace: %v", err)
	}
	reg, err := cl.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	r1 := client.Resource{LockspaceName: "LS", Name: "R1", Disks: []client.Disk{{Path: d.Path, Offset: 1 << 20}}}
	if err := reg.Acquire(ctx, []client.Resource{r1}, 0, nil); err != nil {
		t.Fatalf("acquire R1: %v", err)
	}
	// A second renewal, so the history has a renewal with real I/O times
	// and the daemon has seen its own lease renewed.
	waitFor(t, "two renewals of LS", func() bool {
		recs, err := cl.Renewal(ctx, "LS")
		return err == nil && len(recs) >= 2
	})
	return d
}

// typedKeys checks that a decoded keys object holds typed values: the
// given numeric keys are JSON numbers, the flags booleans.
func typedKeys(t *testing.T, what string, keys any, numbers, flags []string) {
	t.Helper()
	m, ok := keys.(map[string]any)
	if !ok {
		t.Fatalf("%s keys: %v", what, keys)
	}
	for _, n := range numbers {
		if _, ok := m[n].(float64); !ok {
			t.Errorf("%s keys: %s is %#v, want a number", what, n, m[n])
		}
	}
	for _, n := range flags {
		if _, ok := m[n].(bool); !ok {
			t.Errorf("%s keys: %s is %#v, want a boolean", what, n, m[n])
		}
	}
}

// TestReadableJSON: every --json action against a live daemon gives
// schema 2 output that passes its schema file, with typed numbers and
// booleans, no empty state, and ages from the daemon's monotonic time.
func TestReadableJSON(t *testing.T) {
	readableDaemon(t)
	pid := fmt.Sprint(os.Getpid())
	outs := map[string]string{}
	for _, a := range [][]string{
		{"status", "-D"}, {"gets", "-h", "1"}, {"host_status", "-s", "LS"}, {"renewal", "-s", "LS"},
		{"inquire", "-p", pid}, {"locks"},
	} {
		out, rc := runMain(t, append(append([]string{"client"}, a...), "--json")...)
		if rc != 0 {
			t.Fatalf("%v --json: rc %d\n%s", a, rc, out)
		}
		checkJSON(t, a[0], out)
		if !strings.HasPrefix(out, "{\n  \"schema\": 2,\n  \"action\": \""+a[0]+"\",") {
			t.Errorf("%s --json does not start with its schema and action:\n%s", a[0], out)
		}
		if regexp.MustCompile(`"state": ""`).MatchString(out) {
			t.Errorf("%s --json has an empty state:\n%s", a[0], out)
		}
		outs[a[0]] = out
	}

	var raw map[string]any
	json.Unmarshal([]byte(outs["status"]), &raw)
	typedKeys(t, "daemon", raw["daemon"].(map[string]any)["keys"], []string{"monotime", "io_timeout", "gid"},
		[]string{"use_watchdog", "high_priority"})
	lsRaw := raw["lockspaces"].([]any)[0].(map[string]any)
	typedKeys(t, "lockspace", lsRaw["keys"], []string{"io_timeout", "renewal_last_success", "host_generation"},
		[]string{"renew_fail", "space_dead"})
	if n, _ := lsRaw["keys"].(map[string]any)["list"].(string); n != "spaces" {
		t.Errorf("lockspace list %#v", lsRaw["keys"])
	}

	s := checkJSON(t, "status", outs["status"]).(*StatusJSON)
	if len(s.Lockspaces) != 1 || s.Lockspaces[0].State != "JOINED" || s.Lockspaces[0].RenewedAgo == nil ||
		*s.Lockspaces[0].RenewedAgo > 10 {
		t.Errorf("status lockspaces: %+v", s.Lockspaces)
	}
	// Keys read back into the daemon's texts.
	if s.Daemon.Keys["use_watchdog"] != "0" || s.Lockspaces[0].Keys["list"] != "spaces" || s.Daemon.Keys.num("monotime") == 0 {
		t.Errorf("status keys: %v %v", s.Daemon.Keys, s.Lockspaces[0].Keys)
	}
	g := checkJSON(t, "gets", outs["gets"]).(*GetsJSON)
	if g.Monotime == 0 || g.Lockspaces[0].State != "JOINED" || len(g.Lockspaces[0].Hosts) != 1 ||
		g.Lockspaces[0].Hosts[0].RenewedAgo == nil || *g.Lockspaces[0].Hosts[0].RenewedAgo > 10 {
		t.Errorf("gets: %s", outs["gets"])
	}
	q := checkJSON(t, "inquire", outs["inquire"]).(*InquireJSON)
	if q.ResCount != 1 || !strings.HasPrefix(q.StateString, "LS:R1:") {
		t.Errorf("inquire: %+v", q)
	}

	l := checkJSON(t, "locks", outs["locks"]).(*LocksJSON)
	if l.Monotime == 0 || len(l.Lockspaces) != 1 || l.Lockspaces[0].State != "JOINED" || len(l.Lockspaces[0].Hosts) != 1 {
		t.Fatalf("locks: %s", outs["locks"])
	}
	h := l.Lockspaces[0].Hosts[0]
	if !h.Local || h.LastLive == 0 || h.LastLive > l.Monotime || h.RenewedAgo == nil ||
		*h.RenewedAgo != l.Monotime-h.LastLive || h.DeadFor != nil {
		t.Errorf("locks host: %+v (monotime %d)", h, l.Monotime)
	}
	hs := checkJSON(t, "host_status", outs["host_status"]).(*HostStatusJSON)
	if hs.Monotime == 0 || len(hs.Lockspaces) != 1 || len(hs.Lockspaces[0].Hosts) == 0 {
		t.Fatalf("host_status: %s", outs["host_status"])
	}
	for _, h := range hs.Lockspaces[0].Hosts {
		if h.LastLive != 0 && (h.RenewedAgo == nil || *h.RenewedAgo != hs.Monotime-h.LastLive) {
			t.Errorf("host_status host: %+v (monotime %d)", h, hs.Monotime)
		}
	}
	text, rc := runMain(t, "client", "locks")
	if rc != 0 || !regexp.MustCompile(`(?m)^LS +1\* +\S+ +\d+ +\d+ +LIVE +renewed \d+ s ago$`).MatchString(text) {
		t.Errorf("locks text: rc %d\n%s", rc, text)
	}
}

// TestAge: ages need both times; a time read after now is 0 s ago.
func TestAge(t *testing.T) {
	for _, c := range []struct {
		now, then, want uint64
		ok              bool
	}{{100, 97, 3, true}, {100, 0, 0, false}, {0, 97, 0, false}, {100, 101, 0, true}} {
		if got, ok := age(c.now, c.then); got != c.want || ok != c.ok {
			t.Errorf("age(%d, %d) = %d, %v", c.now, c.then, got, ok)
		}
	}
}

// TestRecordState: what a LOCKSPACE record's keys make of the state.
func TestRecordState(t *testing.T) {
	for text, want := range map[string]string{
		"list=spaces renew_fail=0 corrupt_result=0":    "JOINED",
		"list=add renew_fail=0 corrupt_result=0":       "ADD",
		"list=rem renew_fail=0 corrupt_result=0":       "REM",
		"list=spaces renew_fail=1 corrupt_result=0":    "FAILED",
		"list=rem renew_fail=1 corrupt_result=0":       "FAILED",
		"list=spaces renew_fail=0 corrupt_result=-223": "FAILED",
	} {
		if got := recordState(parseKeys(text)); got != want {
			t.Errorf("%s: %s, want %s", text, got, want)
		}
	}
}

// TestKeysJSON: record values are typed in JSON and read back as the
// daemon's texts.
func TestKeysJSON(t *testing.T) {
	k := parseKeys("monotime=3314 renew_fail=1 space_dead=0 owner_name=1234 caw_dev=0:0 version=0x00030008 " +
		"corrupt_result=-223 zero=0 lead=007 neg0=-0 big=18446744073709551615 huge=18446744073709551616 killing_pids=2 list=spaces empty= " +
		"smproto_hex=10000001")
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"big":18446744073709551615,"caw_dev":"0:0","corrupt_result":-223,"empty":"","huge":"18446744073709551616",` +
		`"killing_pids":2,"lead":"007","list":"spaces","monotime":3314,"neg0":"-0","owner_name":"1234","renew_fail":true,` +
		`"smproto_hex":"10000001","space_dead":false,"version":"0x00030008","zero":0}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back Keys
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(k) {
		t.Errorf("round trip: %v, want %v", back, k)
	}
}

// TestLocksFailedLockspace: when this host's delta lease is found corrupt,
// `locks` shows the lockspace as FAILED (the USED flag keeps the daemon
// from dropping it while the test looks).
func TestLocksFailedLockspace(t *testing.T) {
	d := inproc.StartT(t, 1)
	t.Setenv("SANLOCK_RUN_DIR", d.RunDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := d.Client()
	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}
	if err := cl.AddLockspace(ctx, ls, 0, 1); err != nil {
		t.Fatalf("add_lockspace: %v", err)
	}
	if err := cl.SetConfig(ctx, "LS", client.ConfigUsed); err != nil {
		t.Fatal(err)
	}
	d.Disk.Load(make([]byte, 512), 0) // host 1's delta lease: no magic
	var l *LocksJSON
	waitFor(t, "LS FAILED", func() bool {
		out, rc := runMain(t, "client", "locks", "--json")
		if rc != 0 {
			t.Fatalf("locks --json rc %d\n%s", rc, out)
		}
		l = checkJSON(t, "locks", out).(*LocksJSON)
		return len(l.Lockspaces) == 1 && l.Lockspaces[0].State == "FAILED"
	})
	out, _ := runMain(t, "client", "status", "--json")
	s := checkJSON(t, "status", out).(*StatusJSON)
	if len(s.Lockspaces) != 1 || s.Lockspaces[0].State != "FAILED" {
		t.Errorf("status --json: %s", out)
	}
	text, rc := runMain(t, "client", "locks")
	if rc != 0 || !regexp.MustCompile(`(?m)^LS \(FAILED\) +1\* `).MatchString(text) {
		t.Errorf("locks text: rc %d\n%s", rc, text)
	}
}
