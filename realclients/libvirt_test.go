package realclients

// libvirt 9.0's sanlock lock plugin (Debian libvirt-sanlock) driving QEMU
// guests, run against our daemon and against sanlock 3.8.5 with the same
// assertions. See libvirt_env_test.go for the private environment.
//
// Two things about libvirt 9.0 shape the steps:
//   - libvirt starts QEMU with its CPUs stopped, registers the QEMU pid
//     with the daemon in the forked child (and restricts it), and acquires
//     the leases when it starts the CPUs. By then QEMU has opened its disk
//     images with its own file locks, so a second guest on the same image
//     is refused by QEMU's lock before libvirt asks the daemon. Conflicts
//     that reach the daemon are tested with an explicit <lease> shared by
//     guests on different images, and with disk hotplug (where libvirt
//     acquires the lease before QEMU opens the image).
//   - Hot-unplug of a virtio disk needs the guest's cooperation (there is
//     no OS), so hotplug uses a USB disk, which QEMU removes at once.
//   - On resume libvirt 9.0 passes no saved lease state (its log shows
//     virDomainLockProcessResume state=<null> after every suspend), so the
//     daemon is never asked to check the lease version on resume: a paused
//     guest whose lease another guest took in between resumes once that
//     lease is free again, at a newer lease version.
//   - libvirt restricts every QEMU client (restricted=1) whether or not it
//     registers a killpath; <on_lockfailure> makes it register
//     libvirt_sanlock_helper as the killpath, which the killpath step
//     exercises by corrupting the lockspace.

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestLibvirtSanlockPlugin runs the scenario on our daemon and on 3.8.5 at
// the same time, each in its own private environment (own namespace,
// libvirtd, daemons and lease files): the steps mostly wait for QEMU,
// libvirtd and lease timeouts. It runs beside TestSanlkReset.
func TestLibvirtSanlockPlugin(t *testing.T) {
	t.Parallel()
	lvRequire(t)
	bins := map[string]string{"gosanlock": ourSanlock(t), "sanlock-3.8.5": "/usr/sbin/sanlock"}
	srConcurrently(t, []string{"gosanlock", "sanlock-3.8.5"}, func(t *testing.T, name string) {
		lvScenario(t, bins[name])
	})
}

// lvScenario runs every step in order on one daemon; a failed step stops
// the rest (they build on each other).
func lvScenario(t *testing.T, bin string) {
	e := lvNewEnv(t, bin)
	e.startLibvirtd()

	for _, d := range []string{"a.img", "c.img", "d.img", "e.img", "h.img", "hp.img", "sh.img", "k.img"} {
		e.makeDisk(d)
	}
	e.makeLease("lvres")
	e.makeLease("lvres2")

	steps := []struct {
		name string
		fn   func(t *testing.T, e *lvEnv)
	}{
		{"StartTakesDiskLease", lvStepStart},
		{"SecondGuestSameDiskRefused", lvStepSameDisk},
		{"ExplicitLeaseConflictRefused", lvStepLeaseConflict},
		{"LeaseHeldByOtherHostRefused", lvStepOtherHost},
		{"SuspendReleasesResumeReacquires", lvStepSuspendResume},
		{"PausedGuestLosesLease", lvStepPausedLoses},
		{"DestroyFreesLease", lvStepDestroy},
		{"Kill9FreesLease", lvStepKill9},
		{"DiskHotplug", lvStepHotplug},
		{"ShareableDisks", lvStepShareable},
		{"LibvirtdRestart", lvStepRestart},
		{"VirtSanlockCleanup", lvStepCleanup},
		{"Killpath", lvStepKillpath},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			e.t = t
			s.fn(t, e)
		})
		e.t = t
		if !ok {
			t.Fatalf("step %s failed; later steps depend on it", s.name)
		}
	}
}

// heldBy asserts that res is held exclusively by pid alone, and returns
// its lease version.
func (e *lvEnv) heldBy(res string, pid int) string {
	e.t.Helper()
	st := e.status()
	hs := st.holders(res)
	if len(hs) != 1 || hs[0].pid != pid {
		e.t.Fatalf("want %s held by pid %d only, status:\n%s", res, pid, st.raw)
	}
	return hs[0].lver
}

// notHeld asserts nobody holds res.
func (e *lvEnv) notHeld(res string) {
	e.t.Helper()
	st := e.status()
	if hs := st.holders(res); len(hs) != 0 {
		e.t.Fatalf("want %s free, status:\n%s", res, st.raw)
	}
}

// waitGone waits for pid to exit and for the daemon to forget it.
func (e *lvEnv) waitGone(pid int) {
	e.t.Helper()
	e.waitFor("pid "+strconv.Itoa(pid)+" gone from process table and daemon", func() (bool, string) {
		st := e.status()
		_, client := st.clients[pid]
		return !lvAlive(pid) && !client && len(st.byPid(pid)) == 0, st.raw
	})
}

// leaderFree asserts the on-disk leader of res is released (timestamp 0)
// with lease version lver.
func (e *lvEnv) leaderFree(res, lver string) {
	e.t.Helper()
	l := e.leader(res)
	if l["timestamp"] != "0" || l["lver"] != lver {
		e.t.Fatalf("leader of %s: want released (timestamp 0) at lver %s, got timestamp %s lver %s", res, lver, l["timestamp"], l["lver"])
	}
}

// leaderHeld asserts the on-disk leader of res is held (timestamp != 0)
// by host 1 at lease version lver.
func (e *lvEnv) leaderHeld(res, lver string) {
	e.t.Helper()
	l := e.leader(res)
	if l["timestamp"] == "0" || l["lver"] != lver || l["owner_id"] != "1" {
		e.t.Fatalf("leader of %s: want held by host 1 at lver %s, got owner_id %s timestamp %s lver %s", res, lver, l["owner_id"], l["timestamp"], l["lver"])
	}
}

var (
	lvA = lvGuest{name: "lva", disks: []string{"a.img"}}
	lvC = lvGuest{name: "lvc", disks: []string{"c.img"}, lease: "lvres"}
	lvD = lvGuest{name: "lvd", disks: []string{"d.img"}, lease: "lvres"}
	lvE = lvGuest{name: "lve", disks: []string{"e.img"}}
)

// A guest start registers the QEMU pid (restricted) and takes the disk's
// automatic lease at lease version 1.
func lvStepStart(t *testing.T, e *lvEnv) {
	pid := e.createOK(lvA)
	st := e.status()
	if st.clients[pid] != lvA.name {
		t.Fatalf("want client p %d %s, status:\n%s", pid, lvA.name, st.raw)
	}
	if lver := e.heldBy(e.diskRes("a.img"), pid); lver != "1" {
		t.Fatalf("want lver 1 in status, got %s", lver)
	}
	e.leaderHeld(e.diskRes("a.img"), "1")
	e.snapshotD("lva started")
	if d := e.statusD(pid); d["restricted"] != "1" {
		t.Fatalf("want the QEMU client restricted=1 (libvirt restricts it), got %q (%v)", d["restricted"], d)
	}
}

// A second guest on the same image does not start and changes nothing.
func lvStepSameDisk(t *testing.T, e *lvEnv) {
	pid := e.pid(lvA.name)
	out, err := e.create(lvGuest{name: "lvb", disks: []string{"a.img"}})
	if err == nil {
		t.Fatalf("second guest on a.img started:\n%s", out)
	}
	// QEMU's own image lock refuses it first (see the file comment).
	if !strings.Contains(out, `Failed to get "write" lock`) {
		t.Fatalf("want QEMU's image lock refusal, got:\n%s", out)
	}
	e.heldBy(e.diskRes("a.img"), pid)
	// lvb's QEMU registered before it failed; the daemon drops it.
	e.waitFor("only lva registered", func() (bool, string) {
		st := e.status()
		_, ok := st.clients[pid]
		return len(st.clients) == 1 && ok, st.raw
	})
}

// A guest whose explicit <lease> is held by another guest on this host is
// refused by the daemon (EEXIST: held by another process here).
func lvStepLeaseConflict(t *testing.T, e *lvEnv) {
	cpid := e.createOK(lvC)
	e.heldBy(e.leaseRes("lvres"), cpid)
	e.heldBy(e.diskRes("c.img"), cpid)
	out, err := e.create(lvD)
	if err == nil {
		t.Fatalf("lvd started while lvc holds lvres:\n%s", out)
	}
	if !strings.Contains(out, "Failed to acquire lock: File exists") {
		t.Fatalf("want libvirt's 'Failed to acquire lock: File exists', got:\n%s", out)
	}
	e.heldBy(e.leaseRes("lvres"), cpid)
	e.notHeld(e.diskRes("d.img"))
	if s := e.domState(lvD.name); !strings.HasPrefix(s, "error") {
		t.Fatalf("lvd exists after refused start: %s", s)
	}
}

// A lease held through another host (a second daemon joined to the
// plugin's lockspace as host_id 2, holding the lease with `sanlock client
// command`) refuses the guest; once that holder is gone the guest starts.
func lvStepOtherHost(t *testing.T, e *lvEnv) {
	e.startDaemon2()
	ls := lvLockspace + ":2:" + e.leases + "/" + lvLockspace + ":0"
	if out, err := e.sanlock2("client", "add_lockspace", "-o", "1", "-s", ls); err != nil {
		t.Fatalf("host 2 add_lockspace: %v\n%s", err, out)
	}
	res := e.leaseRes("lvres2")
	e.cmd2, e.cmd2W = e.startBgIn(e.runDir2, "command2.out", e.bin, "client", "command", "-r", res, "-c", "/bin/sleep", "600")
	e.waitFor("host 2 holds lvres2", func() (bool, string) {
		out, _ := e.sanlock2("client", "status")
		st := lvParseStatus(out)
		return len(st.holders(res)) == 1, out
	})
	h := lvGuest{name: "lvh", disks: []string{"h.img"}, lease: "lvres2"}
	out, err := e.create(h)
	if err == nil {
		t.Fatalf("lvh started while host 2 holds lvres2:\n%s", out)
	}
	if !strings.Contains(out, "Failed to acquire lock: Lease is held by another host") {
		t.Fatalf("want 'Failed to acquire lock: Lease is held by another host', got:\n%s", out)
	}
	e.notHeld(res)
	_ = e.cmd2.Process.Kill()
	<-e.cmd2W
	e.cmd2 = nil
	e.waitFor("host 2 released lvres2", func() (bool, string) {
		out, _ := e.sanlock2("client", "status")
		st := lvParseStatus(out)
		return len(st.holders(res)) == 0 && len(st.clients) == 0, out
	})
	if l := e.leader(res); l["timestamp"] != "0" || l["owner_id"] != "2" || l["lver"] != "1" {
		t.Fatalf("want lvres2 released by host 2 at lver 1, got %v", l)
	}
	hpid := e.createOK(h)
	if lver := e.heldBy(res, hpid); lver != "2" {
		t.Fatalf("want lvh to hold lvres2 at lver 2, got %s", lver)
	}
	e.leaderHeld(res, "2")
	e.virshOK("destroy", h.name)
	e.waitGone(hpid)
	if out, err := e.sanlock2("client", "rem_lockspace", "-s", ls); err != nil {
		t.Fatalf("host 2 rem_lockspace: %v\n%s", err, out)
	}
	e.stopDaemon2()
}

// Suspend releases the leases (the QEMU pid stays registered); resume
// acquires them again at the next lease version.
func lvStepSuspendResume(t *testing.T, e *lvEnv) {
	pid := e.pid(lvA.name)
	res := e.diskRes("a.img")
	e.virshOK("suspend", lvA.name)
	e.snapshotD("lva paused")
	st := e.status()
	if _, ok := st.clients[pid]; !ok {
		t.Fatalf("paused QEMU pid %d no longer registered:\n%s", pid, st.raw)
	}
	if len(st.byPid(pid)) != 0 {
		t.Fatalf("paused guest still holds leases:\n%s", st.raw)
	}
	e.leaderFree(res, "1")
	e.virshOK("resume", lvA.name)
	if lver := e.heldBy(res, pid); lver != "2" {
		t.Fatalf("want lver 2 after resume, got %s", lver)
	}
	e.leaderHeld(res, "2")
}

// A paused guest's lease is taken by another guest; the paused guest
// cannot resume until that guest has gone, then resumes at a newer lease
// version.
func lvStepPausedLoses(t *testing.T, e *lvEnv) {
	cpid := e.pid(lvC.name)
	res := e.leaseRes("lvres")
	e.virshOK("suspend", lvC.name)
	e.notHeld(res)
	dpid := e.createOK(lvD)
	if lver := e.heldBy(res, dpid); lver != "2" {
		t.Fatalf("want lvd to hold lvres at lver 2, got %s", lver)
	}
	out, err := e.virsh("resume", lvC.name)
	if err == nil {
		t.Fatalf("lvc resumed while lvd holds lvres:\n%s", out)
	}
	if !strings.Contains(out, "Failed to acquire lock: File exists") {
		t.Fatalf("want 'Failed to acquire lock: File exists', got:\n%s", out)
	}
	if s := e.domState(lvC.name); s != "paused (user)" {
		t.Fatalf("want lvc paused (user), got %q", s)
	}
	e.heldBy(res, dpid)
	e.virshOK("destroy", lvD.name)
	e.waitGone(dpid)
	e.leaderFree(res, "2")
	e.virshOK("resume", lvC.name)
	if lver := e.heldBy(res, cpid); lver != "3" {
		t.Fatalf("want lvc to hold lvres at lver 3, got %s", lver)
	}
	e.heldBy(e.diskRes("c.img"), cpid)
}

// virsh destroy ends QEMU; the daemon releases its leases.
func lvStepDestroy(t *testing.T, e *lvEnv) {
	cpid := e.pid(lvC.name)
	e.virshOK("destroy", lvC.name)
	e.waitGone(cpid)
	e.notHeld(e.leaseRes("lvres"))
	e.notHeld(e.diskRes("c.img"))
	e.leaderFree(e.leaseRes("lvres"), "3")
	// The lease is usable again.
	dpid := e.createOK(lvD)
	if lver := e.heldBy(e.leaseRes("lvres"), dpid); lver != "4" {
		t.Fatalf("want lvres at lver 4, got %s", lver)
	}
	e.virshOK("destroy", lvD.name)
	e.waitGone(dpid)
}

// kill -9 of QEMU: the daemon sees the pid die and releases its leases;
// a new guest on the same image starts.
func lvStepKill9(t *testing.T, e *lvEnv) {
	pid := e.pid(lvA.name)
	res := e.diskRes("a.img")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitGone(pid)
	e.notHeld(res)
	e.leaderFree(res, "2")
	e.waitFor("libvirt notices lva died", func() (bool, string) {
		s := e.domState(lvA.name)
		return strings.HasPrefix(s, "error"), s
	})
	pid = e.createOK(lvA)
	if lver := e.heldBy(res, pid); lver != "3" {
		t.Fatalf("want a.img lease at lver 3 after restart, got %s", lver)
	}
}

// attach-disk takes the new disk's lease before QEMU opens it; a disk
// whose lease another guest holds is refused; detach releases.
func lvStepHotplug(t *testing.T, e *lvEnv) {
	epid := e.createOK(lvE)
	hp := e.diskRes("hp.img")
	e.virshOK("attach-disk", lvE.name, e.disk("hp.img"), "sda", "--targetbus", "usb")
	if lver := e.heldBy(hp, epid); lver != "1" {
		t.Fatalf("want hp.img lease at lver 1, got %s", lver)
	}
	// a.img is in use by lva: the daemon refuses the lease.
	out, err := e.virsh("attach-disk", lvE.name, e.disk("a.img"), "sdb", "--targetbus", "usb")
	if err == nil {
		t.Fatalf("attached a.img held by lva:\n%s", out)
	}
	if !strings.Contains(out, "Failed to acquire lock: File exists") {
		t.Fatalf("want 'Failed to acquire lock: File exists', got:\n%s", out)
	}
	e.heldBy(e.diskRes("a.img"), e.pid(lvA.name))
	e.virshOK("detach-disk", lvE.name, "sda")
	e.waitFor("hp.img lease released after detach", func() (bool, string) {
		st := e.status()
		return len(st.holders(hp)) == 0, st.raw
	})
	e.leaderFree(hp, "1")
	e.heldBy(e.diskRes("e.img"), epid)
}

// Two guests on one <shareable/> image both run, each holding the disk's
// lease in shared mode.
func lvStepShareable(t *testing.T, e *lvEnv) {
	f := lvGuest{name: "lvf", disks: []string{"sh.img"}, shareable: true}
	g := lvGuest{name: "lvg", disks: []string{"sh.img"}, shareable: true}
	fpid := e.createOK(f)
	gpid := e.createOK(g)
	res := e.diskRes("sh.img")
	st := e.status()
	hs := st.holders(res)
	pids := map[int]string{}
	for _, h := range hs {
		pids[h.pid] = h.lver
	}
	if len(hs) != 2 || pids[fpid] != "SH" || pids[gpid] != "SH" {
		t.Fatalf("want %s held SH by %d and %d, status:\n%s", res, fpid, gpid, st.raw)
	}
	// An exclusive user of the image is refused (by QEMU's image lock).
	if out, err := e.create(lvGuest{name: "lvx", disks: []string{"sh.img"}}); err == nil {
		t.Fatalf("exclusive guest on shared sh.img started:\n%s", out)
	}
	e.virshOK("destroy", f.name)
	e.waitGone(fpid)
	if hs := e.status().holders(res); len(hs) != 1 || hs[0].pid != gpid {
		t.Fatalf("want sh.img held by %d only after lvf destroyed:\n%s", gpid, e.status().raw)
	}
	e.virshOK("destroy", g.name)
	e.waitGone(gpid)
	e.notHeld(res)
}

// libvirtd stops and starts again while guests run: the guests and their
// leases are untouched, and libvirt still manages their leases afterwards.
func lvStepRestart(t *testing.T, e *lvEnv) {
	apid, epid := e.pid(lvA.name), e.pid(lvE.name)
	before := e.status()
	e.stopLibvirtd()
	if !lvAlive(apid) || !lvAlive(epid) {
		t.Fatal("guests died with libvirtd")
	}
	mid := e.status()
	e.startLibvirtd()
	after := e.status()
	for _, st := range []lvStatus{mid, after} {
		if len(st.held) != len(before.held) {
			t.Fatalf("leases changed across libvirtd restart: before\n%s\nnow\n%s", before.raw, st.raw)
		}
		for _, h := range before.held {
			if hs := st.holders(h.res); len(hs) != 1 || hs[0] != h {
				t.Fatalf("lease %s changed across libvirtd restart: before\n%s\nnow\n%s", h.res, before.raw, st.raw)
			}
		}
	}
	out := e.virshOK("list")
	for _, n := range []string{lvA.name, lvE.name} {
		if !strings.Contains(out, n) || e.domState(n) != "running (booted)" && e.domState(n) != "running (unpaused)" {
			t.Fatalf("guest %s not running after restart: %q\n%s", n, e.domState(n), out)
		}
	}
	res := e.diskRes("a.img")
	lver := e.heldBy(res, apid)
	e.virshOK("suspend", lvA.name)
	e.notHeld(res)
	e.virshOK("resume", lvA.name)
	n, _ := strconv.Atoi(lver)
	if got := e.heldBy(res, apid); got != strconv.Itoa(n+1) {
		t.Fatalf("want lver %d after suspend/resume, got %s", n+1, got)
	}
}

// virt-sanlock-cleanup deletes the lease files of disks not in use (it
// acquires each with `sanlock client command -r ... -c rm`) and leaves
// those held by running guests.
func lvStepCleanup(t *testing.T, e *lvEnv) {
	inUse := map[string]bool{}
	st := e.status()
	for _, h := range st.held {
		inUse[strings.Split(h.res, ":")[1]] = true
	}
	ents, err := os.ReadDir(e.leases)
	if err != nil {
		t.Fatal(err)
	}
	var free []string
	for _, d := range ents {
		if d.Name() != lvLockspace && !inUse[d.Name()] {
			free = append(free, d.Name())
		}
	}
	if len(free) == 0 || len(inUse) == 0 {
		t.Fatalf("want both free and held leases before cleanup, held %v free %v", inUse, free)
	}
	out, err := e.run("/usr/sbin/virt-sanlock-cleanup")
	if err != nil {
		t.Fatalf("virt-sanlock-cleanup: %v\n%s", err, out)
	}
	t.Logf("virt-sanlock-cleanup output:\n| %s", strings.ReplaceAll(strings.TrimRight(out, "\n"), "\n", "\n| "))
	// Each lease gets "Cleanup: RES " then PASS or FAIL; `sanlock client
	// command` may print its register/acquire lines in between (ours
	// flushes them before exec, 3.8.5 loses them when the exec succeeds).
	result := map[string]string{}
	for _, blk := range strings.Split(out, "Cleanup: ")[1:] {
		f := strings.Fields(blk)
		if len(f) >= 2 {
			result[f[0]] = f[len(f)-1]
		}
	}
	for _, k := range free {
		if r := result[e.leaseRes(k)]; r != "PASS" {
			t.Errorf("want PASS for free lease %s, got %q", k, r)
		}
		if _, err := os.Stat(e.leases + "/" + k); !os.IsNotExist(err) {
			t.Errorf("free lease file %s not removed: %v", k, err)
		}
	}
	for k := range inUse {
		if r := result[e.leaseRes(k)]; r != "FAIL" {
			t.Errorf("want FAIL for held lease %s, got %q", k, r)
		}
		if _, err := os.Stat(e.leases + "/" + k); err != nil {
			t.Errorf("held lease file %s removed: %v", k, err)
		}
	}
	if len(result) != len(free)+len(inUse) {
		t.Errorf("want %d leases in the output, got %d", len(free)+len(inUse), len(result))
	}
	after := e.status()
	if len(after.held) != len(st.held) {
		t.Fatalf("held leases changed by cleanup: before\n%s\nafter\n%s", st.raw, after.raw)
	}
	if _, err := os.Stat(e.leases + "/" + lvLockspace); err != nil {
		t.Fatalf("lockspace file removed: %v", err)
	}
}

// A guest with <on_lockfailure>poweroff</on_lockfailure> makes libvirt
// register its helper as the killpath. When the lockspace fails (its
// delta lease is overwritten), the daemon runs the killpath, the helper
// destroys the guest through libvirtd, and guests without a killpath are
// killed by signal. The lockspace goes away. (Destructive: the last step.)
func lvStepKillpath(t *testing.T, e *lvEnv) {
	k := lvGuest{name: "lvk", disks: []string{"k.img"}, lockFailure: "poweroff"}
	e.writeFile(k.name+".xml", e.guestXML(k))
	e.virshOK("define", e.path(k.name+".xml"))
	e.virshOK("start", k.name)
	kpid := e.pid(k.name)
	e.heldBy(e.diskRes("k.img"), kpid)
	if d := e.statusD(kpid); d["restricted"] != "1" {
		t.Fatalf("want restricted=1 for the killpath guest, got %v", d)
	}
	apid, epid := e.pid(lvA.name), e.pid(lvE.name)
	e.snapshotD("lvk started")

	// Zero host 1's delta lease sector: the next renewal finds it corrupt.
	f, err := os.OpenFile(e.leases+"/"+lvLockspace, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := lvAligned(512)
	_, err = f.WriteAt(buf, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{kpid, apid, epid} {
		e.waitGone(p)
	}
	e.waitFor("lockspace removed after failure", func() (bool, string) {
		st := e.status()
		return !st.hasSpace(lvLockspace), st.raw
	})
	// The helper destroyed lvk through libvirt (a kill by signal would
	// show as crashed).
	e.waitFor("lvk shut off by the killpath helper", func() (bool, string) {
		s := e.domState(k.name)
		return s == "shut off (destroyed)", s
	})
}

// lvAligned returns a zeroed n-byte buffer aligned for O_DIRECT.
func lvAligned(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)
	if off == 4096 {
		off = 0
	}
	return b[off : off+n]
}
