package harness_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

// Timing of the escalation tests. io_timeout 1; the victim's emulated
// watchdog fires escFire seconds after its last ping, and every Go host
// reads watchdog_fire_timeout = escFire from its sanlock.conf, so
// host_dead_seconds is 8*io + escFire on every host, consistently with
// the device.
const (
	escIO       = 1
	escFire     = 25 // watchdog_fire_timeout and the device's fire time (s)
	escGrace    = 3  // daemon -g: SIGKILL from L + 8*io + escGrace
	escFailSecs = 8 * escIO
	escHostDead = escFailSecs + escFire // 33
	// escSlack bounds how late after host_dead_seconds the taker may
	// acquire (it notices the victim's last renewal up to one renewal
	// interval late and retries once a second).
	escSlack = 2*escIO + 6
	// escLate bounds how late after its spec time an escalation step may
	// be seen: the daemon checks its lease once a second, plus scheduling
	// on a loaded machine.
	escLate = 2.0
	// escTimerLate bounds how late after the failure deadline L+8*io the
	// check fails and the first kill program or SIGTERM is seen: the
	// daemon sets a timer at the deadline (its goal is 100 ms; the bound
	// is generous because the machine is shared, and the figure is
	// logged as "recovery start").
	escTimerLate = 0.6
)

// escScenario is one run: how the victim's holder reacts to the
// escalation, and how its storage is cut.
type escScenario struct {
	name      string
	mode      string // escalationholder -mode
	fault     fusefault.Mode
	wantReset bool
}

var escScenarios = []escScenario{
	{"killpath_notice", "notice", fusefault.Error, false},
	{"sigterm_obeyed", "term", fusefault.Error, false},
	{"sigterm_ignored_sigkill", "ignore-term", fusefault.Hang, false},
	{"unkillable_reset", "immortal", fusefault.Error, true},
}

// escEvent is one measured point of a run, in seconds relative to the
// victim's last successful renewal L.
type escEvent struct {
	At   float64
	Lane string // "sanlock", "holder", "wdmd", "device", "other host"
	What string
}

// escRun is the measured timeline of one scenario.
type escRun struct {
	sc     escScenario
	L      uint64 // the victim's last renewal timestamp (monotonic s)
	events []escEvent
}

func (r *escRun) add(at time.Duration, lane, what string) {
	r.events = append(r.events, escEvent{at.Seconds() - float64(r.L), lane, what})
}

func (r *escRun) sorted() []escEvent {
	ev := append([]escEvent(nil), r.events...)
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].At < ev[j].At })
	return ev
}

// compact is the sorted timeline with repeated events of one lane
// (renewal errors, wdmd tests, SIGTERMs) folded into their first one,
// annotated with the count and the last time.
func (r *escRun) compact() []escEvent {
	ev := r.sorted()
	type key struct{ lane, what string }
	idx := map[key]int{}
	var out []escEvent
	n := map[int]int{}
	last := map[int]float64{}
	for _, e := range ev {
		w := e.What
		if i := strings.Index(w, " count="); i >= 0 {
			w = w[:i]
		}
		k := key{e.Lane, w}
		if i, ok := idx[k]; ok {
			n[i]++
			last[i] = e.At
			continue
		}
		idx[k] = len(out)
		n[len(out)] = 1
		out = append(out, escEvent{e.At, e.Lane, w})
	}
	for i := range out {
		if n[i] > 1 {
			out[i].What += fmt.Sprintf(" (x%d, last L%+.2f)", n[i], last[i])
		}
	}
	return out
}

// first returns the first event of lane whose text starts with prefix.
func (r *escRun) first(lane, prefix string) (escEvent, bool) {
	for _, e := range r.sorted() {
		if e.Lane == lane && strings.HasPrefix(e.What, prefix) {
			return e, true
		}
	}
	return escEvent{}, false
}

func (r *escRun) all(lane, prefix string) []escEvent {
	var out []escEvent
	for _, e := range r.sorted() {
		if e.Lane == lane && strings.HasPrefix(e.What, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// TestEscalation: real processes, io_timeout 1, each scenario its own
// two-host cluster of our daemons. The victim host has its own wdmd with
// an emulated watchdog device (fire after escFire s, host reset = Kill);
// the other host runs without a watchdog (with io_timeout 1 every
// lockspace is inside wdmd's 10-s warning margin, so a healthy host with a
// watchdog would be reset too; docs/wdmd.md). The victim's holder holds
// a resource, the victim's storage is cut, and the other host tries to
// acquire the resource until it gets it. Checked: the escalation steps
// come at L+8*io (kill program or SIGTERM) and L+8*io+grace (SIGKILL);
// when the holder goes away the victim's wdmd record is removed and the
// device is never reset; when it cannot be killed the device fires, and
// before the other host acquires; the other host never acquires before
// host_dead_seconds after L. The scenarios run at the same time
// (concurrent t.Run, one slot of -parallel); the measured timelines are
// logged as a table.
func TestEscalation(t *testing.T) {
	t.Parallel()
	needReal(t)
	dir := t.TempDir()
	wdmdBin, escHolder, err := harness.BuildEscalation(dir)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs []*escRun
		wg   sync.WaitGroup
	)
	for _, sc := range escScenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(sc.name, func(t *testing.T) {
				r := escalation(t, sc, wdmdBin, escHolder)
				mu.Lock()
				runs = append(runs, r)
				mu.Unlock()
			})
		}()
	}
	wg.Wait()
	sort.Slice(runs, func(i, j int) bool { return runs[i].sc.name < runs[j].sc.name })
	for _, r := range runs {
		var b strings.Builder
		fmt.Fprintf(&b, "timeline %s (L = %d):\n", r.sc.name, r.L)
		for _, e := range r.compact() {
			fmt.Fprintf(&b, "  L%+7.2f  %-10s %s\n", e.At, e.Lane, e.What)
		}
		t.Log(b.String())
	}
	if p := os.Getenv("GOSANLOCK_ESCALATION_SVG"); p != "" {
		if err := os.WriteFile(p, escalationSVG(runs), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func escalation(t *testing.T, sc escScenario, wdmdBin, escHolder string) *escRun {
	c := newCluster(t)
	const ls = "lse"
	if err := c.InitLockspace("ls", ls, escIO); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r", 8); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("watchdog_fire_timeout = %d\n", escFire)
	victim, err := c.AddHostWith(harness.Go, "v1go", harness.HostOptions{
		DaemonArgs:  []string{"-g", strconv.Itoa(escGrace)},
		SanlockConf: conf,
		Watchdog: &harness.WatchdogOptions{
			WdmdBinary:   wdmdBin,
			FireAfter:    escFire * time.Second,
			TestInterval: 2,
			ResetOnFire:  true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	taker, err := c.AddHostWith(harness.Go, "t2go", harness.HostOptions{SanlockConf: conf})
	if err != nil {
		t.Fatal(err)
	}
	dlog := tailLog(t, victim.DaemonLog())
	wlog := tailLog(t, victim.WdmdLog())

	errs := make(chan error, 2)
	go func() { errs <- victim.AddLockspace(ls, 1, "ls", escIO) }()
	go func() { errs <- taker.AddLockspace(ls, 2, "ls", escIO) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	joined := monoNow(t)

	holder, out, err := victim.StartProc("holder", escHolder, "-ls", ls, "-res", "r",
		"-path", victim.Path("res"), "-mode", sc.mode)
	if err != nil {
		t.Fatal(err)
	}
	var holderExit time.Duration
	holderDone := make(chan struct{})
	go func() {
		<-holder.Done()
		holderExit = monoNow(t)
		close(holderDone)
	}()
	waitFile(t, out, "holding lver=", 15*time.Second)

	// Cut the victim's storage.
	cut := monoNow(t)
	victim.SetFault(fusefault.Fault{Mode: sc.fault})

	// The other host acquires as soon as it may.
	reg, err := taker.Client().Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res := []client.Resource{taker.Resource(ls, "r", "res")}
	var acquired time.Duration
	attempts := map[int]int{}
	deadline := time.Now().Add(time.Duration(escHostDead+escSlack+30) * time.Second)
	for {
		err := reg.Acquire(context.Background(), res, 0, nil)
		if err == nil {
			acquired = monoNow(t)
			break
		}
		code := client.ErrorCode(err)
		if code == 0 {
			t.Fatalf("other host's acquire: %v", err)
		}
		attempts[code]++
		if time.Now().After(deadline) {
			t.Fatalf("other host never acquired (attempts by result %v)", attempts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("other host's failed attempts by result: %v", attempts)

	// After the acquire, everything that was going to happen on the victim
	// has happened: its holder is gone (killed, or reset with the host).
	select {
	case <-holderDone:
	case <-time.After(10 * time.Second):
		t.Errorf("the victim's holder still runs after the other host acquired")
	}
	bank := victim.Watchdog()
	dump, dumpErr := wdmdclient.Dump(victim.WdmdSocket())
	if sc.fault == fusefault.Hang && !sc.wantReset {
		// Let the held I/O fail, so that the daemon can close its disk
		// and then its wdmd connection (see the dump check below).
		victim.SetFault(fusefault.Fault{Mode: fusefault.Error})
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if d, err := wdmdclient.Dump(victim.WdmdSocket()); err == nil && !strings.Contains(d, "name sanlock_") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	delta, err := c.ReadLeader("ls", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &escRun{sc: sc, L: delta.Timestamp}
	L := time.Duration(delta.Timestamp) * time.Second
	r.add(joined, "sanlock", "joined")
	r.add(cut, "sanlock", "storage cut ("+faultName(sc.fault)+")")
	r.add(L, "sanlock", "last renewal L")
	for _, l := range dlog.lines() {
		switch {
		case strings.Contains(l.text, "renewal error"):
			r.add(l.at, "sanlock", "renewal error")
		case strings.Contains(l.text, "check_our_lease failed"):
			r.add(l.at, "sanlock", "check_our_lease failed")
		case killpathRe.MatchString(l.text):
			r.add(l.at, "sanlock", "kill program run")
		case strings.Contains(l.text, " sig 15 "):
			r.add(l.at, "sanlock", "SIGTERM")
		case strings.Contains(l.text, " sig 9 "):
			r.add(l.at, "sanlock", "SIGKILL")
		case strings.Contains(l.text, "all pids clear"):
			r.add(l.at, "sanlock", "all pids clear")
		case strings.Contains(l.text, "wdmd_test_live 0 0"):
			r.add(l.at, "sanlock", "wdmd TEST_LIVE 0 0")
		}
	}
	sanlockCI, slotFreed := "", false
	for _, l := range wlog.lines() {
		if m := testLiveRe.FindStringSubmatch(l.text); m != nil {
			sanlockCI = m[1]
		}
		switch {
		case strings.Contains(l.text, "test failed"):
			r.add(l.at, "wdmd", "test failed")
		case strings.Contains(l.text, "test warning"):
			r.add(l.at, "wdmd", "test warning")
		case strings.Contains(l.text, "renewal 0 expire 0") && strings.Contains(l.text, "test_live ci"):
			r.add(l.at, "wdmd", "expiry removed (TEST_LIVE 0 0)")
		case !slotFreed && sanlockCI != "" && strings.HasSuffix(l.text, "client_pid_dead ci "+sanlockCI):
			slotFreed = true
			r.add(l.at, "wdmd", "slot freed (connection closed)")
		}
	}
	// wdmd probes the device at its start (open, magic close) and arms it
	// at the lockspace's OPEN_WATCHDOG; an open after an unclean close is
	// the reopen of a recovery.
	opens, unclean := 0, false
	for _, e := range bank.Events() {
		switch e.Kind {
		case testdev.CloseUnclean:
			unclean = true
			r.add(e.At, "device", "unclean close (last ping)")
		case testdev.CloseClean:
			unclean = false
		case testdev.Open:
			opens++
			switch {
			case unclean:
				unclean = false
				r.add(e.At, "device", "reopen + ping")
			case opens > 1:
				r.add(e.At, "device", "armed (open_watchdog)")
			}
		case testdev.Fire:
			r.add(e.At, "device", "FIRE (host reset)")
		}
	}
	for _, l := range readHolderEvents(t, out) {
		r.add(l.at, "holder", l.text)
	}
	if sc.wantReset {
		r.add(holderExit, "holder", "gone (host reset)")
	} else {
		r.add(holderExit, "holder", "exited: "+exitText(holder.Err()))
	}
	r.add(acquired, "other host", "acquired")

	// The invariants.
	acq, _ := r.first("other host", "acquired")
	if acq.At <= escHostDead {
		t.Errorf("the other host acquired at L%+.2f, not after host_dead_seconds %d", acq.At, escHostDead)
	}
	if acq.At > escHostDead+escSlack {
		t.Errorf("the other host acquired at L%+.2f, more than %d s after host_dead_seconds", acq.At, escSlack)
	}
	if e, ok := r.first("sanlock", "check_our_lease failed"); !ok || e.At < escFailSecs || e.At > escFailSecs+escTimerLate {
		t.Errorf("check_our_lease failed at L%+.2f (seen %v), want L+%d..L+%.1f", e.At, ok, escFailSecs, escFailSecs+escTimerLate)
	} else {
		t.Logf("recovery start: check_our_lease failed %.0f ms after the deadline L+%d", (e.At-escFailSecs)*1000, escFailSecs)
	}
	fire, fired := r.first("device", "FIRE")
	if fired != sc.wantReset {
		t.Errorf("device fired %v (at L%+.2f), want %v", fired, fire.At, sc.wantReset)
	}
	if fired && fire.At >= acq.At {
		t.Errorf("the victim was reset at L%+.2f, not before the other host acquired at L%+.2f", fire.At, acq.At)
	}
	// With io_timeout 1 the expiry L+8 is always inside wdmd's 10-s
	// warning margin, so the device is closed (last ping) when the
	// lockspace is activated, and would fire escFire later. The no-reset
	// scenarios mean something only if that is after the holder is gone.
	closes := r.all("device", "unclean close")
	if len(closes) == 0 {
		t.Fatalf("the device was never closed unclean")
	}
	if closes[0].At+escFire < escFailSecs+escGrace+3 {
		t.Fatalf("setup too slow: the device was closed at L%+.2f, it would fire before SIGKILL could help", closes[0].At)
	}
	switch sc.mode {
	case "notice":
		n, ok := r.first("holder", "notice sig=10")
		if !ok || n.At < escFailSecs || n.At > escFailSecs+escTimerLate {
			t.Errorf("kill-program notice at L%+.2f (seen %v), want L+%d..L+%.1f", n.At, ok, escFailSecs, escFailSecs+escTimerLate)
		}
		if s := r.all("sanlock", "SIG"); len(s) > 0 {
			t.Errorf("signals sent besides the kill program: %v", s)
		}
	case "term":
		s := r.all("sanlock", "SIGTERM")
		if len(s) != 1 || s[0].At < escFailSecs || s[0].At > escFailSecs+escTimerLate {
			t.Errorf("SIGTERMs %v, want one at L+%d..L+%.1f", s, escFailSecs, escFailSecs+escTimerLate)
		}
		if _, ok := r.first("holder", "sigterm"); !ok {
			t.Errorf("the holder did not see SIGTERM")
		}
		if s := r.all("sanlock", "SIGKILL"); len(s) > 0 {
			t.Errorf("SIGKILL sent: %v", s)
		}
	case "ignore-term":
		s := r.all("sanlock", "SIGTERM")
		if len(s) < escGrace-1 || s[0].At < escFailSecs || s[0].At > escFailSecs+escTimerLate {
			t.Errorf("SIGTERMs %v, want one a second from L+%d during the %d-s grace", s, escFailSecs, escGrace)
		}
		k := r.all("sanlock", "SIGKILL")
		if len(k) != 1 || k[0].At < escFailSecs+escGrace || k[0].At > escFailSecs+escGrace+escLate {
			t.Errorf("SIGKILLs %v, want one at L+%d..L+%.1f", k, escFailSecs+escGrace, escFailSecs+escGrace+escLate)
		}
	case "immortal":
		s := r.all("sanlock", "SIGTERM")
		if len(s) == 0 || s[len(s)-1].At < escFailSecs+escGrace+1 {
			t.Errorf("SIGTERMs %v, want them to go on after the grace (RESTRICT_SIGKILL)", s)
		}
		if k := r.all("sanlock", "SIGKILL"); len(k) > 0 {
			t.Errorf("SIGKILL sent despite RESTRICT_SIGKILL: %v", k)
		}
	}
	if !sc.wantReset {
		if _, ok := r.first("sanlock", "all pids clear"); !ok {
			t.Errorf("no 'all pids clear'")
		}
		reopen, ok := r.first("device", "reopen")
		clear, _ := r.first("sanlock", "wdmd TEST_LIVE 0 0")
		// The reopen is wdmd's next test, run at the first event after the
		// test's whole second has passed: 0-1 s after the TEST_LIVE 0 0
		// (whose stamp from the log tail may be late by ~10 ms).
		// Under load the daemon's log line may be stamped after wdmd has
		// already acted on it: wdmd's own "expiry removed" bounds it.
		ref := clear.At
		if ex, ok := r.first("wdmd", "expiry removed"); ok && ex.At < ref {
			ref = ex.At
		}
		if !ok || reopen.At < ref-0.05 || reopen.At > ref+3 {
			t.Errorf("device reopened at L%+.2f (seen %v), want within 3 s after TEST_LIVE 0 0 at L%+.2f", reopen.At, ok, ref)
		}
		// The record must not keep an expiry or a refcount. Its slot goes
		// when the daemon closes the connection; with hung storage our
		// daemon closes it only after the hung I/O ends (its disk Close
		// waits for the abandoned read), so the slot may still be there.
		if dumpErr != nil {
			t.Errorf("wdmd dump: %v", dumpErr)
		}
		for _, l := range strings.Split(dump, "\n") {
			if !strings.Contains(l, "name sanlock_") {
				continue
			}
			if !strings.Contains(l, " ref 0 ") || !strings.HasSuffix(l, " expire 0") {
				t.Errorf("the victim's wdmd still has a live sanlock record: %s", l)
			} else {
				t.Logf("wdmd slot still open (expire 0, ref 0) at the end: %s", l)
			}
		}
	}
	return r
}

func faultName(m fusefault.Mode) string {
	switch m {
	case fusefault.Error:
		return "EIO"
	case fusefault.Hang:
		return "hang"
	}
	return fmt.Sprint(m)
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// stampedLine is a log line with the CLOCK_MONOTONIC time it was seen.
type stampedLine struct {
	at   time.Duration
	text string
}

// logTail reads a growing log file every 10 ms and stamps each new line
// with the time it appeared, so events of the daemon and of wdmd get a
// time with 10-ms resolution (their own log stamps have whole seconds).
type logTail struct {
	mu   sync.Mutex
	got  []stampedLine
	stop chan struct{}
	done chan struct{}
}

func tailLog(t *testing.T, path string) *logTail {
	lt := &logTail{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(lt.done)
		var off int64
		var part string
		for {
			stopping := false
			select {
			case <-lt.stop:
				stopping = true
			case <-time.After(10 * time.Millisecond):
			}
			if f, err := os.Open(path); err == nil {
				buf := make([]byte, 1<<20)
				n, _ := f.ReadAt(buf, off)
				f.Close()
				// Stamped after the read: a line is never stamped before it
				// was written (a stamp taken before the read made a SIGKILL
				// at L+11.00 look like L+10.98 on a loaded machine).
				now := monoNow(t)
				off += int64(n)
				part += string(buf[:n])
				lt.mu.Lock()
				for {
					i := strings.IndexByte(part, '\n')
					if i < 0 {
						break
					}
					lt.got = append(lt.got, stampedLine{now, part[:i]})
					part = part[i+1:]
				}
				lt.mu.Unlock()
			}
			if stopping {
				return
			}
		}
	}()
	t.Cleanup(func() { lt.close() })
	return lt
}

func (lt *logTail) close() {
	select {
	case <-lt.stop:
	default:
		close(lt.stop)
	}
	<-lt.done
}

// lines stops the tail (after a last read) and returns what it saw.
func (lt *logTail) lines() []stampedLine {
	lt.close()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return append([]stampedLine(nil), lt.got...)
}

var holderEventRe = regexp.MustCompile(`^(.*) t=(\d+)$`)

// readHolderEvents returns the escalationholder's lines with their times.
func readHolderEvents(t *testing.T, path string) []stampedLine {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stampedLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := holderEventRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, _ := strconv.ParseInt(m[2], 10, 64)
		out = append(out, stampedLine{time.Duration(ns), m[1]})
	}
	return out
}

func waitFile(t *testing.T, path, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q after %v: %s", filepath.Base(path), want, d, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLiveRe matches wdmd's debug line for a TEST_LIVE record.
var testLiveRe = regexp.MustCompile(`test_live ci (\d+) renewal \d+ expire \d+`)

// killpathRe matches the daemon's line for running a holder's kill program.
var killpathRe = regexp.MustCompile(`kill \d+ killpath `)
