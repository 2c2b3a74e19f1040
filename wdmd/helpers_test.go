package wdmd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func timelineDir() string { return os.Getenv("WDMD_TIMELINE_DIR") }

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }
