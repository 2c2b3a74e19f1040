package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirectSession replays testdata/direct_session.txt, a transcript of
// the real sanlock 3.8.5 on a fresh 16 MiB file: "$ <args>" lines (FILE is
// the image path), the expected stdout, and "rc=<exit>".
func TestDirectSession(t *testing.T) {
	b, err := os.ReadFile("testdata/direct_session.txt")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(leaseDir(t), "img")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 16<<20); err != nil {
		t.Fatal(err)
	}
	var args []string
	var want strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			args = strings.Fields(strings.ReplaceAll(line[2:], "FILE", file))
			want.Reset()
		case strings.HasPrefix(line, "rc="):
			got, rc := runMain(t, args...)
			got = strings.ReplaceAll(got, file, "FILE")
			if exp := want.String(); got != exp || fmt.Sprintf("rc=%d\n", rc) != line {
				t.Errorf("%v: got %s (%d), want %s%s", args, got, rc, exp, line)
			}
		default:
			want.WriteString(line)
		}
	}
}
