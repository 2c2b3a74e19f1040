package paxos

import (
	"fmt"

	"github.com/gosanlock/gosanlock/rescode"
)

// A WriteGuard makes a request cancellable only until its first disk
// write (docs/upgrade.md "Pending requests"). A request that names a
// guard (AcquireRequest.Guard, ConvertRequest.Guard) calls BeforeWrite
// before each of its writes: true lets the write go out, and from then on
// the guard must refuse to cancel the request; false means the request
// was cancelled before it wrote anything, and the write is not issued. So
// a request cancelled through its guard has written nothing, and one that
// has written runs to its end as if no cancel had come.
type WriteGuard interface {
	BeforeWrite() bool
}

// errWriteRefused is the result of a write a guard refused.
var errWriteRefused = fmt.Errorf("request cancelled before its first write: %w", rescode.ErrEPERM)

// allowWrite asks g, if any, whether a write may go out (a true answer
// marks the request as written).
func allowWrite(g WriteGuard) bool {
	return g == nil || g.BeforeWrite()
}

// guardedBy returns the lease as one request sees it: every write it
// issues first asks g. A nil g returns l itself.
func (l *Lease) guardedBy(g WriteGuard) *Lease {
	if g == nil {
		return l
	}
	gl := *l
	gl.guard = g
	return &gl
}
