package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

// TestClientReadVs511: client read of ours and of 5.1.1 against a 5.1.1
// daemon print the same lines, with -D the no_timeout line of the host's
// delta lease (1 for one init_host -N 1 marked NO_TIMEOUT).
func TestClientReadVs511(t *testing.T) {
	tr := debtree.Get(t, "sid")
	real := tr.StartDaemon(t, "")
	f := filepath.Join(leaseDir(t), "leases")
	if err := os.WriteFile(f, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ls := func(host string) string { return "NT:" + host + ":" + f + ":0" }
	for _, a := range [][]string{
		{"direct", "init", "-s", ls("0")},
		{"direct", "init_host", "-s", ls("2"), "-N", "1"},
		{"direct", "init", "-r", "NT:R1:" + f + ":1048576"},
	} {
		if out, err := real.Client(t, a...); err != nil {
			t.Fatalf("%v: %v: %s", a, err, out)
		}
	}
	run511 := func(args ...string) (string, int) {
		cmd := tr.Command(&debtree.Options{RunDir: real.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}},
			append([]string{"sanlock"}, args...)...)
		out, err := cmd.CombinedOutput()
		rc := 0
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), rc
	}
	for _, args := range [][]string{
		{"-s", ls("1"), "-D"}, {"-s", ls("2"), "-D"}, {"-s", ls("2")},
		{"-s", "NT:1:" + f + "x:0", "-D"},
		{"-r", "NT:R1:" + f + ":1048576"}, {"-r", "NT:R1:" + f + ":1048576", "-D"}, {},
	} {
		a := append([]string{"client", "read"}, args...)
		cOut, cRC := run511(a...)
		gOut, gErr, gRC := spawnTool(t, real.HostRunDir(), a...)
		// Ours explains a failure in one more line on stderr.
		if cOut != gOut || cRC != gRC || gErr != "" && (gRC == 0 || !strings.HasPrefix(gErr, "sanlock: read failed: ")) {
			t.Errorf("%v:\n5.1.1 rc %d:\n%s\nours rc %d:\n%s%s", args, cRC, cOut, gRC, gOut, gErr)
		}
	}
	if out, _ := run511("client", "read", "-s", ls("2"), "-D"); !strings.Contains(out, "\nno_timeout 1\n") {
		t.Errorf("5.1.1 read -D of a NO_TIMEOUT host lease: %q", out)
	}
}
