package delta_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// set_event on host 1 for host 2: host 2 receives it once per renewal of
// host 1 that it observes while the bit is set (no de-duplication, spec
// docs/delta.md "Receiving events"), host 3 never
// does, the bit expires after set_bitmap_seconds and the extras stay on
// disk; docs/delta.md "Sending requests and events".
func TestHostEvents(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				var hs []*host
				for id := uint64(1); id <= 3; id++ {
					hs = append(hs, startHost(t, ctx, m, hostOpts{hostID: id, name: fmt.Sprint("host", id), io: io}))
				}
				for _, h := range hs {
					require.Equal(t, rescode.OK, waitJoined(h))
				}
				sleep(seconds(5 * io))
				sender, target, other := hs[0], hs[1], hs[2]

				setAt := sender.now()
				before := len(sender.ls.Renewals())
				require.NoError(t, sender.ls.SetEvent(delta.HostEvent{HostID: 2, Event: 5, Data: 7}, delta.SetEventCurGeneration))
				// A different event within set_bitmap_seconds clashes.
				err := sender.ls.SetEvent(delta.HostEvent{HostID: 3, Event: 6}, 0)
				assert.Equal(t, rescode.Code(-16), rescode.CodeOf(err))

				sleep(seconds(6*io + 4*io))
				evs, at := target.receivedEvents()
				require.NotEmpty(t, evs)
				want := delta.ReceivedEvent{
					Event:      delta.HostEvent{HostID: 2, Generation: 1, Event: 5, Data: 7},
					FromHostID: 1, FromGeneration: 1,
				}
				for i, e := range evs {
					assert.Equal(t, want, e)
					if i > 0 {
						assert.Greater(t, at[i], at[i-1], "one delivery per sender renewal")
					}
				}
				// Renewals of the sender that carried the bit.
				var carried int
				for _, e := range sender.ls.Renewals()[before:] {
					if e.Timestamp-setAt <= uint64(6*io) {
						carried++
					}
				}
				// The target looks at the others once per own renewal, so it
				// can miss a sender renewal but never sees one twice.
				assert.LessOrEqual(t, len(evs), carried)
				assert.GreaterOrEqual(t, carried, 2)
				otherEvs, _ := other.receivedEvents()
				assert.Empty(t, otherEvs, "not for host 3")

				// Expired: no more deliveries, bit gone, extras kept.
				sleep(seconds(10 * io))
				evs2, _ := target.receivedEvents()
				assert.Equal(t, len(evs), len(evs2))
				rec, sec := leaseOnDisk(t, m, geo512, 1)
				assert.Empty(t, diskfmt.BitmapHosts(sec, 2000))
				assert.Equal(t, [3]uint64{1, 5, 7}, [3]uint64{rec.WriteID, rec.WriteGeneration, rec.WriteTimestamp})

				// The target accepted the notification as a request, at most
				// once per set_bitmap_seconds.
				target.mu.Lock()
				assert.Contains(t, [][]uint64{{1}, {1, 1}}, target.reqs)
				target.mu.Unlock()

				for _, h := range hs {
					require.NoError(t, h.stop())
				}
				// Release keeps the extras but clears the bitmap.
				rec, _ = leaseOnDisk(t, m, geo512, 1)
				assert.Zero(t, rec.Timestamp)
				assert.Equal(t, uint64(5), rec.WriteGeneration)
			})
		})
	}
}

// A request bit is written by every renewal for set_bitmap_seconds after
// the request, then dropped; docs/delta.md "Sending requests and events".
func TestBitmapExpiry(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "host1", io: io})
				require.Equal(t, rescode.OK, waitJoined(h))
				sleep(seconds(3 * io))
				reqAt := h.now()
				require.NoError(t, h.ls.Request(9))
				bits := map[uint64]bool{} // lease timestamp -> bit 9 set
				for range 14 * io {
					sleep(time.Second)
					rec, sec := leaseOnDisk(t, m, geo512, 1)
					bits[rec.Timestamp] = diskfmt.BitmapTest(sec, 9)
					assert.Equal(t, []uint64(nil), nonNine(diskfmt.BitmapHosts(sec, 2000)))
				}
				var on, off int
				for ts, set := range bits {
					if ts < reqAt {
						assert.False(t, set)
						continue
					}
					if ts == reqAt {
						continue // same second as the request: either way
					}
					assert.Equal(t, ts-reqAt <= uint64(6*io), set, "ts %d (request at %d)", ts, reqAt)
					if set {
						on++
					} else {
						off++
					}
				}
				assert.GreaterOrEqual(t, on, 2)
				assert.GreaterOrEqual(t, off, 2)
				require.NoError(t, h.stop())
			})
		})
	}
}

func nonNine(ids []uint64) []uint64 {
	var out []uint64
	for _, id := range ids {
		if id != 9 {
			out = append(out, id)
		}
	}
	return out
}

// A custom set_bitmap_seconds (daemon -b) is used instead of 6N.
func TestSetBitmapSecondsOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, t.Context(), m, hostOpts{hostID: 1, name: "host1", io: 1, sbs: 2})
		require.Equal(t, rescode.OK, waitJoined(h))
		assert.Equal(t, 2, h.ls.Status().SetBitmapSeconds)
		require.NoError(t, h.ls.Request(2))
		sleep(6 * time.Second)
		_, sec := leaseOnDisk(t, m, geo512, 1)
		assert.False(t, diskfmt.BitmapTest(sec, 2))
		require.NoError(t, h.stop())
	})
}
