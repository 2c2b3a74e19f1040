package serving

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeConn returns its chunks one per Read, or os.ErrDeadlineExceeded
// while its read deadline is in the past, as a socket does. A reader that
// spins on a stale deadline gets errSpin instead of hanging the test.
type fakeConn struct {
	mu       sync.Mutex
	chunks   []string
	deadline time.Time
	timeouts int
}

var errSpin = errors.New("read spun on a past deadline")

func (c *fakeConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deadline.IsZero() && !c.deadline.After(time.Now()) {
		c.timeouts++
		if c.timeouts > 1000 {
			return 0, errSpin
		}
		return 0, os.ErrDeadlineExceeded
	}
	if len(c.chunks) == 0 {
		return 0, errors.New("no more data")
	}
	n := copy(p, c.chunks[0])
	c.chunks = c.chunks[1:]
	return n, nil
}

func (c *fakeConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// TestReaderStaleDeadline: a reader whose command ran through a quiesce
// that failed (the past read deadline set, the gate opened again) reads
// its next request instead of spinning on the stale deadline; a quiesce
// that starts later still parks it at its next message boundary, with
// its own deadline, until Resume.
func TestReaderStaleDeadline(t *testing.T) {
	g := &Gate{}
	c := &fakeConn{chunks: []string{"req1", "req2", "req3"}}
	var r Reader
	r.Init(g, c)
	buf := make([]byte, 16)
	r.Begin()
	n, err := r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "req1", string(buf[:n]))

	// req1's command runs; a quiesce sets the past deadline, times out
	// on the command in flight and the gate opens again.
	g.Quiesce()
	require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
	require.Error(t, g.Wait(10*time.Millisecond), "a command is in flight")
	g.Resume()
	r.Begin()
	n, err = r.Read(buf)
	require.NoError(t, err, "the stale deadline is lifted")
	assert.Equal(t, "req2", string(buf[:n]))

	// A later quiesce parks the reader at its next message boundary.
	r.Begin()
	g.Quiesce()
	require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
	go g.ParkAccept()
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.Read(buf)
		done <- result{string(buf[:n]), err}
	}()
	require.NoError(t, g.Wait(10*time.Second), "the reader parks")
	select {
	case res := <-done:
		t.Fatalf("read while quiesced: %q %v", res.s, res.err)
	default:
	}
	g.Resume()
	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, "req3", res.s)
}
