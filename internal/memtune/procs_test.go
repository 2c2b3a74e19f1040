package memtune

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGovernor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sets []int
		g := newGovernor(4, time.Second, func(n int) { mu.Lock(); sets = append(sets, n); mu.Unlock() })
		got := func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), sets...) }
		require.Equal(t, []int{1}, got())

		g.Begin() // one request: stays at one P
		require.Equal(t, 1, g.Procs())
		g.Begin() // a second one: all of them
		require.Equal(t, 4, g.Procs())
		g.Begin()
		g.End()
		g.End()
		g.End()
		require.Equal(t, []int{1, 4}, got())

		time.Sleep(500 * time.Millisecond)
		g.Begin() // activity before the idle time: the timer restarts at its end
		g.End()
		time.Sleep(900 * time.Millisecond)
		require.Equal(t, 4, g.Procs())
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, g.Procs())
		require.Equal(t, []int{1, 4, 1}, got())

		// Requests in flight when the timer fires keep the count.
		g.Begin()
		g.Begin()
		g.End()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 4, g.Procs())
		g.End()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, g.Procs())
	})
}

func TestNilGovernor(t *testing.T) {
	var g *governor
	g.Begin()
	g.End()
	require.GreaterOrEqual(t, g.Procs(), 1)
}
