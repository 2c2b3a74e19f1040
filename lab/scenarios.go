package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

// The lab's lockspace on the shared disk, its resource and the holders'
// token sector.
const (
	lockspace   = "lab"
	resOffset   = 1 << 20
	tokenOffset = 8 << 20
	diskSize    = 1 << 30 // sparse; lvmlockd's lock LV takes 256 MiB
	// ioTimeout is the lockspace's io_timeout: renewals every 2 × it, a
	// failed renewal after 8 × it (docs/timing.md).
	ioTimeout = 2
	// fireTimeout is the watchdog's fire timeout, 60 s: C sanlock 3.8.5
	// cannot use another.
	fireTimeout = 60
	// hostDead is host_dead_seconds: 8 × io_timeout + fire timeout.
	hostDead = 8*ioTimeout + fireTimeout
)

// interrupted is set by SIGINT or SIGTERM: waits end early.
var interrupted atomic.Bool

// env is one run of a scenario: two guests on one disk.
type env struct {
	cfg    *labConfig
	tl     *timeline
	dir    string
	disk   string
	a, b   *guest
	da, db daemon
	// fuse is A's path to the disk in scenarios with pathFaults.
	fuse *fusefault.FS
	// userOpts are the daemon's user options: "-U root -G root" unless
	// the scenario is about the default user.
	userOpts string
}

// res is the lab's resource as sanlock's command line names it.
func res() string { return fmt.Sprintf("%s:R1:/dev/vda:%d", lockspace, resOffset) }

// runScenario boots the two guests, runs sc, and always stops the guests,
// writes the timeline and removes the disk image.
func runScenario(cfg *labConfig, sc scenario, da, db daemon, dir string) (bool, string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err.Error()
	}
	if sc.guestArgs != nil {
		c := *cfg
		var err error
		if c.GuestArgs, err = sc.guestArgs(cfg); err != nil {
			return false, err.Error()
		}
		cfg = &c
	}
	e := &env{cfg: cfg, tl: newTimeline(), dir: dir, da: da, db: db, userOpts: "-U root -G root"}
	defer func() {
		if err := e.tl.write(filepath.Join(dir, "timeline.log")); err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		}
		title := fmt.Sprintf("%s, A %s, B %s (host clock)", sc.name, da.label, db.label)
		if err := e.tl.writeSVG(filepath.Join(dir, "timeline.svg"), title); err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		}
	}()
	tmp, err := os.MkdirTemp(cfg.Cache, "disk-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(tmp)
	e.disk = filepath.Join(tmp, "shared.img")
	if err := os.WriteFile(e.disk, nil, 0o644); err != nil {
		return false, err.Error()
	}
	if err := os.Truncate(e.disk, diskSize); err != nil {
		return false, err.Error()
	}
	diskA := e.disk
	if sc.pathFaults {
		mnt, err := os.MkdirTemp(cfg.Cache, "fuse-")
		if err != nil {
			return false, err.Error()
		}
		defer os.Remove(mnt)
		if e.fuse, err = fusefault.Mount(tmp, mnt); err != nil {
			return false, err.Error()
		}
		// Registered before the guests' stop, so it runs after it.
		defer e.fuse.Close()
		diskA = e.fuse.Path(filepath.Base(e.disk))
	}
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); e.a, errA = startGuest(cfg, e.tl, "A", da.tree, diskA, dir) }()
	go func() { defer wg.Done(); e.b, errB = startGuest(cfg, e.tl, "B", db.tree, e.disk, dir) }()
	wg.Wait()
	defer func() {
		for _, g := range []*guest{e.a, e.b} {
			if g != nil {
				g.stop()
			}
		}
	}()
	if err := errors.Join(errA, errB); err != nil {
		return false, "boot: " + err.Error()
	}
	for _, g := range []*guest{e.a, e.b} {
		if err := g.waitAgent(180 * time.Second); err != nil {
			return false, "boot: " + err.Error()
		}
	}
	return sc.run(e)
}

// daemonOf returns the daemon guest g runs.
func (e *env) daemonOf(g *guest) daemon {
	if g == e.a {
		return e.da
	}
	return e.db
}

// startDaemons starts wdmd (when watchdog) and sanlock on g, and waits
// until sanlock answers.
func (e *env) startDaemons(g *guest, watchdog bool) error {
	d := e.daemonOf(g)
	w := 0
	if watchdog {
		w = 1
		cmd := fmt.Sprintf("setsid %s -D >/var/log/wdmd.stderr 2>&1 </dev/null & echo $! >/run/lab-wdmd.pid; "+
			"for i in $(seq 50); do [ -S /run/wdmd/wdmd.sock ] && exit 0; sleep 0.2; done; exit 1", d.wdmd)
		if out, rc, err := g.sh(20*time.Second, cmd); err != nil || rc != 0 {
			return fmt.Errorf("%s: wdmd did not start (rc %d, %v): %s", g.name, rc, err, out)
		}
		g.tl.add(g.name, "wdmd started")
	}
	cmd := fmt.Sprintf("setsid %[1]s daemon -D -w %[2]d %[3]s >/var/log/sanlock.stderr 2>&1 </dev/null & echo $! >/run/lab-sanlock.pid; "+
		"for i in $(seq 50); do %[1]s client status >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1", d.sanlock, w, e.userOpts)
	if out, rc, err := g.sh(30*time.Second, cmd); err != nil || rc != 0 {
		return fmt.Errorf("%s: sanlock did not start (rc %d, %v): %s", g.name, rc, err, out)
	}
	ids, _, _ := g.sh(5*time.Second, "grep -E '^(Uid|Gid|Groups)' /proc/$(cat /run/lab-sanlock.pid)/status | tr -s '\t\n' '  '")
	g.tl.add(g.name, fmt.Sprintf("sanlock %s started (-w %d): %s", d.label, w, strings.TrimSpace(ids)))
	return nil
}

// setupDaemonsOnly starts the daemons on both guests.
func (e *env) setupDaemonsOnly(watchdog bool) error {
	for _, g := range []*guest{e.a, e.b} {
		if err := e.startDaemons(g, watchdog); err != nil {
			return err
		}
	}
	return nil
}

// setup starts the daemons on both guests, formats the lockspace and the
// resource from A, and joins both hosts (A host_id 1, B host_id 2).
func (e *env) setup(watchdog bool) error {
	if err := e.setupDaemonsOnly(watchdog); err != nil {
		return err
	}
	init := fmt.Sprintf("%[1]s direct init -s %[2]s:0:/dev/vda:0 -o %[3]d && %[1]s direct init -r %[4]s -o %[3]d && "+
		"dd if=/dev/zero of=/dev/vda bs=512 seek=%[5]d count=1 oflag=direct status=none",
		e.da.sanlock, lockspace, ioTimeout, res(), tokenOffset/512)
	if out, rc, err := e.a.sh(60*time.Second, init); err != nil || rc != 0 {
		return fmt.Errorf("A: init (rc %d, %v): %s", rc, err, out)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, g := range []*guest{e.a, e.b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("%s client add_lockspace -s %s:%d:/dev/vda:0 -o %d", e.daemonOf(g).sanlock, lockspace, i+1, ioTimeout)
			out, rc, err := g.sh(180*time.Second, cmd)
			if err != nil || rc != 0 {
				errs[i] = fmt.Errorf("%s: add_lockspace (rc %d, %v): %s", g.name, rc, err, strings.TrimSpace(out))
				return
			}
			g.tl.add(g.name, fmt.Sprintf("joined lockspace as host %d", i+1))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startHolder starts lab-holder on g through "sanlock client command" in
// a loop: attempts that are refused are retried each second, and the one
// that acquires keeps holding.
func (e *env) startHolder(g *guest, holderArgs string) error {
	s := e.daemonOf(g).sanlock
	cmd := fmt.Sprintf("cd /; setsid sh -c 'while :; do echo \"$(date +%%s.%%N) try\"; "+
		"%s client command -r %s -c /lab/bin/lab-holder -name %s %s; echo \"$(date +%%s.%%N) rc $?\"; sleep 1; done' "+
		">>/var/log/holder.log 2>&1 </dev/null &", s, res(), g.name, holderArgs)
	_, rc, err := g.sh(10*time.Second, cmd)
	if err != nil || rc != 0 {
		return fmt.Errorf("%s: holder start (rc %d): %v", g.name, rc, err)
	}
	g.tl.add(g.name, "acquire loop started")
	return nil
}

// holderLog returns the holder logs of every boot of g, oldest first.
func (e *env) holderLog(g *guest) string {
	files, _ := filepath.Glob(filepath.Join(g.dir, "log.*", "holder.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// waitFor polls cond every 250 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || interrupted.Load() {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitAcquired waits until g's holder has acquired and records it.
func (e *env) waitAcquired(g *guest, limit time.Duration) (time.Time, bool) {
	if !waitFor(limit, func() bool { return strings.Contains(e.holderLog(g), " acquired lver ") }) {
		return time.Time{}, false
	}
	return g.tl.add(g.name, "holder acquired"), true
}

// refusals counts g's refused acquire attempts.
func (e *env) refusals(g *guest) int {
	n := 0
	for _, l := range strings.Split(e.holderLog(g), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == "rc" && f[2] != "0" {
			n++
		}
	}
	return n
}

// holderState returns the state letter (R, S, D, ...) of g's holder.
func (e *env) holderState(g *guest) string {
	out, rc, err := g.sh(5*time.Second, "awk '{print $3}' /proc/$(cat /run/lab-holder.pid)/stat")
	if err != nil || rc != 0 {
		return "?"
	}
	return strings.TrimSpace(out)
}

// readDisk reads n bytes at off of the shared disk from the host, with
// O_DIRECT as the guests write it.
func (e *env) readDisk(off int64, n int) ([]byte, error) {
	f, err := os.OpenFile(e.disk, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := (n + 4095) &^ 4095
	raw := make([]byte, size+4096)
	pad := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))&4095)) & 4095
	buf := raw[pad : pad+size]
	if _, err := f.ReadAt(buf, off&^4095); err != nil {
		return nil, err
	}
	start := int(off & 4095)
	return buf[start : start+n], nil
}

// deltaTimestamp returns the timestamp of host_id's delta lease.
func (e *env) deltaTimestamp(hostID int) (uint64, error) {
	b, err := e.readDisk(int64(hostID-1)*512, 512)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[152:]), nil
}

// check is the exclusion checker: the holders' logs must show no
// VIOLATION (a token of a higher lease version, or of the same version
// from another host, read by a holder), every holding a lease version of
// its own, and the token left on the disk must be the highest version's.
func (e *env) check() (bool, string) {
	owners := map[string]string{} // lver -> host
	max := uint64(0)
	writes := 0
	for _, g := range []*guest{e.a, e.b} {
		log := e.holderLog(g)
		writes += strings.Count(log, " wrote lver ")
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "VIOLATION") {
				return false, g.name + ": " + l
			}
			f := strings.Fields(l)
			if len(f) >= 4 && f[1] == "acquired" && f[2] == "lver" {
				if o, ok := owners[f[3]]; ok {
					return false, fmt.Sprintf("lver %s held by %s and %s", f[3], o, g.name)
				}
				owners[f[3]] = g.name
				if v, err := strconv.ParseUint(f[3], 10, 64); err == nil && v > max {
					max = v
				}
			}
		}
	}
	b, err := e.readDisk(tokenOffset, 512)
	if err != nil {
		return false, "token read: " + err.Error()
	}
	tok := string(bytes.TrimRight(b, "\x00"))
	var lver, seq uint64
	var who string
	if writes == 0 {
		return true, fmt.Sprintf("exclusion ok (%d holdings, no tokens written)", len(owners))
	}
	if n, _ := fmt.Sscanf(tok, "tok %d %s %d", &lver, &who, &seq); n != 3 {
		return false, fmt.Sprintf("token sector %q unreadable", tok)
	}
	if lver != max {
		return false, fmt.Sprintf("last token %q is not of the highest lease version %d", tok, max)
	}
	return true, fmt.Sprintf("exclusion ok (%d holdings, last token lver %d by %s)", len(owners), lver, who)
}

// holdAndContend is the common start: daemons, lockspace, A holding the
// resource and writing tokens, B trying to acquire it and refused.
func (e *env) holdAndContend(watchdog bool, holderArgs string) error {
	if err := e.setup(watchdog); err != nil {
		return err
	}
	if err := e.startHolder(e.a, holderArgs); err != nil {
		return err
	}
	if _, ok := e.waitAcquired(e.a, 60*time.Second); !ok {
		return fmt.Errorf("A: holder did not acquire: %s", lastLines(e.holderLog(e.a), 5))
	}
	if err := e.startHolder(e.b, ""); err != nil {
		return err
	}
	if !waitFor(60*time.Second, func() bool { return e.refusals(e.b) >= 2 }) {
		return fmt.Errorf("B: not refused while A holds: %s", lastLines(e.holderLog(e.b), 5))
	}
	if strings.Contains(e.holderLog(e.b), " acquired lver ") {
		return errors.New("B acquired while A holds")
	}
	e.tl.add("B", "acquire refused while A holds")
	return nil
}

// lastLines returns the last n lines of s on one line.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// qmpEvent returns the host time of g's first QMP event name at or after
// since.
func (e *env) qmpEvent(g *guest, name string, since time.Time) (time.Time, bool) {
	e.tl.mu.Lock()
	defer e.tl.mu.Unlock()
	for _, ev := range e.tl.events {
		if ev.Guest == g.name && !ev.At.Before(since) && strings.HasPrefix(ev.What, "qmp "+name) {
			return ev.At, true
		}
	}
	return time.Time{}, false
}

func scenarios() []scenario {
	singles := [][2]string{{"ours", "ours"}, {"5.1.1", "5.1.1"}, {"3.8.5", "3.8.5"}}
	return []scenario{
		{name: "reset-hung-holder", pairs: append(singles, [2]string{"ours", "5.1.1"}), run: resetHungHolder},
		{name: "storage-back-within-grace", pairs: singles, run: storageBackWithinGrace},
		{name: "storage-eio", pairs: singles, pathFaults: true, run: storageEIO},
		{name: "storage-slow", pairs: singles, pathFaults: true, run: storageSlow},
		{name: "reset-daemon-killed", pairs: singles, run: resetDaemonKilled},
		{name: "reset-wdmd-killed", pairs: [][2]string{{"3.8.5", "3.8.5"}, {"ours", "ours"}}, run: resetWdmdKilled},
		{name: "hung-past-sigkill-back", pairs: singles, run: hungPastSigkillBack},
		{name: "hung-holder-back", pairs: [][2]string{{"ours", "ours"}}, run: hungHolderBack},
		{name: "daemon-user", pairs: [][2]string{{"ours", "5.1.1"}, {"ours", "3.9.5"}, {"ours", "3.8.5"}}, run: daemonUser},
		// lvm2 2.03.31 of the sid tree beside 5.1.1; ours runs there too.
		{name: "lvmlockd", pairs: [][2]string{{"5.1.1", "5.1.1"}, {"ours", "ours"}, {"ours", "5.1.1"}},
			oursTree: "sid", run: lvmlockdScenario},
		cawScenario(),
	}
}

// shellScenario is the -shell mode: not part of the scenario list.
func shellScenario(pair [2]string) scenario {
	return cawShell(scenario{name: "shell", pairs: [][2]string{pair}, run: shell})
}

// resetHungHolder: A's storage hangs while its holder is in the kernel on
// it. The holder cannot be killed, so A's watchdog must reset A, and B
// may acquire only after that reset and after host_dead_seconds.
func resetHungHolder(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("hung", func() error {
		if err := e.a.throttle(1); err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		st := e.holderState(e.a)
		e.tl.add("A", "holder state "+st)
		if st != "D" {
			return fmt.Errorf("A's holder is in state %q, not D, with its storage hung", st)
		}
		return nil
	})
}

// resetDaemonKilled: A's sanlock is killed with SIGKILL while A holds;
// wdmd stops petting, the watchdog resets A and B takes over after it.
func resetDaemonKilled(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("killed", func() error {
		out, rc, err := e.a.sh(10*time.Second, "kill -9 $(cat /run/lab-sanlock.pid)")
		if err != nil || rc != 0 {
			return fmt.Errorf("A: kill -9 sanlock (rc %d, %v): %s", rc, err, out)
		}
		e.tl.add("A", "sanlock killed -9")
		return nil
	})
}

// resetWdmdKilled: A's wdmd is killed with SIGKILL while A holds. The
// watchdog device stays armed with nobody petting it (no magic close), so
// it resets A, and B takes over after the reset.
func resetWdmdKilled(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	return e.takeoverAfterReset("wdmd killed", func() error {
		out, rc, err := e.a.sh(10*time.Second, "kill -9 $(cat /run/lab-wdmd.pid)")
		if err != nil || rc != 0 {
			return fmt.Errorf("A: kill -9 wdmd (rc %d, %v): %s", rc, err, out)
		}
		e.tl.add("A", "wdmd killed -9")
		return nil
	})
}

// takeoverAfterReset applies fault to A and waits for A's watchdog reset
// and B's acquisition; it passes when A was reset (and B was not), B
// acquired after the reset and no sooner than host_dead_seconds after the
// fault less one renewal interval (A's last renewal may precede it), and
// the checker finds no violation.
func (e *env) takeoverAfterReset(what string, fault func() error) (bool, string) {
	tFault := e.tl.add("A", "fault: "+what)
	if err := fault(); err != nil {
		return false, err.Error()
	}
	limit := time.Duration(hostDead+120) * time.Second
	tAcq, ok := e.waitAcquired(e.b, limit)
	if !ok {
		_, reset := e.qmpEvent(e.a, "WATCHDOG", tFault)
		return false, fmt.Sprintf("B did not acquire within %v (A watchdog seen: %v)", limit, reset)
	}
	tDog, dogOK := e.qmpEvent(e.a, "WATCHDOG", tFault)
	_, resetOK := e.qmpEvent(e.a, "RESET", tFault)
	_, dogB := e.qmpEvent(e.b, "WATCHDOG", e.tl.start)
	time.Sleep(3 * time.Second)
	okCheck, checkDetail := e.check()
	var fails []string
	if !dogOK || !resetOK {
		fails = append(fails, "no watchdog reset of A")
	}
	if dogB {
		fails = append(fails, "B's watchdog fired")
	}
	if dogOK && tAcq.Before(tDog) {
		fails = append(fails, "B acquired before A's reset")
	}
	minWait := time.Duration(hostDead-2*ioTimeout) * time.Second
	if tAcq.Sub(tFault) < minWait {
		fails = append(fails, fmt.Sprintf("B acquired %.1f s after the fault, before host_dead_seconds", tAcq.Sub(tFault).Seconds()))
	}
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	detail := fmt.Sprintf("fault→reset %.1f s, reset→B acquired %.1f s, fault→B acquired %.1f s; %s",
		tDog.Sub(tFault).Seconds(), tAcq.Sub(tDog).Seconds(), tAcq.Sub(tFault).Seconds(), checkDetail)
	if !dogOK {
		detail = fmt.Sprintf("fault→B acquired %.1f s; %s", tAcq.Sub(tFault).Seconds(), checkDetail)
	}
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// storageBackWithinGrace: A's storage hangs for less than the renewal
// failure time, then comes back: no reset, A keeps its lease, B stays
// refused past host_dead_seconds.
func storageBackWithinGrace(e *env) (bool, string) {
	if err := e.holdAndContend(true, ""); err != nil {
		return false, err.Error()
	}
	tFault := e.tl.add("A", "fault: hung for 6 s")
	if err := e.a.throttle(1); err != nil {
		return false, err.Error()
	}
	time.Sleep(6 * time.Second)
	if err := e.a.throttle(0); err != nil {
		return false, err.Error()
	}
	before := strings.Count(e.holderLog(e.a), " wrote lver ")
	waitFor(time.Duration(hostDead+10)*time.Second-time.Since(tFault), func() bool { return false })
	var fails []string
	if _, ok := e.qmpEvent(e.a, "WATCHDOG", e.tl.start); ok {
		fails = append(fails, "A was reset")
	}
	if _, ok := e.qmpEvent(e.b, "WATCHDOG", e.tl.start); ok {
		fails = append(fails, "B was reset")
	}
	if strings.Contains(e.holderLog(e.b), " acquired lver ") {
		fails = append(fails, "B acquired the lease")
	}
	after := strings.Count(e.holderLog(e.a), " wrote lver ")
	if after-before < 30 {
		fails = append(fails, fmt.Sprintf("A's holder wrote %d tokens after its storage came back", after-before))
	}
	okCheck, checkDetail := e.check()
	if !okCheck {
		fails = append(fails, checkDetail)
	}
	detail := fmt.Sprintf("no reset, A kept the lease (%d tokens since), B refused %d times; %s",
		after-before, e.refusals(e.b), checkDetail)
	if len(fails) > 0 {
		return false, strings.Join(fails, "; ") + " [" + detail + "]"
	}
	return true, detail
}

// hungPastSigkillBack: without the watchdog (-w 0), A's storage hangs past
// the SIGKILL stage of the recovery and then comes back; A's holder
// ignores SIGTERM and does no I/O, so SIGKILL ends it while the storage
// still hangs. C sanlock 3.8.5 then writes A's delta lease released
// (timestamp 0) as soon as the storage is back, so B need not wait
// host_dead_seconds for it.
func hungPastSigkillBack(e *env) (bool, string) {
	return hungBack(e, "-ignore-term -no-token")
}

// hungHolderBack is hungPastSigkillBack with A's holder in the kernel on
// the hung storage (D state), so that it dies only when the storage is
// back.
func hungHolderBack(e *env) (bool, string) {
	return hungBack(e, "")
}

// hungBack runs the storage-hung-and-back case with A's holder started
// with holderArgs.
func hungBack(e *env, holderArgs string) (bool, string) {
	if err := e.holdAndContend(false, holderArgs); err != nil {
		return false, err.Error()
	}
	hang := 62 * time.Second
	e.tl.add("A", fmt.Sprintf("fault: hung for %v", hang))
	if err := e.a.throttle(1); err != nil {
		return false, err.Error()
	}
	waitFor(hang, func() bool { return false })
	tBack := time.Now()
	if err := e.a.throttle(0); err != nil {
		return false, err.Error()
	}
	var ts uint64
	released := waitFor(15*time.Second, func() bool {
		t, err := e.deltaTimestamp(1)
		ts = t
		return err == nil && t == 0
	})
	if released {
		e.tl.add("A", "delta lease released (timestamp 0)")
	}
	tAcq, acq := e.waitAcquired(e.b, 30*time.Second)
	time.Sleep(3 * time.Second)
	okCheck, checkDetail := e.check()
	acqText := "B did not acquire within 45 s of the storage's return"
	if acq {
		acqText = fmt.Sprintf("B acquired %.1f s after the storage's return", tAcq.Sub(tBack).Seconds())
	}
	if !okCheck {
		return false, checkDetail + "; " + acqText
	}
	if !released {
		return false, fmt.Sprintf("A's delta lease keeps timestamp %d 15 s after its storage came back (3.8.5 writes 0); %s; %s",
			ts, acqText, checkDetail)
	}
	return true, fmt.Sprintf("A's delta lease released when its storage came back; %s; %s", acqText, checkDetail)
}

// rootByDefault lists the daemons that stay root when started without
// -U/-G. Ours, 3.8.5 and 3.9.5 drop to the user sanlock (and its groups).
var rootByDefault = map[string]bool{"5.1.1": true}

// daemonUser starts sanlock without -U and -G on both guests and compares
// the user and the groups of every thread it runs with: the other
// scenarios give every daemon "-U root -G root", so that they compare the
// daemons on equal terms. Beside a daemon that stays root by default, ours
// is first checked to drop to sanlock as 3.8.5 and 3.9.5 do, then
// restarted with "uname = root" and "gname = root" in
// /etc/sanlock/sanlock.conf, the setting docs/cli.md gives for 5.1.1's
// default, and must then run as that daemon does.
func daemonUser(e *env) (bool, string) {
	e.userOpts = ""
	ids := map[string]string{}
	for _, g := range []*guest{e.a, e.b} {
		if err := e.startDaemons(g, true); err != nil {
			return false, err.Error()
		}
		id, err := e.daemonIDs(g)
		if err != nil {
			return false, err.Error()
		}
		ids[g.name] = id
	}
	detail := fmt.Sprintf("A (%s): %s; B (%s): %s", e.da.label, ids["A"], e.db.label, ids["B"])
	if e.da.label != "ours" || !rootByDefault[e.db.label] {
		return ids["A"] == ids["B"], detail
	}
	if !strings.HasPrefix(ids["A"], "Uid: 100 ") {
		return false, "ours without -U does not run as sanlock: " + detail
	}
	conf := "kill $(cat /run/lab-sanlock.pid); while kill -0 $(cat /run/lab-sanlock.pid) 2>/dev/null; do sleep 0.2; done; " +
		"mkdir -p /etc/sanlock && printf 'uname = root\\ngname = root\\n' >/etc/sanlock/sanlock.conf"
	if out, rc, err := e.a.sh(30*time.Second, conf); err != nil || rc != 0 {
		return false, fmt.Sprintf("A: restart with uname/gname root (rc %d, %v): %s", rc, err, out)
	}
	// wdmd is still running from the first start: sanlock alone (-w 0).
	if err := e.startDaemons(e.a, false); err != nil {
		return false, err.Error()
	}
	id, err := e.daemonIDs(e.a)
	if err != nil {
		return false, err.Error()
	}
	detail += fmt.Sprintf("; A (ours, uname/gname root in sanlock.conf): %s", id)
	// 3.8.5 run with -U root -G root has supplementary group 0, as ours
	// has; 5.1.1, which never changes its user, has none. The primary
	// group gives the same access, so it is left out of the comparison.
	norm := func(s string) string { return strings.ReplaceAll(s, "Groups: 0 ;", "Groups: ;") }
	return norm(id) == norm(ids["B"]), detail
}

// daemonIDs returns the uid of g's sanlock daemon, then the distinct
// supplementary groups of its threads: the kernel keeps both per thread.
func (e *env) daemonIDs(g *guest) (string, error) {
	out, _, err := g.sh(5*time.Second, "p=$(cat /run/lab-sanlock.pid); grep '^Uid' /proc/$p/status | tr -s '\\t' ' '; "+
		"for t in /proc/$p/task/*; do grep '^Groups' $t/status; done | tr -s '\\t' ' ' | sort -u | tr '\\n' ';'")
	return strings.TrimSpace(out), err
}
