package manager

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Host events (docs/protocol.md "Events", docs/delta.md "Receiving events"): a REG_EVENT connection
// is kept by the lockspace as a listener; every event addressed to us that
// the lockspace finds in another host's lease is sent to each listener as
// an 80-byte event_cb. Sends never block: a listener that cannot take the
// message is closed and dropped, as sanlock does.

// RegEvent adds c as a listener of lockspace name (REG_EVENT).
func (m *Lockspaces) RegEvent(name string, c Listener) error {
	if name == "" {
		return rescode.ErrEINVAL
	}
	m.mu.Lock()
	sp := m.byName(listSpaces, name)
	if sp == nil {
		m.mu.Unlock()
		return rescode.ErrENOENT
	}
	full := len(sp.listeners) >= maxEventListeners
	m.mu.Unlock()
	if full {
		m.pruneListeners(sp)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp.list != listSpaces {
		return rescode.ErrENOENT
	}
	if len(sp.listeners) >= maxEventListeners {
		return rescode.ErrENOCSI
	}
	sp.listeners = append(sp.listeners, c)
	return nil
}

// DropListener removes c from name's listeners (the REG_EVENT reply could
// not be sent).
func (m *Lockspaces) DropListener(name string, c Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp := m.anyByName(name); sp != nil {
		sp.removeListener(c)
	}
}

// removeListener deletes c from the list. Called with m.mu.
func (sp *space) removeListener(c Listener) bool {
	for i, x := range sp.listeners {
		if x == c {
			sp.listeners = append(sp.listeners[:i:i], sp.listeners[i+1:]...)
			return true
		}
	}
	return false
}

// EndEvent answers END_EVENT: drop the listeners that ended.
func (m *Lockspaces) EndEvent(name string) error {
	if name == "" {
		return rescode.ErrEINVAL
	}
	m.mu.Lock()
	sp := m.byName(listSpaces, name)
	m.mu.Unlock()
	if sp == nil {
		return rescode.ErrENOENT
	}
	m.pruneListeners(sp)
	return nil
}

// pruneListeners does a non-blocking 4-byte read on every listener and
// closes those that ended: the value 1 (the end marker), EOF or an error.
// Would-block and other values keep the listener.
func (m *Lockspaces) pruneListeners(sp *space) {
	m.mu.Lock()
	ls := append([]Listener(nil), sp.listeners...)
	m.mu.Unlock()
	for _, c := range ls {
		if !c.Ended() {
			continue
		}
		m.mu.Lock()
		removed := sp.removeListener(c)
		m.mu.Unlock()
		if removed {
			_ = c.Close()
		}
	}
}

// deliver sends one received event to every listener of the lockspace.
func (sp *space) deliver(ev delta.ReceivedEvent) {
	m := sp.m
	cb := wire.NewEventCB(wire.HostEvent{HostID: ev.Event.HostID, Generation: ev.Event.Generation,
		Event: ev.Event.Event, Data: ev.Event.Data}, ev.FromHostID, ev.FromGeneration)
	b, err := cb.MarshalBinary()
	if err != nil {
		return
	}
	m.mu.Lock()
	ls := append([]Listener(nil), sp.listeners...)
	m.mu.Unlock()
	for _, c := range ls {
		err := c.SendNoWait(b)
		if err == nil {
			continue
		}
		m.mu.Lock()
		removed := sp.removeListener(c)
		m.mu.Unlock()
		if removed {
			// Logged as 3.8.5 does: the send result, its errno, and the
			// descriptor closed with the listener.
			en := int(unix.EIO)
			var errno unix.Errno
			if errors.As(err, &errno) {
				en = int(errno)
			}
			// 3.8.5's wording, compared with its log by the interop tests.
			sp.log().Info(fmt.Sprintf("send_event_callbacks error -1 %d close fd %d", en, c.FD()))
			_ = c.Close()
		}
	}
}
