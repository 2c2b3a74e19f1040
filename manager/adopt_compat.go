package manager

import (
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// The int32 forms adopt.go still calls (it is being moved, issue 11):
// delete this file when it calls spaceHost and openResDisks instead.

// paxosHost is spaceHost with the error as its result code.
func (m *Resources) paxosHost(name string) (*paxos.Host, int32) {
	h, err := m.spaceHost(name)
	return h, int32(rescode.CodeOf(err))
}

// openDisks is openResDisks with the error as its result code.
func (m *Resources) openDisks(disks []wire.Disk) ([]diskfmt.Device, []paxos.Disk, int32) {
	devs, pd, err := m.openResDisks(disks)
	return devs, pd, int32(rescode.CodeOf(err))
}
