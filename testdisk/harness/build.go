package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds our sanlock binary (cmd/sanlock) and the holder program
// into dir with `go build`, from the module that contains the working
// directory, and returns their paths. When $GOSANLOCK_TEST_SANLOCK names
// a binary (`make test` passes the bin/sanlock it built from the same
// tree), that one is used instead of building cmd/sanlock again.
func Build(dir string) (sanlock, holder string, err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", "", fmt.Errorf("not inside the gosanlock module")
	}
	root := filepath.Dir(gomod)
	sanlock = filepath.Join(dir, "sanlock")
	holder = filepath.Join(dir, "holder")
	builds := [][2]string{{sanlock, "./cmd/sanlock"}, {holder, "./testdisk/harness/holder"}}
	if p := os.Getenv("GOSANLOCK_TEST_SANLOCK"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("GOSANLOCK_TEST_SANLOCK: %w", err)
		}
		sanlock, builds = p, builds[1:]
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v: %s", b[1], err, out)
		}
	}
	return sanlock, holder, nil
}
