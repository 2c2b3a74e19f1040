package delta

import (
	"fmt"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// set_event flags (sanlock_admin.h values).
const (
	SetEventCurGeneration uint32 = 0x1  // generation 0: use the target's last seen generation
	SetEventClearHostID   uint32 = 0x2  // stop setting the target's bit
	SetEventClearEvent    uint32 = 0x4  // drop the stored event
	SetEventReplaceEvent  uint32 = 0x8  // replace a pending different event instead of -EBUSY
	SetEventAllHosts      uint32 = 0x10 // set every host's bit
)

// MaxHostID is the largest host_id any geometry allows.
const MaxHostID = 2000

// Notifier is the sending side of bitmap notifications and host events
// (docs/delta.md "Sending requests and events"–"set_event"): per target host the time we last asked
// for its bit (set_bit_time), and the one current event shared by all targets.
// Times are our monotime in whole seconds.
type Notifier struct {
	setBitmapSeconds int
	setBitTime       []uint64 // index host_id-1
	event            HostEvent
	setEventTime     uint64
}

// NewNotifier returns a notifier for host_ids 1..maxHosts whose bits stay
// set for setBitmapSeconds.
func NewNotifier(maxHosts, setBitmapSeconds int) *Notifier {
	return &Notifier{setBitmapSeconds: setBitmapSeconds, setBitTime: make([]uint64, maxHosts)}
}

// Request asks for hostID's bit from now on (a resource request naming
// that host as owner). The caller has checked that the lockspace is joined.
func (n *Notifier) Request(hostID, now uint64) error {
	if hostID == 0 || hostID > MaxHostID {
		return rescode.ErrEINVAL
	}
	if hostID > uint64(len(n.setBitTime)) {
		return rescode.ErrEINVAL
	}
	n.setBitTime[hostID-1] = now
	return nil
}

// SetEvent handles set_event at time now. curGen returns the owner
// generation we last saw for a host_id (for SetEventCurGeneration). It
// returns -EINVAL for a bad host_id and -EBUSY when a different non-zero
// event was set less than set_bitmap_seconds ago (unless
// SetEventReplaceEvent). "Different" compares the event values only, so one
// event can be sent to several hosts by calling once per host.
func (n *Notifier) SetEvent(now uint64, ev HostEvent, flags uint32, curGen func(hostID uint64) uint64) error {
	if ev.HostID == 0 || ev.HostID > MaxHostID || ev.HostID > uint64(len(n.setBitTime)) {
		return rescode.ErrEINVAL
	}
	if flags&SetEventCurGeneration != 0 && ev.Generation == 0 && curGen != nil {
		ev.Generation = curGen(ev.HostID)
	}
	if flags&SetEventClearEvent != 0 {
		n.event = HostEvent{}
		n.setEventTime = now
		return nil
	}
	if flags&SetEventClearHostID != 0 {
		n.setBitTime[ev.HostID-1] = 0
		return nil
	}
	if flags&SetEventReplaceEvent == 0 && EventClash(n.event, ev, n.setEventTime, now, n.setBitmapSeconds) {
		return fmt.Errorf("event %d %d %d %d replaced by %d %d %d %d t %d: %w",
			n.event.HostID, n.event.Generation, n.event.Event, n.event.Data,
			ev.HostID, ev.Generation, ev.Event, ev.Data, n.setEventTime, rescode.ErrEBUSY)
	}
	n.setEventTime = now
	n.setBitTime[ev.HostID-1] = now
	n.event = ev
	if flags&SetEventAllHosts != 0 {
		for i := range n.setBitTime {
			n.setBitTime[i] = now
		}
	}
	return nil
}

// EventClash is the -EBUSY rule of set_event: a pending event (set less
// than setBitmapSeconds ago, non-zero) would be replaced by a different
// non-zero one.
func EventClash(cur, next HostEvent, setAt, now uint64, setBitmapSeconds int) bool {
	return now-setAt < uint64(setBitmapSeconds) && cur.Event != 0 && next.Event != 0 && cur.Event != next.Event
}

// Event is the current event (the extras the next renewal writes).
func (n *Notifier) Event() HostEvent { return n.event }

// Build returns the bitmap and the extras for a renewal at time now (spec:
// docs/delta.md "Sending requests and events"): a host's bit is set while less than
// set_bitmap_seconds passed since it was requested; older requests are forgotten. Our own
// bit is never set. The bitmap is nil when no bit is set.
func (n *Notifier) Build(now, ourID uint64) ([]byte, HostEvent) {
	var sector []byte // nil while no bit is set: the common case allocates nothing
	for i, t := range n.setBitTime {
		id := uint64(i + 1)
		if t == 0 || id == ourID {
			continue
		}
		if now-t > uint64(n.setBitmapSeconds) {
			n.setBitTime[i] = 0
			continue
		}
		if sector == nil {
			sector = make([]byte, diskfmt.BitmapOffset+diskfmt.BitmapSize) // BitmapSet works on a sector
		}
		diskfmt.BitmapSet(sector, id)
	}
	if sector == nil {
		return nil, n.event
	}
	return sector[diskfmt.BitmapOffset:], n.event
}

// Pending lists the host_ids whose bit is currently requested.
func (n *Notifier) Pending() []uint64 {
	var ids []uint64
	for i, t := range n.setBitTime {
		if t != 0 {
			ids = append(ids, uint64(i+1))
		}
	}
	return ids
}
