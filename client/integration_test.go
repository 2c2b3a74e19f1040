package client

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

const realSanlock = "/usr/sbin/sanlock"

// startRealDaemon starts the C daemon with a private run dir and returns a
// client for it. The daemon is killed by pid in t.Cleanup.
func startRealDaemon(t *testing.T) (*Client, <-chan struct{}) {
	t.Helper()
	testenv.NeedBinary(t, realSanlock)
	testenv.NeedRoot(t, "sanlock 3.8.5 runs as a real daemon")
	// A short path: sun_path is limited to 108 bytes.
	runDir, err := os.MkdirTemp("", "gslk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })

	cmd := exec.Command(realSanlock, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1")
	cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+runDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("daemon output:\n%s", lastLines(stderr.String(), 40))
		}
	})

	c, err := Dial(runDir)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 30 * time.Second
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, err := c.Version(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("daemon did not come up: %v", err)
		}
		select {
		case <-exited:
			t.Fatalf("daemon exited early:\n%s", stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return c, exited
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func wantCode(t *testing.T, what string, err error, code int) {
	t.Helper()
	if ErrorCode(err) != code {
		t.Errorf("%s: got %v, want code %d", what, err, code)
	}
}

func TestAgainstRealDaemon(t *testing.T) {
	c, exited := startRealDaemon(t)
	start := time.Now()

	dir, err := os.MkdirTemp("/var/tmp", "gosanlock-client-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	leases := filepath.Join(dir, "leases")
	if err := os.WriteFile(leases, make([]byte, 8*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(realSanlock, "direct", "init", "-s", "LS:0:"+leases+":0").CombinedOutput(); err != nil {
		t.Fatalf("direct init: %v\n%s", err, out)
	}

	// Version.
	v, proto, err := c.Version(context.Background())
	if err != nil || v != DaemonVersion || proto != ProtoVersion {
		t.Fatalf("Version = %#x %#x %v", v, proto, err)
	}

	// ReadLockspace of the lockspace written by direct init.
	got, iot, err := c.ReadLockspace(context.Background(), &Lockspace{Disk: Disk{Path: leases}})
	if err != nil {
		t.Fatalf("ReadLockspace: %v", err)
	}
	if got.Name != "LS" || got.HostID != 1 || iot != 10 || got.Flags != ResAlign1M|ResSector512 {
		t.Errorf("ReadLockspace = %+v io_timeout %d", got, iot)
	}

	// Rewrite LS with io_timeout 1 through WRITE_LOCKSPACE: the add delay
	// depends on the io_timeout stored in the lease (docs/timing.md "Mixed io_timeouts").
	lsw := &Lockspace{Name: "LS", Flags: ResAlign1M | ResSector512, Disk: Disk{Path: leases}}
	if err := c.WriteLockspace(context.Background(), lsw, 0, 1); err != nil {
		t.Fatalf("WriteLockspace: %v", err)
	}
	got, iot, err = c.ReadLockspace(context.Background(), &Lockspace{Disk: Disk{Path: leases}})
	if err != nil || got.Name != "LS" || iot != 1 {
		t.Errorf("ReadLockspace after write = %+v %d %v", got, iot, err)
	}
	// Reading an uninitialised area: no lease.
	_, _, err = c.ReadLockspace(context.Background(), &Lockspace{Disk: Disk{Path: leases, Offset: 6 * mib}})
	wantCode(t, "ReadLockspace(empty)", err, SanlkLeaderMagic)

	// Lockspace not joined yet.
	ls := &Lockspace{Name: "LS", HostID: 1, Disk: Disk{Path: leases}}
	wantCode(t, "InqLockspace(before)", c.InqLockspace(context.Background(), ls, 0), RvENOENT)

	// AddLockspace with io_timeout 1 in header.data.
	t0 := time.Now()
	if err := c.AddLockspace(context.Background(), ls, 0, 1); err != nil {
		t.Fatalf("AddLockspace: %v", err)
	}
	t.Logf("add_lockspace took %v", time.Since(t0))
	wantCode(t, "AddLockspace(again)", c.AddLockspace(context.Background(), ls, 0, 1), RvEEXIST)
	if err := c.InqLockspace(context.Background(), ls, 0); err != nil {
		t.Errorf("InqLockspace: %v", err)
	}

	lss, err := c.GetLockspaces(context.Background())
	if err != nil || len(lss) != 1 || lss[0].Name != "LS" || lss[0].HostID != 1 ||
		lss[0].Disk.Path != leases || lss[0].Flags != 0 {
		t.Errorf("GetLockspaces = %+v %v", lss, err)
	}

	// Hosts: retry while the daemon has no host data yet (-EAGAIN).
	var hosts []Host
	for i := 0; i < 50; i++ {
		hosts, err = c.GetHosts(context.Background(), "LS", 0)
		if ErrorCode(err) != RvEAGAIN {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || len(hosts) != 1 || hosts[0].HostID != 1 || hosts[0].Generation == 0 ||
		hosts[0].StateName() != "LIVE" {
		t.Errorf("GetHosts = %+v %v", hosts, err)
	}
	_, err = c.GetHosts(context.Background(), "NOPE", 0)
	wantCode(t, "GetHosts(unknown)", err, RvENOENT)

	hrecs, err := c.HostStatus(context.Background(), "LS")
	if err != nil || len(hrecs) < 1 || hrecs[0].Type != StateHost || hrecs[0].Data32 != 1 ||
		!strings.Contains(hrecs[0].Text, "owner_id=1") {
		t.Errorf("HostStatus = %+v %v", hrecs, err)
	}
	_, err = c.HostStatus(context.Background(), "NOPE")
	wantCode(t, "HostStatus(unknown)", err, RvENOSPC)

	ren, err := c.Renewal(context.Background(), "LS")
	if err != nil {
		t.Errorf("Renewal: %v", err)
	}
	for _, r := range ren {
		if r.Type != StateRenewal || !strings.HasPrefix(r.Text, "timestamp=") {
			t.Errorf("renewal record %+v", r)
		}
	}

	// Resource lease at 2 MiB.
	res := Resource{LockspaceName: "LS", Name: "R1", Disks: []Disk{{Path: leases, Offset: 2 * mib}}}
	if err := c.WriteResource(context.Background(), &res, 0, 0, 0); err != nil {
		t.Fatalf("WriteResource: %v", err)
	}
	rr, err := c.ReadResource(context.Background(), &Resource{Disks: []Disk{{Path: leases, Offset: 2 * mib}}})
	if err != nil || rr.LockspaceName != "LS" || rr.Name != "R1" || rr.LVer != 0 {
		t.Errorf("ReadResource = %+v %v", rr, err)
	}

	reg, err := c.Register(context.Background())
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	defer reg.Close()
	if err := reg.Acquire(context.Background(), []Resource{res}, AcquireLVB, &Options{OwnerName: "gotest"}); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	inq, err := reg.Inquire(context.Background())
	state, n := inq.State, inq.Count
	wantState := "LS:R1:" + EscapePath(leases) + ":2097152:1"
	if err != nil || n != 1 || state != wantState {
		t.Errorf("Inquire = %q %d %v, want %q", state, n, err, wantState)
	}
	if parsed, err := ParseState(state); err != nil || len(parsed) != 1 || parsed[0].Disks[0].Path != leases {
		t.Errorf("ParseState(%q) = %+v %v", state, parsed, err)
	}
	// The same through data2 = pid on a fresh connection.
	inq, err = c.Inquire(context.Background(), os.Getpid())
	state2, n2 := inq.State, inq.Count
	if err != nil || n2 != 1 || state2 != state {
		t.Errorf("Inquire(pid) = %q %d %v", state2, n2, err)
	}
	_, err = c.Inquire(context.Background(), 1)
	wantCode(t, "Inquire(pid 1)", err, RvESRCH)

	// Convert to shared and back; converting to the current mode is -EALREADY.
	shr := res
	shr.Flags = ResShared
	if err := reg.Convert(context.Background(), &shr, 0); err != nil {
		t.Errorf("Convert(SH): %v", err)
	}
	if inq, err := reg.Inquire(context.Background()); err != nil || !strings.HasSuffix(inq.State, ":SH") {
		t.Errorf("Inquire after convert = %q %v", inq.State, err)
	}
	wantCode(t, "Convert(SH again)", reg.Convert(context.Background(), &shr, 0), RvEALREADY)
	if err := c.Convert(context.Background(), os.Getpid(), &res, 0); err != nil {
		t.Errorf("Convert(EX) by pid: %v", err)
	}
	if err := c.ExamineResource(context.Background(), &res); err != nil {
		t.Errorf("ExamineResource: %v", err)
	}
	if err := c.SetLVB(context.Background(), &res, []byte("hello")); err != nil {
		t.Errorf("SetLVB: %v", err)
	}
	lvb, err := c.GetLVB(context.Background(), &res, 8)
	if err != nil || string(lvb) != "hello\x00\x00\x00" {
		t.Errorf("GetLVB = %q %v", lvb, err)
	}
	owner, owners, err := c.ReadResourceOwners(context.Background(), &res)
	ro := res
	ro.Flags = ResAlign1M | ResSector512
	owner2, _, err2 := c.ReadResourceOwners(context.Background(), &ro)
	// Observed on 3.8.5: READ_RESOURCE reports the detected align/sector
	// flags, READ_RESOURCE_OWNERS only echoes those of the request.
	if rr.Flags != ResAlign1M|ResSector512 || owner.Flags != 0 || err2 != nil || owner2.Flags != ResAlign1M|ResSector512 {
		t.Errorf("flags: read_resource %#x, owners %#x (request 0), %#x (request 0x110) %v", rr.Flags, owner.Flags, owner2.Flags, err2)
	}
	if err != nil || owner.LVer != 2 || len(owners) != 1 || owners[0].HostID != 1 {
		t.Errorf("ReadResourceOwners = %+v %+v %v", owner, owners, err)
	}

	recs, err := c.Status(context.Background(), 0)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	var sawDaemon, sawLS, sawRes, sawMe bool
	for _, r := range recs {
		switch r.Type {
		case StateDaemon:
			sawDaemon = strings.Contains(r.Text, "version_str=3.8.5")
		case StateClient:
			if int32(r.Data32) == int32(os.Getpid()) && r.Name == "gotest" {
				sawMe = true
			}
		case StateLockspace:
			sawLS = r.Name == "LS" && r.Lockspace != nil && r.Lockspace.Disk.Path == leases &&
				r.Lockspace.Disk.Pad1 == 512 && strings.Contains(r.Text, "list=spaces")
		case StateResource:
			sawRes = r.Name == "R1" && r.Resource != nil && len(r.Resource.Disks) == 1 &&
				r.Data64 == 2 && int32(r.Data32) == int32(os.Getpid()) &&
				ResourceString(r.Resource) == "LS:R1:"+EscapePath(leases)+":2097152:0"
		}
	}
	if !sawDaemon || !sawLS || !sawRes || !sawMe {
		t.Errorf("Status: daemon %v lockspace %v resource %v client %v; records %+v", sawDaemon, sawLS, sawRes, sawMe, recs)
	}
	// Detail level 1: only the daemon record.
	if recs, err := c.Status(context.Background(), StateDaemon); err != nil || len(recs) != 1 || recs[0].Type != StateDaemon {
		t.Errorf("Status(1) = %d records %v", len(recs), err)
	}

	wantCode(t, "RemLockspace(unused)", c.RemLockspace(context.Background(), ls, RemUnused), RvEBUSY)
	if _, err := reg.Release(context.Background(), []Resource{res}, 0); err != nil {
		t.Errorf("Release: %v", err)
	}
	if inq, err := reg.Inquire(context.Background()); err != nil || inq.Count != 0 {
		t.Errorf("Inquire after release: %d %v", inq.Count, err)
	}
	_, err = reg.Release(context.Background(), []Resource{res}, 0)
	wantCode(t, "Release(not held)", err, RvEPERM)

	// Misc admin commands.
	if a, err := c.Align(context.Background(), &Disk{Path: leases}); err != nil || a != mib {
		t.Errorf("Align = %d %v", a, err)
	}
	if err := c.SetConfig(context.Background(), "LS", ConfigUsed); err != nil {
		t.Errorf("SetConfig: %v", err)
	}
	wantCode(t, "SetConfig(0)", c.SetConfig(context.Background(), "LS", 0), RvEINVAL)
	wantCode(t, "SetConfig(unknown)", c.SetConfig(context.Background(), "NOPE", ConfigUsed), RvENOENT)
	// USED blocks lockspace removal; undo it.
	if err := c.SetConfig(context.Background(), "LS", ConfigUnused); err != nil {
		t.Errorf("SetConfig(unused): %v", err)
	}
	ev, err := c.RegEvent(context.Background(), "LS")
	if err != nil {
		t.Fatalf("RegEvent: %v", err)
	}
	if _, err := ev.GetEvent(); ErrorCode(err) != RvEAGAIN {
		t.Errorf("GetEvent = %v, want EAGAIN", err)
	}
	if err := c.SetEvent(context.Background(), "LS", HostEvent{HostID: 1, Event: 5, Data: 7}, 0); err != nil {
		t.Errorf("SetEvent: %v", err)
	}
	wantCode(t, "SetEvent(again)", c.SetEvent(context.Background(), "LS", HostEvent{HostID: 1, Event: 6, Data: 7}, 0), RvEBUSY)
	if err := c.EndEvent(context.Background(), ev); err != nil {
		t.Errorf("EndEvent: %v", err)
	}
	if log, err := c.LogDump(context.Background()); err != nil || !bytes.Contains(log, []byte("add_lockspace")) {
		t.Errorf("LogDump: %d bytes %v", len(log), err)
	}

	wantCode(t, "ShutdownWait(busy)", c.ShutdownWait(context.Background(), false), RvEBUSY)
	if err := c.RemLockspace(context.Background(), ls, 0); err != nil {
		t.Errorf("RemLockspace: %v", err)
	}
	wantCode(t, "InqLockspace(after)", c.InqLockspace(context.Background(), ls, 0), RvENOENT)
	wantCode(t, "RemLockspace(again)", c.RemLockspace(context.Background(), ls, 0), RvENOENT)
	reg.Close()

	if err := c.ShutdownWait(context.Background(), false); err != nil {
		t.Errorf("ShutdownWait: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not exit after ShutdownWait")
	}
	// The socket file is left behind (docs/protocol.md "Transport"): connect is refused.
	if _, _, err := c.Version(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Version after shutdown: %v", err)
	}
	t.Logf("total %v", time.Since(start))
}
