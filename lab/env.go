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

// env is one run of a scenario: two guests or more on one disk.
type env struct {
	name string // the scenario's
	cfg  *labConfig
	tl   *timeline
	dir  string
	disk string
	// gs are the guests A, B, C, ...: A runs da, the others db; host_id
	// i+1 is gs[i]'s.
	gs     []*guest
	ds     []daemon
	a, b   *guest // gs[0], gs[1]
	da, db daemon
	// fuse is A's path to the disk in scenarios with pathFaults.
	fuse *fusefault.FS
	// userOpts are the daemon's user options: "-U root -G root" unless
	// the scenario is about the default user.
	userOpts string
}

// res is the lab's resource as sanlock's command line names it.
func res() string { return fmt.Sprintf("%s:R1:/dev/vda:%d", lockspace, resOffset) }

// guestName is the name of the i-th guest: A, B, C, ...
func guestName(i int) string { return string(rune('A' + i)) }

// runScenario boots the guests (two unless sc.guests says more), runs sc,
// and always stops the guests, writes the timeline and removes the disk
// image.
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
	e := &env{name: sc.name, cfg: cfg, tl: newTimeline(), dir: dir, da: da, db: db, userOpts: "-U root -G root"}
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
	n := max(sc.guests, 2)
	e.ds = []daemon{da}
	for len(e.ds) < n {
		e.ds = append(e.ds, db)
	}
	e.gs = make([]*guest, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range e.gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			disk := e.disk
			if i == 0 {
				disk = diskA
			}
			e.gs[i], errs[i] = startGuest(cfg, e.tl, guestName(i), e.ds[i].tree, disk, dir)
		}()
	}
	wg.Wait()
	e.a, e.b = e.gs[0], e.gs[1]
	defer func() {
		for _, g := range e.gs {
			if g != nil {
				g.stop()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return false, "boot: " + err.Error()
	}
	for _, g := range e.gs {
		if err := g.waitAgent(180 * time.Second); err != nil {
			return false, "boot: " + err.Error()
		}
	}
	return sc.run(e)
}

// daemonOf returns the daemon guest g runs.
func (e *env) daemonOf(g *guest) daemon {
	for i, x := range e.gs {
		if x == g {
			return e.ds[i]
		}
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
	if d.label == "ours" && d.sanlock == installedSanlock {
		if out, rc, err := g.sh(20*time.Second, "install -m 0755 /lab/bin/sanlock "+installedSanlock); err != nil || rc != 0 {
			return fmt.Errorf("%s: installing our sanlock (rc %d, %v): %s", g.name, rc, err, out)
		}
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

// setupDaemonsOnly starts the daemons on every guest.
func (e *env) setupDaemonsOnly(watchdog bool) error {
	for _, g := range e.gs {
		if err := e.startDaemons(g, watchdog); err != nil {
			return err
		}
	}
	return nil
}

// setup starts the daemons on every guest, formats the lockspace and the
// resource from A, and joins every host (A host_id 1, B host_id 2, ...).
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
	errs := make([]error, len(e.gs))
	for i, g := range e.gs {
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
	for _, g := range e.gs {
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
// resource and writing tokens, the other guests trying to acquire it and
// refused.
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
	for _, g := range e.gs[1:] {
		if err := e.startHolder(g, ""); err != nil {
			return err
		}
	}
	for _, g := range e.gs[1:] {
		if !waitFor(60*time.Second, func() bool { return e.refusals(g) >= 2 }) {
			return fmt.Errorf("%s: not refused while A holds: %s", g.name, lastLines(e.holderLog(g), 5))
		}
		if strings.Contains(e.holderLog(g), " acquired lver ") {
			return fmt.Errorf("%s acquired while A holds", g.name)
		}
		e.tl.add(g.name, "acquire refused while A holds")
	}
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

// startProbe starts a direct read of g's shared disk in the background
// and returns a function that tells whether it has completed ("" while it
// waits, else its exit status).
func (e *env) startProbe(g *guest) (func() string, error) {
	cmd := "rm -f /run/lab-probe; (dd if=/dev/vda of=/dev/null bs=4096 count=1 skip=4096 iflag=direct 2>/dev/null; " +
		"echo \"rc $?\" >/run/lab-probe) </dev/null >/dev/null 2>&1 &"
	if out, rc, err := g.sh(10*time.Second, cmd); err != nil || rc != 0 {
		return nil, fmt.Errorf("%s: probe (rc %d, %v): %s", g.name, rc, err, out)
	}
	return func() string {
		out, _, _ := g.sh(5*time.Second, "cat /run/lab-probe 2>/dev/null")
		return strings.TrimSpace(out)
	}, nil
}

// renewalPoll is how often watchRenewals reads a delta lease.
const renewalPoll = 250 * time.Millisecond

// renewalWatch is a watchRenewals in progress.
type renewalWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	at   time.Time
	ts   uint64
}

// watchRenewals reads hostID's delta lease from the host every
// renewalPoll and keeps the host time at which its timestamp last
// changed: when A's last renewal landed on the disk, as B can see it. It
// returns once it has seen one change (or after three renewal intervals),
// so that the time it keeps is never that of its own first read.
func (e *env) watchRenewals(hostID int) *renewalWatch {
	w := &renewalWatch{done: make(chan struct{})}
	w.ts, _ = e.deltaTimestamp(hostID)
	waitFor(6*ioTimeout*time.Second, func() bool {
		ts, err := e.deltaTimestamp(hostID)
		if err == nil && ts != w.ts {
			w.ts, w.at = ts, time.Now()
			return true
		}
		return false
	})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(renewalPoll):
			}
			if ts, err := e.deltaTimestamp(hostID); err == nil && ts != w.ts {
				w.ts, w.at = ts, time.Now()
				e.tl.add("A", fmt.Sprintf("delta lease timestamp %d on the disk", ts))
			}
		}
	}()
	return w
}

// stop ends the watch and returns the host time of the last change seen
// and the timestamp it left.
func (w *renewalWatch) stop() (time.Time, uint64) {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	return w.at, w.ts
}
