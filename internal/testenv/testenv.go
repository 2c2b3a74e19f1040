// Package testenv decides what a test does when something it needs is
// missing (root, a program): it skips, or fails when the tests run in CI.
// It imports nothing of the module, so that any package's tests can use it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as CI services set
// it). There a test whose dependency is missing fails
// instead of skipping, so that a CI run cannot pass having tested nothing.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t because a dependency is missing (the reason is
// format/args), or fails it with that reason in CI (InCI).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI: missing dependency: %s", msg)
	}
	t.Skip(msg)
}

// NeedRoot skips t (fails it in CI) unless the test process runs as root;
// why says what needs it.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root (%s)", why)
	}
}

// NeedBinary skips t (fails it in CI) unless the program at path exists
// and is executable; a path without a slash is looked up in $PATH. It
// returns the program's path.
func NeedBinary(t testing.TB, path string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err != nil {
		Missing(t, "%s not installed: %v", path, err)
	}
	return p
}
