package daemon

import (
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
)

// ClientInfo identifies a registered client to the lease manager.
type ClientInfo struct {
	ID   manager.ClientID
	Slot int // connection slot ("ci")
	Pid  int // SO_PEERCRED pid recorded at REGISTER
}

// result is the wire result of a manager error: 0, -errno or a SANLK_*
// code (the only place errors become numbers).
func result(err error) int32 { return int32(rescode.CodeOf(err)) }
