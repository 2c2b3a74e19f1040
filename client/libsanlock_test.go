package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/wire"
)

// Differential test: the same calls made through python3-sanlock (the real
// libsanlock) and through our Client, against a recording fake daemon built
// from this package's ReadRequest and Reply encoders, must send identical
// request bytes. It also checks that libsanlock parses our replies.

const pyPath = "/usr/bin/python3"

type recorded struct {
	cmd Cmd
	raw []byte
}

type fakeDaemon struct {
	mu   sync.Mutex
	msgs []recorded
	errs []error
	ln   *net.UnixListener
}

func startFakeDaemon(t *testing.T, dir string) *fakeDaemon {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SockName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	fd := &fakeDaemon{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go fd.serve(c)
		}
	}()
	return fd
}

func (fd *fakeDaemon) serve(c *net.UnixConn) {
	defer c.Close()
	for {
		var raw bytes.Buffer
		q, err := wire.ReadRequest(io.TeeReader(c, &raw), 0)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fd.mu.Lock()
				fd.errs = append(fd.errs, err)
				fd.mu.Unlock()
			}
			return
		}
		fd.mu.Lock()
		fd.msgs = append(fd.msgs, recorded{q.Header.Cmd, raw.Bytes()})
		fd.mu.Unlock()
		cmd := q.Header.Cmd
		if !HasReply(cmd) {
			if cmd == CmdShutdown {
				return
			}
			continue
		}
		p := &Reply{Header: wire.ResultReply(q.Header, 0)}
		res := Resource{LockspaceName: "LS", Name: "R1", LVer: 3, Flags: ResAlign1M | ResSector512, NumDisks: 1}
		switch cmd {
		case CmdReadLockspace:
			p.Lockspace = &Lockspace{Name: "LS", HostID: 1, Flags: ResAlign1M | ResSector512, Disk: q.Lockspace.Disk}
			p.Header.Data2 = 10
		case CmdReadResource:
			p.Resource = &res
		case CmdReadResourceOwners:
			p.Resource = &res
			p.Hosts = []Host{{HostID: 1, Generation: 2, Timestamp: 3}}
		case CmdInquire:
			p.Data = []byte("LS:R1:/var/tmp/p:1048576:SH")
			p.Header.Data2 = 1
		case CmdGetLockspaces:
			p.Lockspaces = []Lockspace{{Name: "LS", HostID: 1, Disk: Disk{Path: "/var/tmp/p"}}}
		case CmdGetHosts:
			p.Hosts = []Host{{HostID: 1, Generation: 2, Timestamp: 3, IOTimeout: 10, Flags: HostLive}}
		case CmdGetLVB:
			p.Data = make([]byte, 512)
			copy(p.Data, "hello")
		}
		b, err := p.MarshalBinary(cmd)
		if err == nil {
			_, err = c.Write(b)
		}
		if err != nil {
			return
		}
		switch cmd {
		case CmdGetLockspaces, CmdGetHosts, CmdRegEvent, CmdEndEvent, CmdStatus, CmdLogDump, CmdHostStatus, CmdRenewal, CmdSetConfig:
			return // I-close commands (the event fd is kept by a real daemon; closing is fine here)
		}
	}
}

func (fd *fakeDaemon) take() ([]recorded, []error) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	m, e := fd.msgs, fd.errs
	fd.msgs, fd.errs = nil, nil
	return m, e
}

const pyScript = `
import sanlock, sys
P = "/var/tmp/p"
D = [(P, 1048576)]
fd = sanlock.register()
sanlock.add_lockspace(b"LS", 1, P, 0, iotimeout=5, wait=False)
sanlock.inq_lockspace(b"LS", 1, P, 0, wait=True)
sanlock.rem_lockspace(b"LS", 1, P, 0, wait=False, unused=True)
sanlock.write_lockspace(b"LS", P, offset=0, max_hosts=0, iotimeout=7, align=2097152, sector=512)
r = sanlock.read_lockspace(P, 0)
assert r["lockspace"] == b"LS" and r["iotimeout"] == 10, r
sanlock.write_resource(b"LS", b"R1", D, max_hosts=0, num_hosts=3, clear=True)
r = sanlock.read_resource(P, 1048576)
assert r["lockspace"] == b"LS" and r["resource"] == b"R1" and r["version"] == 3, r
sanlock.acquire(b"LS", b"R1", D, slkfd=fd, shared=True)
r = sanlock.inquire(slkfd=fd)
assert len(r) == 1 and r[0]["flags"] & sanlock.RES_SHARED and r[0]["disks"] == [(P, 1048576)], r
sanlock.release(b"LS", b"R1", D, slkfd=fd)
sanlock.acquire(b"LS", b"R1", D, pid=4242, lvb=True, version=9)
sanlock.request(b"LS", b"R1", D, action=sanlock.REQ_FORCE, version=3)
sanlock.set_event(b"LS", 2, 3, 4, data=5, flags=0)
r = sanlock.get_lockspaces()
assert len(r) == 1 and r[0]["lockspace"] == b"LS", r
r = sanlock.get_hosts(b"LS", 0)
assert len(r) == 1 and r[0]["host_id"] == 1 and r[0]["flags"] == 3, r
sanlock.killpath("/bin/k", ["a"], slkfd=fd)
sanlock.set_lvb(b"LS", b"R1", D, b"hello")
r = sanlock.get_lvb(b"LS", b"R1", D, 8)
assert r == b"hello\x00\x00\x00", r
r = sanlock.read_resource_owners(b"LS", b"R1", D)
assert len(r) == 1 and r[0]["host_id"] == 1, r
print("ok")
`

// goCalls makes the same calls with our client.
func goCalls(t *testing.T, c *Client) {
	const P = "/var/tmp/p"
	ls := &Lockspace{Name: "LS", HostID: 1, Disk: Disk{Path: P}}
	d := []Disk{{Path: P, Offset: mib}}
	res := Resource{LockspaceName: "LS", Name: "R1", Disks: d}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	reg, err := c.Register(context.Background())
	must(err)
	defer reg.Close()
	must(c.AddLockspace(context.Background(), ls, AddAsync, 5))
	must(c.InqLockspace(context.Background(), ls, InqWait))
	must(c.RemLockspace(context.Background(), ls, RemAsync|RemUnused))
	must(c.WriteLockspace(context.Background(), &Lockspace{Name: "LS", Flags: ResAlign2M | ResSector512, Disk: Disk{Path: P}}, 0, 7))
	_, _, err = c.ReadLockspace(context.Background(), &Lockspace{Flags: ResAlign1M | ResSector512, Disk: Disk{Path: P}})
	must(err)
	wr := res
	wr.Flags = ResAlign1M | ResSector512
	must(c.WriteResource(context.Background(), &wr, 0, 3, WriteClear))
	_, err = c.ReadResource(context.Background(), &Resource{Flags: ResAlign1M | ResSector512, Disks: d})
	must(err)
	sh := res
	sh.Flags = ResShared
	must(reg.Acquire(context.Background(), []Resource{sh}, 0, nil))
	_, err = reg.Inquire(context.Background())
	must(err)
	_, err = reg.Release(context.Background(), []Resource{res}, 0)
	must(err)
	lv := res
	lv.Flags, lv.LVer = ResLVer, 9
	must(c.Acquire(context.Background(), 4242, []Resource{lv}, AcquireLVB, nil))
	rq := res
	rq.Flags, rq.LVer = ResLVer, 3
	must(c.Request(context.Background(), &rq, 0, ReqForce))
	must(c.SetEvent(context.Background(), "LS", HostEvent{HostID: 2, Generation: 3, Event: 4, Data: 5}, 0))
	_, err = c.GetLockspaces(context.Background())
	must(err)
	_, err = c.GetHosts(context.Background(), "LS", 0)
	must(err)
	must(reg.Killpath(context.Background(), "/bin/k", "a", 0))
	must(c.SetLVB(context.Background(), &res, []byte("hello")))
	_, err = c.GetLVB(context.Background(), &res, 8)
	must(err)
	ro := res
	ro.Flags = ResAlign1M | ResSector512
	_, _, err = c.ReadResourceOwners(context.Background(), &ro)
	must(err)
}

func TestRequestsMatchLibsanlock(t *testing.T) {
	testenv.NeedBinary(t, pyPath)
	if err := exec.Command(pyPath, "-c", "import sanlock").Run(); err != nil {
		testenv.Missing(t, "python3-sanlock not installed")
	}
	dir, err := os.MkdirTemp("", "gslkpy")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fd := startFakeDaemon(t, dir)

	py := exec.Command(pyPath, "-c", pyScript)
	py.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+dir)
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	pyMsgs, errs := fd.take()
	if len(errs) > 0 {
		t.Fatalf("fake daemon errors from libsanlock requests: %v", errs)
	}

	c, _ := Dial(dir)
	goCalls(t, c)
	goMsgs, errs := fd.take()
	if len(errs) > 0 {
		t.Fatalf("fake daemon errors from Go requests: %v", errs)
	}
	// REGISTER has no reply, so its arrival may interleave with the next
	// call: compare per command, in call order.
	byCmd := func(m []recorded) { sort.SliceStable(m, func(i, j int) bool { return m[i].cmd < m[j].cmd }) }
	byCmd(pyMsgs)
	byCmd(goMsgs)
	if len(pyMsgs) != len(goMsgs) {
		t.Fatalf("python sent %d messages, Go %d", len(pyMsgs), len(goMsgs))
	}
	t.Logf("compared %d requests", len(pyMsgs))
	for i := range pyMsgs {
		p, g := pyMsgs[i], goMsgs[i]
		if p.cmd != g.cmd {
			t.Errorf("msg %d: python %s, Go %s", i, p.cmd, g.cmd)
			continue
		}
		if !bytes.Equal(p.raw, g.raw) {
			n := min(len(p.raw), len(g.raw))
			off := n
			for j := 0; j < n; j++ {
				if p.raw[j] != g.raw[j] {
					off = j
					break
				}
			}
			t.Errorf("msg %d %s: bytes differ at offset %d (python %d bytes, Go %d)", i, p.cmd, off, len(p.raw), len(g.raw))
		}
	}
}
