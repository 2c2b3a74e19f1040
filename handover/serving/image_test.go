package serving

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckImage: only an absolute, executable regular file that neither
// it nor any directory above it lets group or others replace is started.
func TestCheckImage(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte("#!/bin/sh\n"), 0o755))
	assert.NoError(t, CheckImage(good))
	assert.NoError(t, CheckImage("/bin/sh"))

	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(good, link))
	assert.NoError(t, CheckImage(link), "a link to a good file")

	for name, mode := range map[string]os.FileMode{"group-writable": 0o775, "world-writable": 0o757, "not-executable": 0o644} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), mode))
		require.NoError(t, os.Chmod(p, mode))
		assert.Error(t, CheckImage(p), name)
	}
	assert.Error(t, CheckImage("relative/sanlock"))
	assert.Error(t, CheckImage(filepath.Join(dir, "missing")))
	assert.Error(t, CheckImage(dir), "a directory")

	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o777))
	inOpen := filepath.Join(open, "sanlock")
	require.NoError(t, os.WriteFile(inOpen, []byte("#!/bin/sh\n"), 0o755))
	assert.Error(t, CheckImage(inOpen), "in a directory anyone may write")
	require.NoError(t, os.Chmod(open, 0o777|os.ModeSticky))
	assert.NoError(t, CheckImage(inOpen), "in a sticky directory")

	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755))
		require.NoError(t, os.Chown(other, 65534, 65534))
		assert.Error(t, CheckImage(other), "owned by another user")
	}
}
