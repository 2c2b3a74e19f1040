package handover

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests re-execute the test binary as the new image: with
// childModeEnv set, TestMain runs childMain instead of the tests.
const childModeEnv = "GOSANLOCK_HANDOVER_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

// childMain is the new image. Modes: "serve" takes over and answers
// "new PID NAME LINE" to each line ("quit" exits); the others fail at a
// chosen point.
func childMain(mode string) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "child %d: "+format+"\n", append([]any{os.Getpid()}, args...)...)
	}
	switch mode {
	case "old":
		return oldMain()
	case "exit":
		return 3
	case "garbage":
		e, err := parseEnv(os.Getenv(EnvVar))
		if err != nil {
			logf("%v", err)
			return 2
		}
		unix.Write(e.ctl, []byte("this is not a handover message"))
		select {} // killed by the old image
	case "hang":
		select {}
	}
	ctx := context.Background()
	t, err := Receive()
	if err != nil {
		logf("receive: %v", err)
		return 2
	}
	if mode == "readybadproto" {
		r := readyBody{proto: 99, minFmt: 1, maxFmt: 1, digest: t.digest}
		t.ctl.send(msgReady, r.encode(), nil)
		select {}
	}
	ad, err := t.Ready(ctx)
	if err != nil {
		logf("ready: %v", err)
		return 2
	}
	switch mode {
	case "failcommit":
		t.Fail(errors.New("cannot build the daemon from this state"))
		return 4
	case "exitcommit":
		return 5
	case "hangcommit":
		select {}
	}
	s := ad.State
	l, err := net.FileListener(ad.Files[s.Listener.FD])
	if err != nil {
		t.Fail(err)
		return 2
	}
	type conn struct {
		c    net.Conn
		name string
	}
	var conns []conn
	for _, c := range s.Clients {
		nc, err := net.FileConn(ad.Files[c.FD])
		if err != nil {
			t.Fail(err)
			return 2
		}
		conns = append(conns, conn{nc, c.Name})
	}
	for i, f := range ad.Files {
		if f != nil && i != s.PidFile.FD {
			f.Close()
		}
	}
	var pidFile *os.File
	if s.PidFile.FD != -1 {
		pidFile = ad.Files[s.PidFile.FD]
	}
	if err := t.TookOver(ctx); err != nil {
		logf("took over: %v", err)
		return 2
	}
	if pidFile != nil {
		pidFile.Truncate(0)
		pidFile.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	}
	serve := func(c net.Conn, name string) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				c.Close()
				return
			}
			line = strings.TrimSuffix(line, "\n")
			if line == "quit" {
				os.Exit(0)
			}
			fmt.Fprintf(c, "new %d %s %s\n", os.Getpid(), name, line)
		}
	}
	for _, c := range conns {
		go serve(c.c, c.name)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			logf("accept: %v", err)
			return 2
		}
		go serve(c, "-")
	}
}

// oldMain is an old image in its own process: it serves on
// $HANDOVER_TEST_DIR/s and, on SIGUSR1, hands over to this binary in the
// mode $HANDOVER_TEST_NEW. It prints "ready", then "handed over to PID"
// and exits at once (as the daemon must), or "failed: ERROR" and serves on.
func oldMain() int {
	dir := os.Getenv("HANDOVER_TEST_DIR")
	srv, err := listenOld(dir, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "old: "+f+"\n", a...) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "old: %v\n", err)
		return 2
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	fmt.Println("ready")
	exe, _ := os.Executable()
	for range usr1 {
		res, err := Handover(context.Background(), Spec{
			Path:   exe,
			Args:   []string{exe, "-test.run=^$"},
			Env:    append(os.Environ(), childModeEnv+"="+os.Getenv("HANDOVER_TEST_NEW")),
			Stderr: os.Stderr,
		}, srv)
		if err != nil {
			fmt.Printf("failed: %v\n", err)
			continue
		}
		fmt.Printf("handed over to %d\n", res.Pid)
		return 0
	}
	return 0
}

// oldServer is the serving image in the test process: a line server that
// answers "old NAME LINE", and the Source for Handover.
type oldServer struct {
	errorf  func(format string, args ...any)
	l       *net.UnixListener
	pidFile *os.File // locked with an OFD lock, as the daemon's

	mu       sync.Mutex
	conns    map[*net.UnixConn]*oldConn
	next     int
	quiesced bool
	resumed  int
	wg       sync.WaitGroup
	files    []*os.File // from File(), closed at the end

	beforeQuiesce func()
}

type oldConn struct {
	c    *net.UnixConn
	r    *bufio.Reader
	name string
	slot int
}

func newOldServer(t testing.TB) (*oldServer, string) {
	dir, err := os.MkdirTemp("", "ho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	s, err := listenOld(dir, t.Errorf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s, path
}

// listenOld starts an oldServer on dir/s with the pid file dir/pid.
func listenOld(dir string, errorf func(string, ...any)) (*oldServer, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	pf, err := os.OpenFile(filepath.Join(dir, "pid"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := ofdLock(pf); err != nil {
		return nil, err
	}
	pf.Truncate(0)
	fmt.Fprintf(pf, "%d\n", os.Getpid())
	s := &oldServer{errorf: errorf, l: l, pidFile: pf, conns: map[*net.UnixConn]*oldConn{}}
	s.start()
	return s, nil
}

func (s *oldServer) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, oc := range s.conns {
		oc.c.SetReadDeadline(time.Time{})
		s.wg.Add(1)
		go s.serve(oc)
	}
	s.l.SetDeadline(time.Time{})
	s.wg.Add(1)
	go s.acceptLoop()
}

func (s *oldServer) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quiesced
}

func (s *oldServer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if !s.stopped() {
				s.errorf("old accept: %v", err)
			}
			return
		}
		s.mu.Lock()
		s.next++
		oc := &oldConn{c: c, r: bufio.NewReader(c), name: fmt.Sprintf("c%d", s.next), slot: s.next}
		s.conns[c] = oc
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(oc)
	}
}

func (s *oldServer) serve(oc *oldConn) {
	defer s.wg.Done()
	for {
		line, err := oc.r.ReadString('\n')
		if err != nil {
			if !s.stopped() {
				s.mu.Lock()
				delete(s.conns, oc.c)
				s.mu.Unlock()
				oc.c.Close()
			}
			return
		}
		if line == "bye\n" {
			s.mu.Lock()
			delete(s.conns, oc.c)
			s.mu.Unlock()
			fmt.Fprintf(oc.c, "bye\n")
			oc.c.Close()
			return
		}
		fmt.Fprintf(oc.c, "old %s %s", oc.name, line)
	}
}

// quiesce stops accepting and reading (without closing anything).
func (s *oldServer) quiesce() {
	s.mu.Lock()
	s.quiesced = true
	past := time.Unix(1, 0)
	s.l.SetDeadline(past)
	for _, oc := range s.conns {
		oc.c.SetReadDeadline(past)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *oldServer) stop() {
	s.quiesce()
	s.l.Close()
	for c := range s.conns {
		c.Close()
	}
	for _, f := range s.files {
		f.Close()
	}
	s.pidFile.Close()
}

func ofdLock(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

func (s *oldServer) snapshot() (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := s.l.File()
	if err != nil {
		return Snapshot{}, err
	}
	s.files = append(s.files, lf)
	st := &State{OldPid: os.Getpid(), BootID: BootID(), TakenMono: MonoNow(), TakenWall: time.Now().UnixNano(),
		Listener: Listener{FD: 0, Path: s.l.Addr().String()}}
	st.PidFile = PidFile{FD: 1, Path: s.pidFile.Name()}
	files := []*os.File{lf, s.pidFile}
	for _, oc := range s.conns {
		f, err := oc.c.File()
		if err != nil {
			return Snapshot{}, err
		}
		s.files = append(s.files, f)
		pid, uid, gid, err := PeerCred(f)
		if err != nil {
			return Snapshot{}, err
		}
		st.Clients = append(st.Clients, Client{FD: len(files), Slot: oc.slot, PeerPid: pid, PeerUID: uid, PeerGID: gid, Pid: -1, Name: oc.name})
		files = append(files, f)
	}
	st.NumFDs = len(files)
	return Snapshot{State: st, Files: files}, nil
}

func (s *oldServer) Snapshot() (Snapshot, error) { return s.snapshot() }

func (s *oldServer) Quiesce() (Snapshot, error) {
	if s.beforeQuiesce != nil {
		s.beforeQuiesce()
	}
	s.quiesce()
	return s.snapshot()
}

func (s *oldServer) Resume() {
	s.mu.Lock()
	s.quiesced = false
	s.resumed++
	s.mu.Unlock()
	s.start()
}

// client is a test client connection.
type client struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, path string) *client {
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// ask sends a line and returns the answer. The deadline only turns a
// hang into a failure; nothing depends on how fast the answer comes.
func (c *client) ask(line string) string {
	c.t.Helper()
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c.c, "%s\n", line); err != nil {
		c.t.Fatalf("send %q: %v", line, err)
	}
	a, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("answer to %q: %v", line, err)
	}
	return strings.TrimSuffix(a, "\n")
}

func (c *client) expect(line, want string) {
	c.t.Helper()
	if got := c.ask(line); got != want {
		c.t.Fatalf("answer to %q = %q, want %q", line, got, want)
	}
}

func childSpec(t testing.TB, mode string) Spec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.CreateTemp("", "ho-child-stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(errf.Name())
		if len(b) > 0 {
			t.Logf("new image stderr:\n%s", b)
		}
		errf.Close()
		os.Remove(errf.Name())
	})
	return Spec{
		Path:            exe,
		Args:            []string{exe, "-test.run=^$"},
		Env:             append(os.Environ(), childModeEnv+"="+mode),
		Stderr:          errf,
		ReadyTimeout:    30 * time.Second,
		TakeoverTimeout: 30 * time.Second,
	}
}

func TestHandover(t *testing.T) {
	srv, path := newOldServer(t)
	c1 := dial(t, path)
	c1.expect("a", "old c1 a")
	c0 := dial(t, path)
	c0.expect("a", "old c2 a")
	// c2 connects after the snapshot, just before the quiesce: its fd
	// travels with COMMIT instead of being inherited at start. c0 goes
	// away in between: its fd was inherited but is not in the final
	// state, and the new image must close it.
	var c2 *client
	srv.beforeQuiesce = func() {
		c2 = dial(t, path)
		c2.expect("b", "old c3 b")
		c0.expect("bye", "bye")
	}

	res, err := Handover(context.Background(), childSpec(t, "serve"), srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(res.Pid, syscall.SIGKILL) })
	if srv.resumed != 0 {
		t.Fatalf("Resume called %d times after a handover", srv.resumed)
	}
	// The old image goes away as the daemon would: it closes its fds.
	srv.stop()

	c1.expect("x", fmt.Sprintf("new %d c1 x", res.Pid))
	c2.expect("y", fmt.Sprintf("new %d c3 y", res.Pid))
	// Every copy of c0's connection is closed: it reads EOF (a leaked
	// copy in the new image would make this read wait for the deadline).
	c0.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := c0.r.ReadString('\n'); err != io.EOF {
		t.Fatalf("closed client read %q, %v; want EOF", b, err)
	}
	c3 := dial(t, path)
	c3.expect("z", fmt.Sprintf("new %d - z", res.Pid))
	c1.expect("x2", fmt.Sprintf("new %d c1 x2", res.Pid))

	// The pid file lock went with its fd: it is still held (by the new
	// image alone now), and the new image wrote its pid.
	b, err := os.ReadFile(srv.pidFile.Name())
	if err != nil || string(b) != fmt.Sprintf("%d\n", res.Pid) {
		t.Fatalf("pid file %q, %v; want the new pid %d", b, err, res.Pid)
	}
	f, err := os.OpenFile(srv.pidFile.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ofdLock(f); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("pid file lock: %v, want EAGAIN (held by the new image)", err)
	}
}

// TestHandoverFails: a new image that fails anywhere before it has taken
// over leaves the old one serving everything, and the error says why.
func TestHandoverFails(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		spec     func(*Spec)
		stage    Stage
		why      string
		resumed  int
		exitCode int // -1: killed
		// orKilled: the new image exits by itself after its ERROR, but
		// may be killed first.
		orKilled bool
	}{
		{mode: "exit", stage: StageReady, why: "closed the control channel before READY", exitCode: 3},
		{mode: "garbage", stage: StageReady, why: "malformed control message", exitCode: -1},
		{mode: "hang", spec: func(s *Spec) { s.ReadyTimeout = 200 * time.Millisecond }, stage: StageReady, why: "timed out", exitCode: -1},
		{mode: "serve", spec: func(s *Spec) { s.formatVersion = 99 }, stage: StageReady, why: "unsupported handover format version 99", exitCode: 2, orKilled: true},
		{mode: "serve", spec: func(s *Spec) { s.mangle = func(b []byte) { b[len(b)-2] ^= 1 } }, stage: StageReady, why: "checksum mismatch", exitCode: 2, orKilled: true},
		{mode: "serve", spec: func(s *Spec) { s.Path = "/nonexistent/sanlock" }, stage: StageStart, why: "no such file"},
		{mode: "readybadproto", stage: StageReady, why: "control protocol 99", exitCode: -1},
		{mode: "failcommit", stage: StageCommit, why: "cannot build the daemon", resumed: 1, exitCode: 4, orKilled: true},
		{mode: "exitcommit", stage: StageCommit, why: "closed the control channel before TOOK_OVER", resumed: 1, exitCode: 5},
		{mode: "hangcommit", spec: func(s *Spec) { s.TakeoverTimeout = 200 * time.Millisecond }, stage: StageCommit, why: "timed out", resumed: 1, exitCode: -1},
	} {
		name := tc.mode
		if tc.spec != nil {
			name += "/" + tc.why
		}
		t.Run(name, func(t *testing.T) {
			srv, path := newOldServer(t)
			c1 := dial(t, path)
			c1.expect("a", "old c1 a")
			spec := childSpec(t, tc.mode)
			if tc.spec != nil {
				tc.spec(&spec)
			}
			res, err := Handover(context.Background(), spec, srv)
			if err == nil {
				syscall.Kill(res.Pid, syscall.SIGKILL)
				t.Fatal("handover succeeded")
			}
			var he *Error
			if !errors.As(err, &he) || he.Stage != tc.stage || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v; want stage %s, containing %q", err, tc.stage, tc.why)
			}
			t.Logf("%v", err)
			if srv.resumed != tc.resumed {
				t.Fatalf("Resume called %d times, want %d", srv.resumed, tc.resumed)
			}
			wantStatus := ""
			switch {
			case tc.stage == StageStart:
			case tc.exitCode < 0:
				wantStatus = "signal: killed"
			default:
				wantStatus = fmt.Sprintf("exit status %d", tc.exitCode)
			}
			if he.Status != wantStatus && !(tc.orKilled && he.Status == "signal: killed") {
				t.Fatalf("new image status %q, want %q", he.Status, wantStatus)
			}
			// Everything still served by the old image: the connection,
			// and the listener.
			c1.expect("b", "old c1 b")
			c2 := dial(t, path)
			c2.expect("c", "old c2 c")
			c1.expect("d", "old c1 d")
			if b, err := os.ReadFile(srv.pidFile.Name()); err != nil || string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
				t.Fatalf("pid file %q, %v; want the old pid", b, err)
			}
		})
	}
}

// TestHandoverQuiesceError: the daemon refusing to quiesce aborts the
// handover and resumes it.
func TestHandoverQuiesceError(t *testing.T) {
	srv, path := newOldServer(t)
	c1 := dial(t, path)
	c1.expect("a", "old c1 a")
	src := &failingQuiesce{srv}
	_, err := Handover(context.Background(), childSpec(t, "serve"), src)
	var he *Error
	// The new image is killed, unless the ABORT before the kill already
	// made it exit.
	if !errors.As(err, &he) || he.Stage != StageQuiesce || (he.Status != "signal: killed" && he.Status != "exit status 2") {
		t.Fatalf("error %v", err)
	}
	if srv.resumed != 1 {
		t.Fatalf("resumed %d", srv.resumed)
	}
	c1.expect("b", "old c1 b")
}

type failingQuiesce struct{ *oldServer }

func (f *failingQuiesce) Quiesce() (Snapshot, error) {
	f.oldServer.quiesce()
	return Snapshot{}, errors.New("a request is stuck")
}

func TestReceiveWithoutHandover(t *testing.T) {
	if Inherited() {
		t.Skip("running inside a handover")
	}
	if _, err := Receive(); err == nil || !strings.Contains(err.Error(), "not started by a handover") {
		t.Fatalf("Receive = %v", err)
	}
}

func TestParseEnv(t *testing.T) {
	good := env{ctl: 3, state: 4, fd0: 5, nfd: 2}
	if e, err := parseEnv(good.String()); err != nil || e != good {
		t.Fatalf("parseEnv(%q) = %v, %v", good.String(), e, err)
	}
	for _, bad := range []string{"", "v1", "v2 ctl=3 state=4 fds=5:2", "v1 ctl=x state=4 fds=5:2", "v1 ctl=3 state=4 fds=5",
		"v1 ctl=3 state=4 fds=5:-1", "v1 ctl=3 state=4 fds=5:99999999", "v1 state=3 ctl=4 fds=5:2"} {
		if _, err := parseEnv(bad); err == nil {
			t.Errorf("parseEnv(%q) accepted", bad)
		}
	}
}

// BenchmarkHandover measures a whole handover to a fresh new image with
// one client, and the part of it during which nothing is served (from
// Quiesce to Handover returning) as quiesced-ms.
func BenchmarkHandover(b *testing.B) {
	var quiesced time.Duration
	for b.Loop() {
		b.StopTimer()
		srv, path := newOldServer(b)
		c1 := dial(b, path)
		var q0 time.Time
		srv.beforeQuiesce = func() { q0 = time.Now() }
		spec := childSpec(b, "serve")
		b.StartTimer()
		res, err := Handover(context.Background(), spec, srv)
		if err != nil {
			b.Fatal(err)
		}
		quiesced += time.Since(q0)
		b.StopTimer()
		srv.stop()
		c1.expect("x", fmt.Sprintf("new %d c1 x", res.Pid))
		fmt.Fprintf(c1.c, "quit\n")
		b.StartTimer()
	}
	b.ReportMetric(float64(quiesced.Microseconds())/1000/float64(b.N), "quiesced-ms/op")
}

// TestHandoverCancelled: a cancelled context ends the handover like any
// other failure.
func TestHandoverCancelled(t *testing.T) {
	srv, path := newOldServer(t)
	c1 := dial(t, path)
	c1.expect("a", "old c1 a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Handover(ctx, childSpec(t, "hang"), srv)
	var he *Error
	if !errors.As(err, &he) || !errors.Is(err, context.Canceled) || he.Stage != StageReady || he.Status != "signal: killed" {
		t.Fatalf("error %v", err)
	}
	c1.expect("b", "old c1 b")
}

// TestHandoverBetweenProcesses: the old image is a process of its own
// that exits after the handover, as the daemon will; its client keeps
// its connection, now served by the new image, which outlives its parent.
// A failed handover first (the new image exits at start) leaves the old
// process serving.
func TestHandoverBetweenProcesses(t *testing.T) {
	dir, err := os.MkdirTemp("", "ho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	t.Cleanup(func() {
		if b, _ := os.ReadFile(errf.Name()); len(b) > 0 {
			t.Logf("stderr of the images:\n%s", b)
		}
	})
	start := func(newMode string) (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childModeEnv+"=old", "HANDOVER_TEST_DIR="+dir, "HANDOVER_TEST_NEW="+newMode)
		cmd.Stderr = errf
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("old image says %q, %v", line, err)
		}
		return cmd, r
	}
	path := filepath.Join(dir, "s")

	// The old process does not wait for the new image it hands over to,
	// so it serves with a new image that exits at start first: the old
	// one must stay.
	old, out := start("exit")
	c1 := dial(t, path)
	c1.expect("a", "old c1 a")
	old.Process.Signal(syscall.SIGUSR1)
	if line, _ := out.ReadString('\n'); !strings.HasPrefix(line, "failed: ") || !strings.Contains(line, "exit status 3") {
		t.Fatalf("old image after a failed handover: %q", line)
	}
	c1.expect("b", "old c1 b")
	old.Process.Kill()
	old.Wait()

	os.Remove(path)
	old, out = start("serve")
	c1 = dial(t, path)
	c1.expect("a", "old c1 a")
	old.Process.Signal(syscall.SIGUSR1)
	line, _ := out.ReadString('\n')
	var pid int
	if _, err := fmt.Sscanf(line, "handed over to %d\n", &pid); err != nil {
		t.Fatalf("old image after the handover: %q", line)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := old.Wait(); err != nil {
		t.Fatalf("old image: %v", err)
	}
	c1.expect("x", fmt.Sprintf("new %d c1 x", pid))
	c2 := dial(t, path)
	c2.expect("y", fmt.Sprintf("new %d - y", pid))
	if b, err := os.ReadFile(filepath.Join(dir, "pid")); err != nil || string(b) != fmt.Sprintf("%d\n", pid) {
		t.Fatalf("pid file %q, %v; want %d", b, err, pid)
	}
	fmt.Fprintf(c2.c, "quit\n")
}

// TestHandoverBusy: a second handover while one runs fails at once and
// does not touch the first.
func TestHandoverBusy(t *testing.T) {
	srv, path := newOldServer(t)
	c1 := dial(t, path)
	var second error
	srv.beforeQuiesce = func() { _, second = Handover(context.Background(), childSpec(t, "serve"), srv) }
	res, err := Handover(context.Background(), childSpec(t, "serve"), srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(res.Pid, syscall.SIGKILL) })
	var he *Error
	if !errors.As(second, &he) || !errors.Is(second, ErrBusy) {
		t.Fatalf("second handover: %v", second)
	}
	srv.stop()
	c1.expect("x", fmt.Sprintf("new %d c1 x", res.Pid))
}
