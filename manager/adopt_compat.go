package manager

import (
	"fmt"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// The int32 forms and printf-style loggers adopt.go still calls (it is
// being moved, issue 11): delete this file when it calls spaceHost,
// openResDisks, rlog/sp.log with fields and passes Log: sp.deltaLog().

// logf logs a resource line, printf style.
func (m *Resources) logf(format string, args ...any) {
	m.lg().Info(fmt.Sprintf(format, args...))
}

// logf logs a lockspace line ("s<id> " first), printf style.
func (sp *space) logf(format string, args ...any) {
	sp.log().Info(fmt.Sprintf(format, args...))
}

// deltaLogf is the printf-style form of deltaLog (delta.Config.Logf).
func (sp *space) deltaLogf(format string, args ...any) {
	sp.deltaLog().Info(fmt.Sprintf(format, args...))
}

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
