package diskio

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAIONowaitRetry checks the RWF_NOWAIT submission of background I/O: a request the
// kernel refuses to do without waiting (here a write that extends the
// file, which ext4 answers with EAGAIN under RWF_NOWAIT) is submitted again
// the ordinary way and succeeds; reads and in-place writes work as before.
func TestAIONowaitRetry(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "gs-diskio-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "grow")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	d, err := OpenFile(path)
	if err != nil {
		t.Skipf("O_DIRECT not supported here: %v", err)
	}
	defer d.Close()
	if !d.AIO() {
		t.Skip("no native AIO here")
	}
	ctx, cancel := context.WithTimeout(Background(context.Background()), 10*time.Second)
	defer cancel()

	before := aioNowaitRetries.Load()
	sector := bytes.Repeat([]byte{0x5a}, 512)
	for i := 0; i < 4; i++ { // each write extends the file
		require.NoError(t, d.WriteAt(ctx, sector, int64(i)*512))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{0x5a}, 2048), got)
	t.Logf("requests resubmitted without RWF_NOWAIT: %d (nowait %v)", aioNowaitRetries.Load()-before, sharedAIO().nowait.Load())

	in := bytes.Repeat([]byte{0xa5}, 512)
	require.NoError(t, d.WriteAt(ctx, in, 512)) // in place
	b, err := d.ReadBuf(ctx, 2048, 0)
	require.NoError(t, err)
	require.Equal(t, in, b.Bytes()[512:1024])
	require.Equal(t, sector, b.Bytes()[:512])
	b.Release()
}
