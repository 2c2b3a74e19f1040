package process

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// groupsChildEnv makes the test binary the child of TestDropPrivilegesAllThreads.
const groupsChildEnv = "GOSANLOCK_TEST_DROP_PRIVILEGES_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(groupsChildEnv) != "" {
		dropPrivilegesChild()
		return
	}
	os.Exit(m.Run())
}

// dropPrivilegesChild starts threads, drops to the user named in the
// environment and prints the Groups line of every thread.
func dropPrivilegesChild() {
	for range 4 {
		go func() {
			runtime.LockOSThread()
			select {}
		}()
	}
	u, err := user.Lookup(os.Getenv(groupsChildEnv))
	if err != nil {
		os.Stdout.WriteString("lookup: " + err.Error() + "\n")
		os.Exit(2)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := DropPrivileges(u.Username, uid, gid); err != nil {
		os.Stdout.WriteString("drop: " + err.Error() + "\n")
		os.Exit(2)
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Groups:") {
				os.Stdout.WriteString(strings.TrimSpace(strings.TrimPrefix(l, "Groups:")) + "\n")
			}
		}
	}
	os.Exit(0)
}

// TestDropPrivilegesAllThreads: after DropPrivileges every thread of the
// process has the user's supplementary groups, not only the one that made
// the call (a daemon run as user sanlock opens disks through group disk
// on whichever thread does the open).
func TestDropPrivilegesAllThreads(t *testing.T) {
	testenv.NeedRoot(t, "DropPrivileges changes the user of a child process")
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	ids, err := u.GroupIds()
	if err != nil || len(ids) == 0 {
		t.Skip("user nobody has no groups to check")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), groupsChildEnv+"=nobody")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	threads := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(threads) < 2 {
		t.Fatalf("child saw %d threads: %q", len(threads), out)
	}
	want := strings.Join(ids, " ")
	for _, g := range threads {
		if g != want {
			t.Errorf("a thread has groups %q, want %q (every thread: %q)", g, want, threads)
		}
	}
}
