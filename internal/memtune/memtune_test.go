package memtune

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTunerHooks: the Tuner passes requests to its governor and settling to
// its trimmer; a nil Tuner, or one without either part, does nothing.
func TestTunerHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sets []int
		g := newGovernor(4, time.Second, func(n int) { mu.Lock(); sets = append(sets, n); mu.Unlock() })
		tu := &Tuner{procs: g}
		tu.RequestBegin()
		tu.RequestBegin()
		require.Equal(t, 4, g.Procs())
		tu.RequestEnd()
		tu.RequestEnd()
		tu.Settled() // no trimmer: nothing
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, g.Procs())
		mu.Lock()
		require.Equal(t, []int{1, 4, 1}, sets)
		mu.Unlock()
	})
	var none *Tuner
	none.RequestBegin()
	none.RequestEnd()
	none.Settled()
	(&Tuner{}).RequestBegin()
	(&Tuner{}).RequestEnd()
}
