package paxos

import (
	"fmt"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// HeldState is everything a Held carries besides its Lease: what a
// handover gives the new image (HandoverState) so that it holds the lease
// as this one did, with no I/O (Adopt; docs/upgrade.md "Adopting resource
// leases").
type HeldState struct {
	Leader     diskfmt.Leader
	Dblock     diskfmt.Dblock
	Geometry   diskfmt.Geometry
	Shared     bool
	EraseAll   bool
	UndoShared bool
	LVB        []byte // nil: acquired without LVB
	LVBDirty   bool
}

// HandoverState returns the hold's state for a handover.
func (r *Held) HandoverState() HeldState {
	return HeldState{Leader: r.Leader, Dblock: r.Dblock, Geometry: r.Geometry, Shared: r.shared,
		EraseAll: r.eraseAll, UndoShared: r.undoShared, LVB: append([]byte(nil), r.lvb...), LVBDirty: r.lvbDirty}
}

// Adopt rebuilds a hold of l from a handed-over state, without I/O. It
// checks that the state is a hold of this lease by our host: a paxos
// leader of this lockspace and resource, valid sizes, and for an
// exclusive hold that the leader names our host_id and generation.
func (l *Lease) Adopt(st HeldState) (*Held, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	h := l.Host
	ld := &st.Leader
	if _, ok := diskfmt.LookupGeometry(st.Geometry.SectorSize, st.Geometry.AlignSize); !ok {
		return nil, fmt.Errorf("paxos: adopt %s: sizes %s: %w", l.Name, st.Geometry, rescode.ErrEINVAL)
	}
	switch {
	case ld.Magic != diskfmt.PaxosMagic:
		return nil, fmt.Errorf("paxos: adopt %s: leader magic %#x", l.Name, ld.Magic)
	case diskfmt.NameString(ld.SpaceName[:]) != h.Space || diskfmt.NameString(ld.ResourceName[:]) != l.Name:
		return nil, fmt.Errorf("paxos: adopt %s: leader of %s:%s", l.Name,
			diskfmt.NameString(ld.SpaceName[:]), diskfmt.NameString(ld.ResourceName[:]))
	case !st.Shared && (ld.OwnerID != h.ID || ld.OwnerGeneration != h.Generation):
		return nil, fmt.Errorf("paxos: adopt %s: leader owned by %d/%d, we are %d/%d", l.Name,
			ld.OwnerID, ld.OwnerGeneration, h.ID, h.Generation)
	case st.LVB != nil && len(st.LVB) != st.Geometry.SectorSize:
		return nil, fmt.Errorf("paxos: adopt %s: lvb of %d bytes", l.Name, len(st.LVB))
	}
	r := &Held{lease: l, Leader: st.Leader, Dblock: st.Dblock, Geometry: st.Geometry, shared: st.Shared,
		eraseAll: st.EraseAll, undoShared: st.UndoShared, lvbDirty: st.LVBDirty}
	if st.LVB != nil {
		r.lvb = append([]byte(nil), st.LVB...)
	}
	return r, nil
}
