package diskio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/rescode"
)

// Linux native AIO, as sanlock uses it through libaio: requests are
// submitted with io_submit and their completions collected by one
// long-lived reaper per AIO context. The caller waits on its request's
// completion with the io_timeout as deadline. A request that times out is
// abandoned: io_cancel is tried, its buffer is never given back to the pool
// and its slot stays taken until the kernel completes it. A hung disk so
// costs no thread at all: the reaper sleeps in the runtime's poller on an
// eventfd the kernel signals per completion (IOCB_FLAG_RESFD), and callers
// sleep on a channel.

// iocb is struct iocb of <linux/aio_abi.h>: 64 bytes, the same layout on
// every 64-bit Linux architecture. aio_key and aio_rw_flags swap places on
// big-endian machines; both are always zero here, so the order does not
// matter.
type iocb struct {
	data      uint64 // aio_data: our slot number + 1
	key       uint32 // aio_key (aio_rw_flags on big-endian)
	rwFlags   uint32 // aio_rw_flags (aio_key on big-endian)
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

// Layout checks: both sizes are fixed by the kernel ABI.
var (
	_ [64 - unsafe.Sizeof(iocb{})]byte
	_ [unsafe.Sizeof(iocb{}) - 64]byte
	_ [32 - unsafe.Sizeof(ioEvent{})]byte
	_ [unsafe.Sizeof(ioEvent{}) - 32]byte
)

const (
	iocbCmdPread  = 0
	iocbCmdPwrite = 1
	iocbFlagResfd = 1 << 0
	rwfNowait     = 0x8 // RWF_NOWAIT of <linux/fs.h>

	// aioSlots is the size of the process-wide AIO context: the most
	// requests in flight at once, stuck ones included (each device adds at
	// most maxInflight).
	aioSlots = 512
)

type reqState uint8

const (
	reqFree reqState = iota
	reqPending
	reqDone
	reqAbandoned
)

// aioReq is one slot of the context. Its iocb lives at a fixed address
// for as long as the kernel may refer to it (io_cancel looks it up by
// address), and buf stays referenced until the completion arrives, so the
// garbage collector never frees memory the kernel is still writing.
type aioReq struct {
	cb    iocb
	slot  int32
	state reqState // guarded by aioEngine.mu
	dev   *File
	buf   *Buf
	res   int64
	done  chan struct{} // completion signal, capacity 1
	// quiet: submitted without IOCB_FLAG_RESFD by a caller that collects
	// completions itself (counted in aioEngine.quiet until it completes).
	quiet bool // guarded by aioEngine.mu
}

type aioEngine struct {
	id    uintptr // aio_context_t
	efd   *os.File
	efdNo int        // efd's number (os.File.Fd would make it blocking)
	slots chan int32 // free slot numbers
	mu    sync.Mutex
	reqs  []aioReq
	// reapMu is held by whoever collects completions (io_getevents): the
	// background reaper, or a caller waiting for its own request in the
	// kernel (the fast path of do). One collector at a time, so a blocking
	// io_getevents never misses a completion another collector took.
	reapMu sync.Mutex
	// quiet counts requests in flight that do not signal the eventfd.
	// While there are any, the background reaper also polls the ring every
	// quietPoll.
	quiet atomic.Int32
	// nowait: background requests are submitted with RWF_NOWAIT as a raw
	// system call first (see submit); cleared for good when the kernel or
	// the file system rejects the flag.
	nowait atomic.Bool
	// selfReapOn: callers collect completions themselves when no one else
	// does (the fast path of do); without it only the reaper does.
	selfReapOn bool
}

// Background marks the I/O done under ctx as background work whose
// latency does not matter (the delta lease renewals): it is submitted and
// collected without a single system call that enters the runtime's
// syscall state, so an idle daemon's renewals do not wake the runtime's
// sysmon thread, which then polls every 20 µs until the process is idle
// again (docs/performance.md "Background I/O"). The caller waits
// on its channel, the background reaper collects the completion.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

type backgroundKey struct{}

func isBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

// quietPoll is how often the background reaper looks for completions of
// quiet requests whose submitter stopped collecting (a disk slower than
// selfReapMax, or a timed-out request).
const quietPoll = 10 * time.Millisecond

// selfReapMax bounds how long a caller waits for its own request in
// io_getevents (holding a thread in the kernel) before it falls back to
// the channel the background reaper signals. A healthy disk answers well
// within it; on a hung disk one thread and its P at most are held, for
// this long (see collect).
const selfReapMax = 20 * time.Millisecond

var (
	aioOnce sync.Once
	aioEng  *aioEngine
	aioErr  error
)

// sharedAIO returns the process-wide AIO engine, set up on first use, or
// nil when native AIO is unavailable (io_setup failing with EAGAIN because
// fs.aio-max-nr is used up, ENOSYS) or turned off for the process
// (GOSANLOCK_SYNC_IO=1 in the environment at the first use): every device
// then uses the synchronous fallback.
func sharedAIO() *aioEngine {
	aioOnce.Do(func() {
		if os.Getenv("GOSANLOCK_SYNC_IO") == "1" {
			aioErr = errors.New("disabled by GOSANLOCK_SYNC_IO=1")
			return
		}
		aioEng, aioErr = newAIOEngine(aioSlots, true)
	})
	return aioEng
}

// AIOStatus reports whether devices use native AIO and, if not, why.
func AIOStatus() (bool, error) {
	e := sharedAIO()
	return e != nil, aioErr
}

// newAIOEngine sets up an AIO context of n slots and starts its reaper.
// selfReapOn enables the fast path of do (a caller collecting its own
// completion); the process's engine has it, a test may make one without.
func newAIOEngine(n int, selfReapOn bool) (*aioEngine, error) {
	var id uintptr
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, uintptr(n), uintptr(unsafe.Pointer(&id)), 0); errno != 0 {
		return nil, fmt.Errorf("io_setup: %w", errno)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, id, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	e := &aioEngine{
		selfReapOn: selfReapOn,
		id:         id,
		efd:        os.NewFile(uintptr(efd), "aio-eventfd"), // non-blocking: served by the runtime poller
		efdNo:      efd,
		slots:      make(chan int32, n),
		reqs:       make([]aioReq, n),
	}
	// aio_rw_flags is the second 32-bit word of the iocb only on
	// little-endian machines (see iocb); elsewhere no RWF_NOWAIT.
	one := uint16(1)
	e.nowait.Store(*(*byte)(unsafe.Pointer(&one)) == 1)
	for i := range e.reqs {
		e.reqs[i].slot = int32(i)
		e.reqs[i].done = make(chan struct{}, 1)
		e.slots <- int32(i)
	}
	go e.reap()
	return e, nil
}

// reap collects completions for the life of the process. It waits on the
// eventfd (no thread is blocked while it waits), then drains the ring.
func (e *aioEngine) reap() {
	var cnt [8]byte
	var evs [64]ioEvent
	var zero unix.Timespec
	rc, err := e.efd.SyscallConn()
	if err != nil {
		return
	}
	// Neither call below can block (the eventfd is non-blocking, the
	// io_getevents timeout is zero), so they are raw system calls: an
	// ordinary one wakes the runtime's sysmon thread whenever the process
	// was idle (see Background). The wait for the eventfd stays the
	// runtime poller's.
	readEfd := func(fd uintptr) bool {
		_, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&cnt[0])), uintptr(len(cnt)))
		return errno != unix.EAGAIN
	}
	polling := false
	for {
		if q := e.quiet.Load() > 0; q != polling {
			polling = q
			if !q {
				_ = e.efd.SetReadDeadline(time.Time{})
			}
		}
		if polling {
			_ = e.efd.SetReadDeadline(time.Now().Add(quietPoll))
		}
		if err := rc.Read(readEfd); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		e.reapMu.Lock()
		for {
			n, _, errno := unix.RawSyscall6(unix.SYS_IO_GETEVENTS, e.id, 0, uintptr(len(evs)),
				uintptr(unsafe.Pointer(&evs[0])), uintptr(unsafe.Pointer(&zero)), 0)
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 || n == 0 {
				break
			}
			for i := range evs[:n] {
				e.complete(&evs[i])
			}
			if int(n) < len(evs) {
				break
			}
		}
		e.reapMu.Unlock()
	}
}

// selfReap is collect for a request submitted with IOCB_FLAG_RESFD, when
// no one else is collecting completions.
func (e *aioEngine) selfReap(ctx context.Context, r *aioReq) bool {
	if !e.selfReapOn || !e.reapMu.TryLock() {
		return false
	}
	return e.collect(ctx, r)
}

// kick wakes the background reaper, so it sees that quiet requests are in
// flight and polls for them.
func (e *aioEngine) kick() {
	one := [8]byte{1}
	_, _ = unix.Write(e.efdNo, one[:])
}

// collect is the fast path of a caller waiting for r, run holding reapMu
// (which it releases): it waits for completions itself in io_getevents, so
// the kernel wakes this thread directly (no hop through the eventfd, the
// runtime's poller and the reaper goroutine). Completions of other requests
// it collects are delivered as the reaper would. It stops when r is done
// (and reports true: r.done then holds its signal), at ctx's deadline or
// after selfReapMax, whichever is first. Requests that signal the eventfd
// are left to the background reaper after that; for quiet ones, see kick.
func (e *aioEngine) collect(ctx context.Context, r *aioReq) bool {
	defer e.reapMu.Unlock()
	until := time.Now().Add(selfReapMax)
	if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
		until = dl
	}
	var evs [16]ioEvent
	for {
		e.mu.Lock()
		done := r.state == reqDone
		e.mu.Unlock()
		if done {
			return true
		}
		left := time.Until(until)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		ts := unix.NsecToTimespec(left.Nanoseconds())
		// A raw call, although it blocks: an ordinary one puts the P up
		// for grabs and wakes the runtime's sysmon thread, which then
		// polls every 20 µs for as long as the disk takes, and hands the
		// P to another thread when other goroutines are runnable, so the
		// completion wakes a thread that must first get a P back: on a
		// virtual machine that costs more than the rest of the I/O path.
		// Held this way, the P waits with us for at most selfReapMax;
		// the other Ps (docs/performance.md "One P while idle":
		// there are several whenever more than one request is in
		// flight) and the background reaper go on. A signal (the
		// runtime's preemption included) ends the wait with EINTR.
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_GETEVENTS, e.id, 1, uintptr(len(evs)),
			uintptr(unsafe.Pointer(&evs[0])), uintptr(unsafe.Pointer(&ts)), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n > uintptr(len(evs)) {
			return false
		}
		for i := range evs[:n] {
			e.complete(&evs[i])
		}
	}
}

// complete handles one completion: it wakes the waiting caller, or, for an
// abandoned request, drops the buffer and frees the slot and the device's
// in-flight token.
func (e *aioEngine) complete(ev *ioEvent) {
	s := int(ev.data) - 1
	if s < 0 || s >= len(e.reqs) {
		return
	}
	r := &e.reqs[s]
	e.mu.Lock()
	if r.quiet && (r.state == reqPending || r.state == reqAbandoned) {
		r.quiet = false
		e.quiet.Add(-1)
	}
	switch r.state {
	case reqPending:
		r.res = ev.res
		r.state = reqDone
		e.mu.Unlock()
		r.done <- struct{}{}
	case reqAbandoned:
		e.finishAbandonedLocked(r)
		e.mu.Unlock()
	default:
		e.mu.Unlock()
	}
}

// finishAbandonedLocked ends a timed-out request the kernel has now
// completed: the buffer is dropped (never pooled), the slot and the
// device's token return.
func (e *aioEngine) finishAbandonedLocked(r *aioReq) {
	d := r.dev
	r.buf, r.dev, r.state = nil, nil, reqFree
	e.slots <- r.slot
	d.unstick()
}

// do runs one read or write of b at off on d and waits for it until ctx is
// done. The caller holds one of d's in-flight tokens; do gives it back when
// the kernel is done with the request. On timeout b is owned by the
// request and must not be touched again by the caller.
func (e *aioEngine) do(ctx context.Context, d *File, write bool, b *Buf, off int64) (int, error) {
	var s int32
	select {
	case s = <-e.slots:
	default:
		select {
		case s = <-e.slots:
		case <-ctx.Done():
			d.release()
			return 0, timeoutErr(ctx)
		}
	}
	r := &e.reqs[s]
	p := b.Bytes()
	// Quiet: when no one is collecting completions, we become the
	// collector before submitting, and the request need not signal the
	// eventfd (no wake-up of the background reaper per I/O).
	bg := isBackground(ctx)
	quiet := e.selfReapOn && !bg && e.reapMu.TryLock()
	r.cb = iocb{
		data:   uint64(s) + 1,
		opcode: iocbCmdPread,
		fildes: uint32(d.fd),
		buf:    uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))),
		nbytes: uint64(len(p)),
		offset: off,
	}
	if !quiet {
		r.cb.flags, r.cb.resfd = iocbFlagResfd, uint32(e.efdNo)
	}
	if write {
		r.cb.opcode = iocbCmdPwrite
	}
	r.dev, r.buf = d, b
	e.mu.Lock()
	r.state = reqPending
	if quiet {
		r.quiet = true
		e.quiet.Add(1)
	}
	e.mu.Unlock()

	if err := d.submit(e, r, bg); err != nil {
		e.mu.Lock()
		if r.quiet {
			r.quiet = false
			e.quiet.Add(-1)
		}
		r.buf, r.dev, r.state = nil, nil, reqFree
		e.mu.Unlock()
		if quiet {
			e.reapMu.Unlock()
		}
		e.slots <- s
		d.release()
		return 0, err
	}

	if quiet {
		if e.collect(ctx, r) {
			<-r.done
			return e.finish(r, d)
		}
		// r may complete without a signal: the reaper polls until it has.
		e.kick()
	} else if !bg && e.selfReap(ctx, r) {
		<-r.done
		return e.finish(r, d)
	}
wait:
	select {
	case <-r.done:
		if resubmitted, err := e.again(r, d); resubmitted {
			goto wait
		} else if err != nil {
			_, _ = e.finish(r, d)
			return 0, err
		}
		return e.finish(r, d)
	case <-ctx.Done():
	}
	e.mu.Lock()
	if r.state == reqDone { // completed while we gave up: take it
		e.mu.Unlock()
		<-r.done
		return e.finish(r, d)
	}
	r.state = reqAbandoned
	d.stick()
	// Worth a try, though block devices and files do not support it (the
	// kernel answers EINVAL). Current kernels deliver a cancelled request's
	// completion through the ring too (io_cancel answers EINPROGRESS), so
	// the slot is only ever freed by the reaper. The call is made under
	// e.mu: the slot cannot be completed and handed out again meanwhile, so
	// it can only name this request.
	var ev ioEvent
	unix.Syscall(unix.SYS_IO_CANCEL, e.id, uintptr(unsafe.Pointer(&r.cb)), uintptr(unsafe.Pointer(&ev)))
	e.mu.Unlock()
	return 0, timeoutErr(ctx)
}

// again resubmits, without RWF_NOWAIT, a request that completed with
// -EAGAIN because it was submitted with RWF_NOWAIT and would have had to
// wait (for a request tag, say). The kernel is done with the request, so
// its slot and buffer are the caller's again; reading or writing the same
// bytes at the same offset a second time changes nothing. It reports
// whether the request is in flight again, or the error of a resubmission
// that failed (the request is then done; the caller finishes it).
func (e *aioEngine) again(r *aioReq, d *File) (bool, error) {
	if r.res != -int64(unix.EAGAIN) || r.cb.rwFlags&rwfNowait == 0 {
		return false, nil
	}
	aioNowaitRetries.Add(1)
	e.mu.Lock()
	r.state = reqPending
	e.mu.Unlock()
	if err := d.submit(e, r, false); err != nil {
		e.mu.Lock()
		r.state = reqDone
		e.mu.Unlock()
		return false, err
	}
	return true, nil
}

// aioNowaitRetries counts the requests resubmitted by again (tests).
var aioNowaitRetries atomic.Int64

// finish ends a request that completed in time and returns its result.
func (e *aioEngine) finish(r *aioReq, d *File) (int, error) {
	res := r.res
	e.mu.Lock()
	r.buf, r.dev, r.state = nil, nil, reqFree
	e.mu.Unlock()
	e.slots <- r.slot
	d.release()
	if res < 0 {
		return 0, unix.Errno(-res)
	}
	return int(res), nil
}

// submit hands r to the kernel; nowait allows the RWF_NOWAIT attempt.
func (d *File) submit(e *aioEngine, r *aioReq, nowait bool) error {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return os.ErrClosed
	}
	ptrs := [1]*iocb{&r.cb}
	r.cb.rwFlags = 0
	if nowait && e.nowait.Load() {
		// With RWF_NOWAIT the kernel does not wait inside io_submit (for
		// a request tag, an inode lock, ...): it fails with EAGAIN, now
		// or as the request's completion (see again). So the call cannot
		// hang and is made raw, without entering the runtime's syscall
		// state (see Background). Whatever fails is submitted again
		// below the ordinary way, which may wait.
		r.cb.rwFlags = rwfNowait
		n, _, errno := unix.RawSyscall(unix.SYS_IO_SUBMIT, e.id, 1, uintptr(unsafe.Pointer(&ptrs[0])))
		if errno == 0 && n == 1 {
			return nil
		}
		if errno == unix.EINVAL || errno == unix.EOPNOTSUPP {
			e.nowait.Store(false) // a kernel or file system without RWF_NOWAIT
		}
		r.cb.rwFlags = 0
	}
	for {
		n, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, e.id, 1, uintptr(unsafe.Pointer(&ptrs[0])))
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return fmt.Errorf("io_submit: %w", errno)
		case n != 1:
			return fmt.Errorf("io_submit: %d of 1 submitted: %w", n, unix.EIO)
		}
		return nil
	}
}

func timeoutErr(ctx context.Context) error {
	return fmt.Errorf("%w: %v", rescode.ErrIOTimeout, context.Cause(ctx))
}
