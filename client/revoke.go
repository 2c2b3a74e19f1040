package client

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// Revocation is the notice that the daemon is taking this process's leases
// away: their lockspace failed (storage lost) or is being removed, or
// another host asked for a lease with a GRACEFUL request. The holder should
// stop touching what the leases protect at once, release them (or exit)
// before the daemon escalates to SIGKILL, and never assume it still holds
// them.
type Revocation struct {
	// Signal is how the notice came: SIGUSR1 when the daemon ran the kill
	// program installed by WatchRevocations (lockspace failure before the
	// grace period ends, GRACEFUL requests), SIGTERM when it signalled us
	// directly (no kill program, or one restricted away).
	Signal os.Signal
}

// revocationSignal is what the installed kill program sends.
const revocationSignal = syscall.SIGUSR1

// killBinaries are the places a kill(1) program is looked for.
var killBinaries = []string{"/bin/kill", "/usr/bin/kill"}

// WatchRevocations delivers revocation notices for this registered
// process on the returned channel. It takes over SIGTERM and SIGUSR1 for
// the whole process; the lease package (lease.Lease.Lost) gives per-lease
// notices with a reason and touches no signal handling, and is what new
// code should use.
//
// It installs a kill program (KILLPATH)
// that sends SIGUSR1 to this process, so the daemon runs it instead of
// sending SIGTERM, and it catches SIGTERM and SIGUSR1 (their default
// actions would end the process before it could react). It works with
// sanlock 3.8.5 as with gosanlock. A FORCE request or the end of the grace
// period still brings SIGKILL, which cannot be caught: act on the first
// notice. Call it before acquiring: a lease keeps the kill program that
// was set when it was acquired, for GRACEFUL requests. stop ends the watch and restores the default signal handling;
// the kill program stays set.
func (g *Reg) WatchRevocations(ctx context.Context) (notices <-chan Revocation, stop func(), err error) {
	kill := ""
	for _, p := range killBinaries {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			kill = p
			break
		}
	}
	if kill == "" {
		return nil, nil, errors.New("client: no kill program found for revocation notices")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, revocationSignal)
	args := "-USR1 " + strconv.Itoa(os.Getpid())
	if err := g.Killpath(ctx, kill, args, 0); err != nil {
		signal.Stop(sigs)
		return nil, nil, err
	}
	out := make(chan Revocation, 4)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case s := <-sigs:
				select {
				case out <- Revocation{Signal: s}:
				default: // a notice is already waiting
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
	}
	return out, stop, nil
}
