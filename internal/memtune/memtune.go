// Package memtune fits the daemon process's memory and processor use to
// what it is doing (docs/performance.md): the garbage collection target
// follows the live heap (gcpolicy.go), the mappings of the binary that
// start-up, joins and bursts of acquires touched are dropped once they are
// over, with the heap's free pages (trim.go), and GOMAXPROCS is one while
// at most one request is in flight (procs.go).
//
// The daemon sees all of it as one hook, a Tuner, which it tells when a
// request begins and ends and when a burst of work has settled. Only the
// daemon process uses it: it changes settings of the whole process.
package memtune

// Tuner is the daemon process's tuning. Its methods return at once; a nil
// Tuner does nothing.
type Tuner struct {
	procs *governor
	trim  *binaryTrim
}

// Start tunes the process for a daemon whose start-up is over: it sets the
// garbage collection policy (unless GOGC is in the environment), drops the
// binary's mappings that start-up touched, and runs GOMAXPROCS at one
// (unless GOMAXPROCS is in the environment or there is one CPU).
func Start() *Tuner {
	setGCPolicy()
	trim := startBinaryTrim()
	return &Tuner{trim: trim, procs: startGovernor()}
}

// RequestBegin records a client request starting.
func (t *Tuner) RequestBegin() {
	if t != nil {
		t.procs.Begin()
	}
}

// RequestEnd records a client request ending.
func (t *Tuner) RequestEnd() {
	if t != nil {
		t.procs.End()
	}
}

// Settled records that a burst of work is over (a joined lockspace renewed
// twice, a few dozen acquires or releases): settleDelay after the last call
// the binary's mappings and the heap's free pages are given back.
func (t *Tuner) Settled() {
	if t != nil {
		t.trim.settled()
	}
}
