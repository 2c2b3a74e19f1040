package paxos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// TestContention runs several live hosts against one lease for many rounds.
// Every I/O takes a random (fake) time so ballots really overlap. It checks
// that at most one host holds the lease at any moment, that each lver has
// exactly one owner, which every loser that learns it agrees on, and that
// losers only see -243, -244 or -245.
func TestContention(t *testing.T) {
	cases := []struct {
		name  string
		g     diskfmt.Geometry
		disks int
		watch bool // Fairness.WatchBackoff, as the daemon sets it
	}{
		{"512x1", geo512, 1, false},
		{"4Kx1", geo4K, 1, false},
		{"512x3", geo512, 3, false},
		{"512x1-watch", geo512, 1, true},
		{"512x3-watch", geo512, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const hosts, rounds = 4, 25
				c := newCluster(t, tc.g, tc.disks, 8)
				var (
					mu      sync.Mutex
					holder  uint64
					owners  = map[uint64]uint64{} // lver -> owner, from every result
					wins    = map[uint64]uint64{} // lver -> host whose Acquire succeeded
					results = map[int]int{}
				)
				claim := func(lver, owner uint64) {
					if o, ok := owners[lver]; ok {
						assert.Equal(t, o, owner, "two owners for lver %d", lver)
					}
					owners[lver] = owner
				}
				var wg sync.WaitGroup
				for id := uint64(1); id <= hosts; id++ {
					l := c.host(id, id+10, func(i int, d diskfmt.Device) diskfmt.Device {
						return &slowDev{Device: d, rnd: rand.New(rand.NewPCG(id, uint64(i))), maxDelay: 5 * time.Millisecond}
					})
					l.Host.Fairness.WatchBackoff = tc.watch
					rnd := rand.New(rand.NewPCG(id, 7))
					wg.Go(func() {
						for range rounds {
							r, err := l.Acquire(bg, AcquireRequest{})
							mu.Lock()
							results[int(code(err))]++
							if err == nil {
								assert.Zero(t, holder, "host %d acquired while %d holds", id, holder)
								holder = r.Leader.Lver<<8 | id
								_, dup := wins[r.Leader.Lver]
								assert.False(t, dup, "lver %d won twice", r.Leader.Lver)
								wins[r.Leader.Lver] = id
								assert.Equal(t, id, r.Leader.OwnerID)
								claim(r.Leader.Lver, id)
							} else {
								pe, ok := err.(*Error)
								if assert.True(t, ok) && assert.NotNil(t, pe.Leader) {
									switch pe.Code {
									case rescode.ErrAcquireOwned, rescode.ErrAcquireOther:
										assert.NotEqual(t, id, pe.Leader.OwnerID)
										claim(pe.Leader.Lver, pe.Leader.OwnerID)
									case rescode.ErrAcquireIDLive:
										assert.NotEqual(t, id, pe.Leader.OwnerID)
									default:
										t.Errorf("host %d: unexpected %v", id, err)
									}
								}
							}
							mu.Unlock()
							if err == nil {
								time.Sleep(time.Duration(rnd.Int64N(int64(20 * time.Millisecond))))
								mu.Lock()
								holder = 0
								mu.Unlock()
								assert.NoError(t, r.Release(bg, ReleaseOptions{}))
							}
							time.Sleep(time.Duration(rnd.Int64N(int64(30 * time.Millisecond))))
						}
					})
				}
				wg.Wait()
				require.NotEmpty(t, wins)
				for lver, o := range owners {
					assert.Equal(t, o, wins[lver], "lver %d: owner per losers vs winner", lver)
				}
				// lvers are consecutive from 1: no version was skipped or reused
				final := c.leader(0)
				assert.Len(t, owners, int(final.Lver))
				if final.Timestamp != 0 {
					// the last release skipped the leader write (quirk Q7)
					assert.NotEqual(t, final.OwnerID, final.WriteID)
					d, _ := c.hostBlock(0, final.OwnerID)
					assert.Equal(t, uint32(diskfmt.DblockReleased), d.Flags)
				}
				t.Logf("results %v, %d versions", results, final.Lver)
			})
		})
	}
}

// TestDeadOwnerTakeover: a host that dies holding the lease is taken over
// only after host_dead_seconds (8*io + W = 68 s) without a change of its
// delta lease, as measured on the taker's clock.
func TestDeadOwnerTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
		_, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)

		// alive: -243 at once, with or without OWNER_NOWAIT
		for _, nowait := range []bool{false, true} {
			_, err = h2.Acquire(bg, AcquireRequest{OwnerNowait: nowait})
			require.Equal(t, rescode.ErrAcquireIDLive, code(err))
			assert.Equal(t, uint64(1), leaderOf(t, err).OwnerID)
		}

		c.world.kill(1)
		died := time.Now()
		time.Sleep(2 * time.Second)
		// not yet dead: OWNER_NOWAIT fails at once
		start := time.Now()
		_, err = h2.Acquire(bg, AcquireRequest{OwnerNowait: true})
		require.Equal(t, rescode.ErrAcquireOwnedRetry, code(err))
		assert.Equal(t, start, time.Now(), "OWNER_NOWAIT must not wait")

		r, err := h2.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		waited := time.Since(died)
		hostDead := time.Duration(8*testIO+testW) * time.Second
		assert.Greater(t, waited, hostDead, "took over before host_dead_seconds")
		assert.Less(t, waited, hostDead+3*time.Second)
		assert.Equal(t, uint64(2), r.Leader.OwnerID)
		assert.Equal(t, uint64(2), r.Leader.Lver)
	})
}

// TestOwnerRestarted: an owner that came back with a new generation, or our
// own lease from an older generation, is taken without waiting.
func TestOwnerRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		h1 := c.host(1, 1, nil)
		_, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)

		// host 1 restarts with generation 2: its old lease is "was old local"
		h1b := c.host(1, 2, nil)
		start := time.Now()
		r, err := h1b.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		assert.Equal(t, start, time.Now())
		assert.Equal(t, uint64(2), r.Leader.OwnerGeneration)

		// host 1 restarts again (generation 3) without releasing: host 2 sees
		// the generation mismatch and acquires at once
		c.world.join(1, 3)
		h2 := c.host(2, 1, nil)
		r2, err := h2.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		assert.Equal(t, start, time.Now())
		assert.Equal(t, uint64(3), r2.Leader.Lver)
	})
}

// TestReleaseWrittenByOther: host 2 commits host 1's proposal (-245); host 1
// then learns it owns the lease from the leader, and its release skips the
// leader write (2 I/Os). Host 2 sees host 1's RELEASED dblock and acquires
// although the leader still names host 1.
func TestReleaseWrittenByOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		var gate *gateDev
		var cd *countDev
		h1 := c.host(1, 1, func(_ int, d diskfmt.Device) diskfmt.Device {
			cd = &countDev{Device: d, base: c.off}
			gate = newGateDev(cd, 5) // stop before the phase-2 read
			return gate
		})
		h2 := c.host(2, 1, nil)

		var r1 *Held
		var err1 error
		done := make(chan struct{})
		go func() { r1, err1 = h1.Acquire(bg, AcquireRequest{}); close(done) }()
		<-gate.reached

		_, err := h2.Acquire(bg, AcquireRequest{})
		require.Equal(t, rescode.ErrAcquireOther, code(err))
		ld := leaderOf(t, err)
		assert.Equal(t, uint64(1), ld.OwnerID)
		assert.Equal(t, uint64(2), ld.WriteID)

		close(gate.release)
		<-done
		require.NoError(t, err1)
		assert.Equal(t, ld, r1.Leader, "host 1 adopts the leader host 2 committed")

		cd.take()
		require.NoError(t, r1.Release(bg, ReleaseOptions{}))
		assert.Equal(t, ops("W", 512, 1024, "R", 512, 0), cd.take(), "no leader write")
		assert.NotZero(t, c.leader(0).Timestamp, "leader still names host 1 (quirk Q7)")

		r2, err := h2.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		assert.Equal(t, uint64(2), r2.Leader.Lver)
		assert.Equal(t, uint64(2), r2.Leader.OwnerID)
	})
}

// TestManyHostsSameLver: eight hosts start at the same instant on a free
// lease; exactly one wins lver 1.
func TestManyHostsSameLver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 16)
		var wg sync.WaitGroup
		res := make([]error, 9)
		got := make([]*Held, 9)
		for id := uint64(1); id <= 8; id++ {
			l := c.host(id, 1, nil)
			wg.Go(func() { got[id], res[id] = l.Acquire(bg, AcquireRequest{}) })
		}
		wg.Wait()
		winners := 0
		for id := 1; id <= 8; id++ {
			if res[id] == nil {
				winners++
				assert.Equal(t, uint64(1), got[id].Leader.Lver)
				continue
			}
			assert.Contains(t, []rescode.Code{rescode.ErrAcquireIDLive, rescode.ErrAcquireOwned, rescode.ErrAcquireOther},
				code(res[id]), fmt.Sprint(res[id]))
		}
		assert.Equal(t, 1, winners)
	})
}
