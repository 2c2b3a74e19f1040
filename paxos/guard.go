package paxos

import (
	"context"
	"fmt"

	"github.com/gosanlock/gosanlock/rescode"
)

// A WriteGuard makes a request cancellable only until its first disk
// write (docs/upgrade.md "Pending requests"). Every write of this package
// made with a context that carries a guard (WithWriteGuard) first calls
// BeforeWrite: true lets the write go out, and from then on the guard must
// refuse to cancel the request; false means the request was cancelled
// before it wrote anything, and the write is not issued. So a request
// cancelled through its guard has written nothing, and one that has
// written runs to its end as if no cancel had come.
type WriteGuard interface {
	BeforeWrite() bool
}

type guardKey struct{}

// WithWriteGuard returns a child of ctx whose writes pass through g.
func WithWriteGuard(ctx context.Context, g WriteGuard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// errWriteRefused is the result of a write a guard refused.
var errWriteRefused = fmt.Errorf("request cancelled before its first write: %w", rescode.ErrEPERM)

// AllowWrite asks ctx's guard, if any, whether a write may go out (a
// true answer marks the request as written).
func AllowWrite(ctx context.Context) bool {
	g, ok := ctx.Value(guardKey{}).(WriteGuard)
	return !ok || g.BeforeWrite()
}
