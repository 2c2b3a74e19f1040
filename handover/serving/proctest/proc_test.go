package proctest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// TestReexecProcess runs our binary as a daemon and reexecs it on SIGUSR1
// reexecLoops times while this process stays registered on one connection
// and other clients come and go: after each one the pid file names a new
// pid, the registration (pid, connection) is intact and the daemon
// answers on the old and on new connections. A reexec into a binary that
// exits at start, or that sends garbage, leaves the serving image as it
// was.
func TestReexecProcess(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(reexecBinary(t))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "sanlock")
	require.NoError(t, os.WriteFile(bin, good, 0o755))
	dir := testutil.ShortTempDir(t)
	var stderr bytes.Buffer
	logf, err := os.Create(filepath.Join(dir, "daemon.out"))
	require.NoError(t, err)
	defer logf.Close()
	cmd := startBusy(t, func() *exec.Cmd {
		cmd := exec.Command(bin, "daemon", "-D", "-w", "0", "-l", "0")
		cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+dir, "SANLOCK_PRIVILEGED=0")
		cmd.Stdout, cmd.Stderr = logf, logf
		return cmd
	})
	go func() { _ = cmd.Wait() }()
	pidOf := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, daemon.PidFileName))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	defer func() {
		if p := pidOf(); p > 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.out"))
			t.Logf("daemon output:\n%s%s", b, stderr.String())
		}
	}()
	var cl *client.Client
	require.Eventually(t, func() bool {
		var err error
		cl, err = client.Dial(dir)
		if err != nil {
			return false
		}
		_, _, err = cl.Version(context.Background())
		return err == nil && pidOf() == cmd.Process.Pid
	}, 10*time.Second, 20*time.Millisecond)
	cl.Timeout = 10 * time.Second
	reg, err := cl.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()

	registered := func() bool {
		recs, err := cl.Status(context.Background(), wire.StateClient)
		require.NoError(t, err)
		for _, r := range recs {
			if r.Type == wire.StateClient && int32(r.Data32) == int32(os.Getpid()) &&
				strings.Contains(r.Text, " pid="+strconv.Itoa(os.Getpid())+" ") {
				return true
			}
		}
		return false
	}
	// REGISTER has no reply: wait until the daemon has processed it.
	require.Eventually(t, registered, 10*time.Second, 10*time.Millisecond)

	// A python3-sanlock holder registers too and inquires at the end.
	py := testutil.PythonSanlock(t)
	pycmd := exec.Command(py, "-c", `
import sanlock, sys
fd = sanlock.register()
print("registered", flush=True)
sys.stdin.readline()
print("inquire", sanlock.inquire(slkfd=fd), flush=True)
`)
	pycmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+dir)
	pyIn, err := pycmd.StdinPipe()
	require.NoError(t, err)
	pyOut, err := pycmd.StdoutPipe()
	require.NoError(t, err)
	pycmd.Stderr = &stderr
	require.NoError(t, pycmd.Start())
	defer func() { _ = pycmd.Process.Kill(); _ = pycmd.Wait() }()
	pyLines := bufio.NewScanner(pyOut)
	require.True(t, pyLines.Scan())
	require.Equal(t, "registered", pyLines.Text())

	serving := func() {
		t.Helper()
		inq, err := reg.Inquire(context.Background()) // on the registered connection
		n := inq.Count
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		_, _, err = cl.Version(context.Background()) // on a new connection
		require.NoError(t, err)
		assert.True(t, registered())
	}
	reexec := func() (old, now int) {
		t.Helper()
		old = pidOf()
		require.NoError(t, syscall.Kill(old, syscall.SIGUSR1))
		require.Eventually(t, func() bool {
			now = pidOf() // 0 while the new image rewrites the pid file
			return now != 0 && now != old && gone(old)
		}, 20*time.Second, 5*time.Millisecond)
		return old, now
	}
	for i := 0; i < reexecLoops; i++ {
		other, err := cl.Register(context.Background()) // another client comes and goes
		require.NoError(t, err)
		old, now := reexec()
		require.NotEqual(t, old, now)
		serving()
		other.Close()
	}

	// Failures: the binary on disk exits at start, then sends garbage.
	for _, script := range []string{"#!/bin/sh\nexit 3\n", "#!/bin/sh\nprintf garbage >&3\nsleep 1\n"} {
		require.NoError(t, os.Remove(bin))
		require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
		p := pidOf()
		failures := func() int {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.out"))
			return bytes.Count(b, []byte("reexec failed: handover to "+bin))
		}
		before := failures()
		require.NoError(t, syscall.Kill(p, syscall.SIGUSR1))
		require.Eventually(t, func() bool { return failures() > before }, 20*time.Second, 20*time.Millisecond)
		assert.Equal(t, p, pidOf())
		serving()
	}
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, good, 0o755))
	reexec()
	serving()

	// The command: a failure (the binary on disk exits at start) answers
	// why, a success answers 0 once the new image serves.
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 3\n"), 0o755))
	err = cl.Reexec(context.Background())
	assert.Equal(t, rescode.RvEAGAIN, client.ErrorCode(err))
	assert.Contains(t, err.Error(), "the old image keeps serving")
	serving()
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, good, 0o755))
	old := pidOf()
	require.NoError(t, cl.Reexec(context.Background()))
	require.Eventually(t, func() bool { p := pidOf(); return p != 0 && p != old && gone(old) }, 20*time.Second, 5*time.Millisecond)
	serving()

	// The python holder's registration went through every image.
	recs, err := cl.Status(context.Background(), wire.StateClient)
	require.NoError(t, err)
	found := false
	for _, r := range recs {
		found = found || r.Type == wire.StateClient && int32(r.Data32) == int32(pycmd.Process.Pid)
	}
	assert.True(t, found, "python holder pid %d registered", pycmd.Process.Pid)
	_, err = pyIn.Write([]byte("go\n"))
	require.NoError(t, err)
	require.True(t, pyLines.Scan())
	assert.Equal(t, "inquire []", pyLines.Text())
}

// reexecLoops is how many reexecs TestReexecProcess runs in a row.
const reexecLoops = 20
