package daemon

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Failure causes (docs/protocol.md "Private commands", LAST_ERROR): a
// sanlock reply carries a result code and nothing else, and a libsanlock
// client reads exactly the reply it expects, so the daemon cannot add the
// cause to the reply itself. It keeps, per client process, the last
// failure instead, and a gosanlock client asks for it with the private
// command CmdLastError after a command failed.
//
// A process is its SO_PEERCRED pid and uid and its start time in
// /proc/<pid>/stat: only the process that failed gets its failure, never
// another one that reuses the pid (docs/security.md "Failure causes").

const (
	// maxFailures bounds the table: with more failing processes, the
	// oldest entry goes.
	maxFailures = 256
	// failureTTL: older failures are dropped.
	failureTTL = 5 * time.Minute
	// maxCauseLen bounds a cause's text.
	maxCauseLen = 1024
)

// failure is the last failed request of one process.
type failure struct {
	uid   int
	start uint64 // the process's start time (clock ticks after boot); 0 unknown
	cmd   wire.Cmd
	code  int32
	cause string
	at    time.Time
}

// failureTable is the last failure of each client process, by pid.
type failureTable struct {
	mu  sync.Mutex
	m   map[int]failure
	now func() time.Time // time.Now; tests replace it
}

func newFailureTable() *failureTable {
	return &failureTable{m: make(map[int]failure), now: time.Now}
}

// record notes f as the last failure of pid.
func (t *failureTable) record(pid int, f failure) {
	if pid <= 0 {
		return
	}
	if len(f.cause) > maxCauseLen {
		f.cause = f.cause[:maxCauseLen]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f.at = t.now()
	t.pruneLocked(f.at)
	if _, ok := t.m[pid]; !ok && len(t.m) >= maxFailures {
		oldest, first := 0, true
		for p, e := range t.m {
			if first || e.at.Before(t.m[oldest].at) {
				oldest, first = p, false
			}
		}
		delete(t.m, oldest)
	}
	t.m[pid] = f
}

// lookup returns the last failure of the process pid/uid/start and its
// age; false when there is none, it is too old or it belongs to another
// process.
func (t *failureTable) lookup(pid, uid int, start uint64) (failure, time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.pruneLocked(now)
	f, ok := t.m[pid]
	if !ok || pid <= 0 || f.uid != uid || f.start != start {
		return failure{}, 0, false
	}
	return f, now.Sub(f.at), true
}

// pruneLocked drops the failures older than failureTTL.
func (t *failureTable) pruneLocked(now time.Time) {
	for p, e := range t.m {
		if now.Sub(e.at) > failureTTL {
			delete(t.m, p)
		}
	}
}

// len is the number of failures kept.
func (t *failureTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// procRoot is where process start times are read; tests point it elsewhere.
var procRoot = "/proc"

// procStart is the start time of process pid (field 22 of
// /proc/<pid>/stat), 0 when it cannot be read.
func procStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields 3.. follow the name
	if len(f) <= startField {
		return 0
	}
	v, err := strconv.ParseUint(f[startField], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// beginRequest starts the noting of the request's cause (dispatch).
func (c *Conn) beginRequest() {
	c.mu.Lock()
	c.inRequest, c.reqCause = true, ""
	c.mu.Unlock()
}

// endRequest ends it.
func (c *Conn) endRequest() {
	c.mu.Lock()
	c.inRequest, c.reqCause = false, ""
	c.mu.Unlock()
}

// noteResult records the request's failure, when a reply of cmd carries
// the negative result rv, for the process on the other end (Reply,
// send): before the reply goes out, so that the client finds it as soon
// as it has its answer. Private commands are not recorded: LAST_ERROR
// must not replace what it reports, and REEXEC answers with its reason
// itself. Replies outside a request (a payload refused before dispatch)
// are not either.
func (c *Conn) noteResult(cmd wire.Cmd, rv int32) {
	if rv >= 0 || cmd.Private() || c.peerPid <= 0 {
		return
	}
	c.mu.Lock()
	in, cause := c.inRequest, c.reqCause
	c.mu.Unlock()
	if !in {
		return
	}
	c.srv.fails.record(c.peerPid, failure{uid: c.peerUID, start: procStart(c.peerPid), cmd: cmd, code: rv, cause: cause})
}

// noteCause notes why the request is failing, in plain words: the first
// cause noted counts.
func (c *Conn) noteCause(text string) {
	c.mu.Lock()
	if c.reqCause == "" {
		c.reqCause = text
	}
	c.mu.Unlock()
}

// result is the wire result of err (the package's result) and notes the
// cause err carries.
func (c *Conn) result(err error) int32 {
	if err != nil {
		c.noteCause(causeText(err))
	}
	return result(err)
}

// causeText is the explanation a manager error carries (manager.Cause,
// the holder of a lease held elsewhere), "" when it is a bare code.
func causeText(err error) string {
	var he *manager.HeldError
	if errors.As(err, &he) {
		return he.Cause
	}
	return manager.Cause(err)
}

// cmdLastError answers LAST_ERROR (a private command): the last failure
// recorded for the asking process, as one StateLastError record, or
// -ENOENT when there is none; the connection is then closed.
func cmdLastError(_ context.Context, c *Conn, q *wire.Request) error {
	f, age, ok := c.srv.fails.lookup(c.peerPid, c.peerUID, procStart(c.peerPid))
	if !ok {
		return c.send(&wire.Reply{Header: replyHeader(q, rescode.RvENOENT, 0)})
	}
	rec := wire.StateRecord{State: wire.State{Type: wire.StateLastError, Flags: uint32(f.code), Data32: uint32(f.cmd),
		Data64: uint64(age.Milliseconds()), Name: f.cmd.DebugName()}, Text: f.cause}
	return c.send(&wire.Reply{Header: replyHeader(q, 0, 0), Records: []wire.StateRecord{rec}})
}
