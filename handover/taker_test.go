package handover

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeOld plays the old image by hand inside the test process, to check
// how the new image's side (Receive, Ready, TookOver) handles an old image
// that misbehaves or goes away. The inherited fds are placed at fixed
// numbers as the start of a new image would place them.
type fakeOld struct {
	t     *testing.T
	ctl   *ctlConn
	state *State
	blob  []byte
	extra *os.File // a client socket the old image "accepted" after the snapshot
}

const fakeFD0 = 600 // ctl, state memfd, then the fd table

func newFakeOld(t *testing.T, mutate func(*State)) *fakeOld {
	dir := t.TempDir()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lf, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	t.Cleanup(func() { unix.Close(pair[1]) })
	extra, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(extra[1]) })

	s := &State{NumFDs: 2, BootID: BootID(), TakenMono: MonoNow(), PidFile: PidFile{FD: -1},
		Listener: Listener{FD: 0},
		Clients: []Client{{FD: 1, PeerPid: int32(os.Getpid()), PeerUID: uint32(os.Getuid()),
			PeerGID: uint32(os.Getgid()), Pid: -1}}}
	if mutate != nil {
		mutate(s)
	}
	blob, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memfdBlob(blob)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	cp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(cp[0]), "ctl")
	ctl, err := newCtlConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	lfd, err := dupFile(lf)
	if err != nil {
		t.Fatal(err)
	}
	for i, fd := range []int{cp[1], int(mem.Fd()), lfd, pair[0]} {
		if err := unix.Dup3(fd, fakeFD0+i, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(cp[1])
	unix.Close(lfd)
	t.Cleanup(func() {
		for i := range 4 {
			unix.Close(fakeFD0 + i) // already closed when Receive took them: EBADF
		}
	})
	t.Setenv(EnvVar, env{ctl: fakeFD0, state: fakeFD0 + 1, fd0: fakeFD0 + 2, nfd: 2}.String())
	return &fakeOld{t: t, ctl: ctl, state: s, blob: blob, extra: os.NewFile(uintptr(extra[0]), "extra")}
}

// expect reads a message of type typ (Errorf, not Fatalf: it runs on the
// fake old image's goroutine). The deadline only turns a hang into a
// failure.
func (o *fakeOld) expect(typ uint32) *message {
	o.t.Helper()
	m, err := o.ctl.recv(context.Background(), time.Now().Add(30*time.Second))
	if err != nil || m.typ != typ {
		o.t.Errorf("fake old: got %v, %v; want %s", m, err, msgName(typ))
		return &message{}
	}
	return m
}

// commit sends the final state with the extra client, as a real COMMIT.
func (o *fakeOld) commit(mangle func(body []byte)) {
	o.t.Helper()
	s := *o.state
	s.NumFDs = 3
	s.Clients = append(s.Clients, Client{FD: 2, Slot: 1, PeerPid: int32(os.Getpid()), PeerUID: uint32(os.Getuid()),
		PeerGID: uint32(os.Getgid()), Pid: -1})
	blob, err := Encode(&s)
	if err != nil {
		o.t.Error(err)
		return
	}
	mem, err := memfdBlob(blob)
	if err != nil {
		o.t.Error(err)
		return
	}
	defer mem.Close()
	if err := o.ctl.send(msgFDs, countBody(1), []int{int(o.extra.Fd())}); err != nil {
		o.t.Error(err)
		return
	}
	body := commitBody(1, sha256.Sum256(blob))
	if mangle != nil {
		mangle(body)
	}
	if err := o.ctl.send(msgCommit, body, []int{int(mem.Fd())}); err != nil {
		o.t.Error(err)
		return
	}
}

func TestTakerAgainstFakeOld(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		mutate   func(*State)
		old      func(o *fakeOld) // after READY
		wantRecv string           // Receive fails with this
		wantRdy  string           // Ready fails with this
		wantTook string           // TookOver fails with this ("" = succeeds)
	}{
		{name: "takes over on GO", old: func(o *fakeOld) { o.commit(nil); o.expect(msgTookOver); o.ctl.send(msgGo, nil, nil) }},
		{name: "takes over when the old image exits after TOOK_OVER", old: func(o *fakeOld) {
			o.commit(nil)
			o.expect(msgTookOver)
			o.ctl.Close()
		}},
		{name: "takes over when the old image exits right after COMMIT", old: func(o *fakeOld) { o.commit(nil); o.ctl.Close() }},
		{name: "abort", old: func(o *fakeOld) { o.ctl.send(msgAbort, []byte("quiesce failed"), nil) },
			wantRdy: "aborted the handover: quiesce failed"},
		{name: "old gone before commit", old: func(o *fakeOld) { o.ctl.Close() }, wantRdy: "control channel closed"},
		{name: "garbage", old: func(o *fakeOld) { o.ctl.c.Write([]byte("junk")) }, wantRdy: "malformed control message"},
		{name: "unexpected type", old: func(o *fakeOld) { o.ctl.send(msgGo, nil, nil) }, wantRdy: "GO while waiting for COMMIT"},
		{name: "FDS count", old: func(o *fakeOld) { o.ctl.send(msgFDs, countBody(2), []int{int(o.extra.Fd())}) },
			wantRdy: "FDS with 1 fds"},
		{name: "COMMIT digest", old: func(o *fakeOld) { o.commit(func(b []byte) { b[10] ^= 1 }) }, wantRdy: "checksum mismatch"},
		{name: "COMMIT fd count", old: func(o *fakeOld) { o.commit(func(b []byte) { b[0] = 2 }) }, wantRdy: "announces 2 new fds"},
		{name: "garbage instead of GO", old: func(o *fakeOld) {
			o.commit(nil)
			o.expect(msgTookOver)
			o.ctl.send(msgReady, nil, nil)
		}, wantTook: "READY while waiting for GO"},
		{name: "peer credentials", mutate: func(s *State) { s.Clients[0].PeerPid++ }, wantRecv: "SO_PEERCRED"},
		{name: "not a listener", mutate: func(s *State) { s.Listener.FD, s.Clients[0].FD = 1, 0 }, wantRecv: "listener: not listening"},
		{name: "other boot", mutate: func(s *State) { s.BootID = "00000000-0000-0000-0000-000000000000" }, wantRecv: "boot"},
		{name: "fd count", mutate: func(s *State) { s.NumFDs = 3 }, wantRecv: "refers to 3 fds, received 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newFakeOld(t, tc.mutate)
			tk, err := Receive()
			if tc.wantRecv != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantRecv) {
					t.Fatalf("Receive = %v, want %q", err, tc.wantRecv)
				}
				m := o.expect(msgError)
				if !strings.Contains(string(m.body), tc.wantRecv) {
					t.Fatalf("ERROR %q, want %q", m.body, tc.wantRecv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if os.Getenv(EnvVar) != "" {
				t.Fatal("Receive left the environment variable")
			}
			if !eqState(tk.Snapshot(), o.state) {
				t.Fatal("snapshot differs")
			}
			done := make(chan struct{})
			defer func() { <-done }()
			go func() {
				defer close(done)
				m := o.expect(msgReady)
				r, err := decodeReady(m.body)
				if err != nil || r.digest != sha256.Sum256(o.blob) || r.proto != ProtocolVersion {
					t.Errorf("READY %+v, %v", r, err)
					return
				}
				tc.old(o)
			}()
			ad, err := tk.Ready(ctx)
			if tc.wantRdy != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantRdy) {
					t.Fatalf("Ready = %v, want %q", err, tc.wantRdy)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer closeFiles(ad.Files)
			if len(ad.Files) != 3 || ad.State.NumFDs != 3 || ad.Files[2] == nil {
				t.Fatalf("adopted %d files, state %d fds", len(ad.Files), ad.State.NumFDs)
			}
			for i, f := range ad.Files {
				if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
					t.Fatalf("adopted fd %d: flags %#x, %v; want close-on-exec", i, fl, err)
				}
			}
			err = tk.TookOver(ctx)
			if tc.wantTook == "" && err != nil || tc.wantTook != "" && (err == nil || !strings.Contains(err.Error(), tc.wantTook)) {
				t.Fatalf("TookOver = %v, want %q", err, tc.wantTook)
			}
		})
	}
}

func eqState(a, b *State) bool { return fmt.Sprintf("%+v", *a) == fmt.Sprintf("%+v", *b) }

func TestTakerContext(t *testing.T) {
	o := newFakeOld(t, nil)
	tk, err := Receive()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { o.expect(msgReady); cancel() }()
	if _, err := tk.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready = %v, want context.Canceled", err)
	}
	if m := o.expect(msgError); !strings.Contains(string(m.body), "context canceled") {
		t.Fatalf("ERROR %q", m.body)
	}
}
