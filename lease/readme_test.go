package lease_test

import (
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExample builds the README's Go example as written, in a module
// made of the README's go.mod lines, with the replace directive pointing
// at this repository. It runs offline: requirements come from the module
// cache and the repository's go.sum.
func TestReadmeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	gobin, err := exec.LookPath("go") // go test puts its GOROOT/bin first in PATH
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	i := strings.Index(sec, "## Lock from Go")
	if i < 0 {
		t.Fatal(`README has no "## Lock from Go" section`)
	}
	sec = sec[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	blocks := regexp.MustCompile("(?s)```(\\w*)\n(.*?)```").FindAllStringSubmatch(sec, -1)
	var gomod, main string
	for _, b := range blocks {
		switch {
		case b[1] == "go":
			main = b[2]
		case strings.HasPrefix(b[2], "module "):
			gomod = b[2]
		}
	}
	if gomod == "" || main == "" {
		t.Fatalf("README's Go section lacks the go.mod or the Go block (%d blocks)", len(blocks))
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	replace := regexp.MustCompile(`(?m)^replace github.com/gosanlock/gosanlock => .*$`)
	if !replace.MatchString(gomod) {
		t.Fatalf("README's go.mod has no replace directive for the module:\n%s", gomod)
	}
	gomod = replace.ReplaceAllString(gomod, "replace github.com/gosanlock/gosanlock => "+repo)
	dir := t.TempDir()
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "main.go": []byte(main), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "."}, {"build", "-o", os.DevNull, "."}} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s\ngo.mod:\n%s", strings.Join(args, " "), err, out, gomod)
		}
	}
	if f, err := format.Source([]byte(main)); err != nil || string(f) != main {
		t.Errorf("README's Go example is not gofmt-formatted (%v)", err)
	}
}
