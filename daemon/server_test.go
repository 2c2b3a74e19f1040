package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

func TestVersion(t *testing.T) {
	td := startDaemon(t, nil)
	td.mustVersion()

	// VERSION is answered whatever the protocol version, and the
	// connection stays open (docs/protocol.md "Header checks", "Commands" #28).
	c := td.dial()
	for _, v := range []uint32{0, 1, 0x00020000} {
		_, err := c.Write(testutil.RawHeader(wire.Magic, v, wire.CmdVersion, 7, 32, 9, 5, 6))
		require.NoError(t, err)
		p, err := wire.ReadReply(c, wire.CmdVersion)
		require.NoError(t, err)
		want := wire.VersionReply(wire.DaemonVersion)
		assert.Equal(t, want, p.Header)
	}
}

func TestStartupFilesAndLog(t *testing.T) {
	td := startDaemon(t, func(c *Config, _ *Deps) { c.OurHostName = "hostA" })
	pid, err := os.ReadFile(filepath.Join(td.dir, PidFileName))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+"\n", string(pid))
	st, err := os.Stat(filepath.Join(td.dir, PidFileName))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	st, err = os.Stat(td.srv.SockPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o660), st.Mode().Perm())
	assert.NotZero(t, st.Mode()&os.ModeSocket)

	dump := string(td.srv.LogDump()) + "\n"
	assert.Contains(t, dump, fmt.Sprintf("]: Using non-standard run directory '%s'\n", td.dir))
	assert.Contains(t, dump, "]: Running in unprivileged mode\n")
	assert.Contains(t, dump, fmt.Sprintf("]: sanlock daemon started 3.8.5 host hostA (%s)\n", Nodename()))
	// Warnings reach the log file at the default priority 4.
	file, err := os.ReadFile(filepath.Join(td.dir, "sanlock.log"))
	require.NoError(t, err)
	assert.Contains(t, string(file), "sanlock daemon started 3.8.5 host hostA")
	assert.Equal(t, 1, td.logs.FilterMessage("Running in unprivileged mode").Len())

	td.srv.Stop()
	// The socket and pid files are left behind (docs/protocol.md "Transport").
	assert.FileExists(t, td.srv.SockPath())
	assert.FileExists(t, filepath.Join(td.dir, PidFileName))
}

func TestRunDirCreated(t *testing.T) {
	parent := testutil.ShortTempDir(t)
	cfg := testutil.DaemonConfig(parent)
	cfg.RunDir = filepath.Join(parent, "run")
	cfg.LogFile = ""
	s := New(cfg, Deps{})
	require.NoError(t, s.Start())
	defer s.Stop()
	st, err := os.Stat(cfg.RunDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o775), st.Mode().Perm())
}

func TestSingleInstance(t *testing.T) {
	td := startDaemon(t, nil)
	cfg := testutil.DaemonConfig(td.dir)
	s2 := New(cfg, Deps{})
	err := s2.Start()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrLocked))
	want := fmt.Sprintf("lockfile setlk error %s/sanlock.pid: Resource temporarily unavailable", td.dir)
	assert.Equal(t, want, err.Error())
	assert.True(t, strings.HasSuffix(string(s2.LogDump()), "]: "+want))
	s2.Stop()
	<-s2.Done()
	// The first daemon is unaffected, and its lock is still held.
	td.mustVersion()
	err = New(cfg, Deps{}).Start()
	assert.True(t, errors.Is(err, ErrLocked))
}

func TestRegisterAndDeath(t *testing.T) {
	td := startDaemon(t, nil)
	reg, err := td.cl.Register(context.Background())
	require.NoError(t, err)

	// REGISTER has no reply: wait until the daemon has processed it.
	me := strconv.Itoa(os.Getpid())
	var mine *wire.StateRecord
	require.Eventually(t, func() bool {
		recs, err := td.cl.Status(context.Background(), 0)
		if err != nil {
			return false
		}
		for i, r := range recs {
			if r.Type == wire.StateClient && int32(r.Data32) == int32(os.Getpid()) {
				mine = &recs[i]
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "registered client missing from status")
	assert.Equal(t, me, mine.Name)
	assert.Contains(t, mine.Text, " pid="+me+" ")

	// Commands on the registered connection still work.
	require.NoError(t, reg.Restrict(context.Background(), 0))

	require.NoError(t, reg.Close())
	select {
	case ci := <-td.deaths:
		assert.Equal(t, os.Getpid(), ci.Pid)
		assert.GreaterOrEqual(t, ci.Slot, 2)
	case <-time.After(5 * time.Second):
		t.Fatal("death hook not run")
	}
	assert.Contains(t, string(td.srv.LogDump()), "client_pid_dead ")
}

func TestStatusRecords(t *testing.T) {
	td := startDaemon(t, func(c *Config, _ *Deps) { c.OurHostName = "hostS" })
	recs, err := td.cl.Status(context.Background(), 0)
	require.NoError(t, err)
	var lines []string
	for _, r := range recs {
		switch r.Type {
		case wire.StateDaemon:
			lines = append(lines, "daemon "+r.Name)
			assert.True(t, strings.HasPrefix(r.Text, "our_host_name=hostS use_watchdog=0 "), r.Text)
			assert.Contains(t, r.Text, " debug_cmds=0xfffffffffe06ffff ")
			assert.True(t, strings.HasSuffix(r.Text, " version_str=3.8.5 version_num=3.8.5 version_hex=03080500 smproto_hex=00000001 "+
				"create_delta_34=0 create_delta_40=0 create_paxos_64=0"), r.Text)
		case wire.StateClient:
			lines = append(lines, fmt.Sprintf("p %d %s", int32(r.Data32), r.Name))
			rest := " pid=-1 flags=0 restricted=0 cmd_active=0 cmd_last=0 pid_dead=0 kill_count=0 kill_last=0 suspend=0 need_free=0"
			switch r.Name {
			case "helper":
				assert.Equal(t, "ci=0 fd=-1"+rest, r.Text)
			case "listener":
				assert.Equal(t, fmt.Sprintf("ci=1 fd=%d", td.srv.lnFD)+rest, r.Text)
			}
		default:
			t.Errorf("unexpected record type %d", r.Type)
		}
	}
	assert.Equal(t, []string{"daemon hostS", "p -1 helper", "p -1 listener", "p -1 status"}, lines)

	recs, err = td.cl.Status(context.Background(), wire.StateDaemon)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, uint32(wire.StateDaemon), recs[0].Type)
}

func TestLogDump(t *testing.T) {
	td := startDaemon(t, nil)
	td.mustVersion()
	b, err := td.cl.LogDump(context.Background())
	require.NoError(t, err)
	s := string(b)
	assert.Contains(t, s, "sanlock daemon started 3.8.5 host ")
	assert.Contains(t, s, "cmd_version ")
	assert.False(t, strings.HasSuffix(s, "\n"), "no newline after the last line")
	for _, line := range strings.Split(s, "\n") {
		// YYYY-MM-DD HH:MM:SS <mono> [<tid>]: text
		var d, tm, rest string
		var mono uint64
		n, _ := fmt.Sscanf(line, "%s %s %d %s", &d, &tm, &mono, &rest)
		assert.Equal(t, 4, n, line)
		assert.Len(t, d, 10, line)
		assert.Len(t, tm, 8, line)
		assert.Equal(t, "["+strconv.Itoa(os.Getpid())+"]:", rest, line)
	}
}

func TestShutdown(t *testing.T) {
	st, ls := memLockspace(t)
	td := startDaemon(t, func(_ *Config, d *Deps) { d.Manager = st })
	td.cl.Timeout = 30 * time.Second
	require.NoError(t, td.cl.AddLockspace(context.Background(), ls, 0, 1))

	// Refused while a lockspace exists: SHUTDOWN is silent, SHUTDOWN_WAIT
	// gets -EBUSY (docs/cli.md "shutdown").
	require.NoError(t, td.cl.Shutdown(context.Background(), false))
	err := td.cl.ShutdownWait(context.Background(), false)
	assert.Equal(t, rescode.RvEBUSY, client.ErrorCode(err))
	td.mustVersion()
	require.Eventually(t, func() bool {
		return td.logs.FilterMessage("ignore shutdown, lockspace exists").Len() == 2
	}, 5*time.Second, 5*time.Millisecond)

	// Forced wait: the manager drops lockspaces, the final header comes at
	// exit (all zero but magic, version, length).
	c := td.dial()
	_, err = c.Write(testutil.RawHeader(wire.Magic, 1, wire.CmdShutdownWait, 0, 32, 0, 1, 0))
	require.NoError(t, err)
	b := testutil.ReadAllTimeout(t, c, 10*time.Second)
	want := wire.ShutdownWaitFinalReply()
	assert.Equal(t, want.Bytes(), b)
	<-td.srv.Done()
	assert.Equal(t, 0, td.srv.Manager().Lockspaces.Count(), "the forced shutdown dropped the lockspace")
}

func TestShutdownNoLockspaces(t *testing.T) {
	td := startDaemon(t, nil)
	require.NoError(t, td.cl.Shutdown(context.Background(), false))
	select {
	case <-td.srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not exit")
	}
	_, _, err := td.cl.Version(context.Background())
	assert.Equal(t, rescode.RvECONNREFUSED, client.ErrorCode(err))
}

func TestRunSignals(t *testing.T) {
	dir := testutil.ShortTempDir(t)
	cfg := testutil.DaemonConfig(dir)
	st, ls := memLockspace(t)
	errc := make(chan error, 1)
	go func() { errc <- Run(context.Background(), cfg, Deps{Manager: st}) }()
	cl, err := client.Dial(dir)
	require.NoError(t, err)
	cl.Timeout = 30 * time.Second
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err == nil }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, cl.AddLockspace(context.Background(), ls, 0, 1))

	// SIGTERM is ignored while a lockspace exists.
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.Eventually(t, func() bool {
		b, err := cl.LogDump(context.Background())
		return err == nil && strings.Contains(string(b), "ignore shutdown, lockspace exists")
	}, 10*time.Second, 10*time.Millisecond)
	_, _, err = cl.Version(context.Background())
	require.NoError(t, err)

	require.NoError(t, cl.RemLockspace(context.Background(), ls, 0))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after SIGHUP")
	}
}

func TestRunContextAndStartError(t *testing.T) {
	td := startDaemon(t, nil)
	// A second Run on the same run dir fails at once with the lock error.
	err := Run(context.Background(), testutil.DaemonConfig(td.dir), Deps{})
	assert.True(t, errors.Is(err, ErrLocked), "%v", err)

	dir := testutil.ShortTempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, testutil.DaemonConfig(dir), Deps{}) }()
	cl, _ := client.Dial(dir)
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err == nil }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-errc)
}

func TestConcurrentHandlers(t *testing.T) {
	td := startDaemon(t, nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	td.srv.Handle(wire.CmdExamineLockspace, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return c.Reply(q, 0)
	})
	errc := make(chan error, 1)
	go func() { errc <- td.cl.ExamineLockspace(context.Background(), &wire.Lockspace{Name: "LS"}) }()
	<-entered
	// The slow handler blocks neither accept nor other connections.
	for range 20 {
		td.mustVersion()
	}
	recs, err := td.cl.Status(context.Background(), wire.StateClient)
	require.NoError(t, err)
	var names []string
	for _, r := range recs[1:] {
		names = append(names, r.Name)
	}
	assert.Contains(t, names, "cmd13")
	close(release)
	require.NoError(t, <-errc)
}

func TestHandlerPanicIsolated(t *testing.T) {
	td := startDaemon(t, nil)
	td.srv.Handle(wire.CmdExamineResource, ClassWork, func(context.Context, *Conn, *wire.Request) error {
		panic("boom")
	})
	err := td.cl.ExamineResource(context.Background(), &wire.Resource{LockspaceName: "LS", Name: "R"})
	require.Error(t, err)
	td.mustVersion()
	require.Equal(t, 1, td.logs.FilterMessage("connection panic").Len())
	td.logs.TakeAll() // the cleanup check is for unexpected panics
}

// A command the daemon knows but that has no handler is answered -ENOSYS
// and the connection serves on.
func TestUnimplementedCommand(t *testing.T) {
	td := startDaemon(t, nil)
	td.srv.hmu.Lock()
	delete(td.srv.handlers, wire.CmdSetConfig)
	td.srv.hmu.Unlock()
	err := td.cl.SetConfig(context.Background(), "LS", 1)
	assert.Equal(t, -38, client.ErrorCode(err))
	td.mustVersion()
}

func TestAlign(t *testing.T) {
	td := startDaemon(t, nil)
	n, err := td.cl.Align(context.Background(), &wire.Disk{})
	assert.Equal(t, rescode.RvENODEV, client.ErrorCode(err), "%d", n)
	_, err = td.cl.Align(context.Background(), &wire.Disk{Path: "/nonexistent/x"})
	assert.Equal(t, rescode.RvENODEV, client.ErrorCode(err))

	f, err := os.CreateTemp("/var/tmp", "gs-align")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	require.NoError(t, f.Truncate(1<<20))
	f.Close()
	n, err = td.cl.Align(context.Background(), &wire.Disk{Path: f.Name()})
	require.NoError(t, err)
	assert.Equal(t, 1<<20, n)
}

func TestStubLockspaceCommands(t *testing.T) {
	td := startDaemon(t, nil)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: "/x"}}
	assert.Equal(t, rescode.RvENOENT, client.ErrorCode(td.cl.InqLockspace(context.Background(), ls, 0)))
	assert.Equal(t, rescode.RvENOENT, client.ErrorCode(td.cl.RemLockspace(context.Background(), ls, 0)))
	list, err := td.cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = td.cl.HostStatus(context.Background(), "LS")
	assert.Equal(t, rescode.RvENOSPC, client.ErrorCode(err))
}

func TestConnectionTableFull(t *testing.T) {
	td := startDaemon(t, func(c *Config, _ *Deps) { c.MaxConns = 4 }) // slots 2 and 3
	a, b := td.dial(), td.dial()
	for _, c := range []*net.UnixConn{a, b} {
		_, err := c.Write(testutil.RawHeader(wire.Magic, 1, wire.CmdVersion, 0, 32, 0, 0, 0))
		require.NoError(t, err)
		_, err = wire.ReadReply(c, wire.CmdVersion)
		require.NoError(t, err)
	}
	// A third connection is closed at once.
	c := td.dial()
	_, _ = c.Write(testutil.RawHeader(wire.Magic, 1, wire.CmdVersion, 0, 32, 0, 0, 0))
	assert.Empty(t, testutil.ReadAllTimeout(t, c, 5*time.Second))
	// A freed slot is reused.
	a.Close()
	require.Eventually(t, func() bool { _, _, err := td.cl.Version(context.Background()); return err == nil }, 5*time.Second, 5*time.Millisecond)
}

// The host name without -e: "<product uuid>.<nodename>" when the product
// uuid has 16 to 48 bytes, else a random uuid, each logged as 3.9.5 logs
// it; a -e longer than 48 bytes is cut and logged. Not parallel: it
// points productUUIDPath elsewhere.
func TestHostNameSources(t *testing.T) {
	old := productUUIDPath
	t.Cleanup(func() { productUUIDPath = old })
	dir := t.TempDir()
	node := Nodename()
	for _, tc := range []struct {
		name, file, host, log string
	}{
		{"product uuid", "4C4C4544-0036-4710-8052-B8C04F4E4A32\n",
			config.TruncName("4C4C4544-0036-4710-8052-B8C04F4E4A32." + node), "our_host_name set from product_uuid: "},
		{"too short", "short\n", "", "Ignore product_uuid that is too short 5 (short)"},
		{"missing", "", "", "our_host_name set from uuid_generate: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			productUUIDPath = filepath.Join(dir, "none")
			if tc.file != "" {
				productUUIDPath = filepath.Join(dir, tc.name)
				require.NoError(t, os.WriteFile(productUUIDPath, []byte(tc.file), 0o400))
			}
			td := startDaemon(t, func(c *Config, _ *Deps) { c.OurHostName = "" })
			host := td.srv.HostName()
			if tc.host != "" {
				assert.Equal(t, tc.host, host)
			} else {
				assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.`, host)
			}
			assert.NotEmpty(t, td.logs.FilterMessageSnippet(tc.log).All(), "log %q", tc.log)
		})
	}
	productUUIDPath = filepath.Join(dir, "none")
	long := strings.Repeat("h", 60)
	td := startDaemon(t, func(c *Config, _ *Deps) { require.NoError(t, c.ApplyOption('e', long)) })
	assert.Equal(t, long[:48], td.srv.HostName())
	assert.Len(t, td.logs.FilterMessage("our_host_name shortened from config "+long+" len 60 to: "+long[:48]).All(), 1)
}

// The start line gains " io_timeout N watchdog_fire_timeout N" when either
// is not the default, as in 3.9.5.
func TestStartLineTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		io, fire int
		suffix   string
	}{
		{10, 60, ""}, {5, 60, " io_timeout 5 watchdog_fire_timeout 60"}, {10, 30, " io_timeout 10 watchdog_fire_timeout 30"},
	} {
		td := startDaemon(t, func(c *Config, _ *Deps) {
			c.OurHostName = "hostT"
			c.IOTimeout, c.WatchdogFireTimeout = tc.io, tc.fire
		})
		want := "sanlock daemon started " + Version + " host hostT (" + Nodename() + ")" + tc.suffix
		assert.Len(t, td.logs.FilterMessage(want).All(), 1, want)
	}
}
