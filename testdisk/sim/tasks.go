package sim

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"
)

// task is one goroutine of a simulated host. It runs only between a resume
// and its next park.
type task struct {
	s    *Sim
	in   *inst
	name string
	wake chan bool // true: die
	done bool
}

// spawn starts a task; it first runs at the current time.
func (s *Sim) spawn(in *inst, name string, fn func()) *task {
	t := &task{s: s, in: in, name: name, wake: make(chan bool)}
	in.tasks = append(in.tasks, t)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.violate = fmt.Errorf("panic in %s: %v\n%s", name, r, debug.Stack())
			}
			t.done = true
			s.yield <- t
		}()
		if <-t.wake {
			return
		}
		fn()
	}()
	s.push(&event{at: s.now, kind: evRun, t: t})
	return t
}

// resume runs t until it parks or ends.
func (s *Sim) resume(t *task) {
	if t.done {
		return
	}
	prev := s.running
	s.running = t
	t.wake <- false
	<-s.yield
	s.running = prev
}

// park gives control back to the scheduler; the caller has arranged for an
// event that resumes it (or none: blocked until killed).
func (t *task) park() {
	t.s.yield <- t
	if <-t.wake {
		runtime.Goexit()
	}
}

// kill ends a parked task.
func (s *Sim) kill(t *task) {
	if t.done {
		return
	}
	t.wake <- true
	<-s.yield
}

// sleepTrue parks the running task until true time at.
func (s *Sim) sleepUntil(at time.Duration) {
	t := s.running
	s.push(&event{at: at, kind: evRun, t: t})
	t.park()
}

// block parks the running task until it is killed.
func (s *Sim) block() { s.running.park() }

// waiter is a task parked in Setup.Await until ch is closed, or in
// Clock.Wait (ctx set) until ch has a value, ctx is done or its timer
// event runs it.
type waiter struct {
	t  *task
	ch <-chan struct{}

	ctx   context.Context // Clock.Wait only
	timer *event          // the wait's end
	woken *bool           // set when ch ended the wait
}

// await is the manager's Setup.Await: the running task parks until ch is
// closed. Channels are closed only by tasks, so after each step the
// scheduler looks at the waiters (wakeWaiters), in the order they came.
func (s *Sim) await(ch <-chan struct{}) {
	select {
	case <-ch:
		return
	default:
	}
	t := s.running
	s.waiters = append(s.waiters, waiter{t: t, ch: ch})
	t.park()
}

// waitUntil parks the running task until true time at, or until wake has
// a value (taken; it returns true) or ctx is done, whichever comes first:
// hostClock.Wait.
func (s *Sim) waitUntil(ctx context.Context, at time.Duration, wake <-chan struct{}) bool {
	t := s.running
	woken := false
	w := waiter{t: t, ch: wake, ctx: ctx, woken: &woken}
	w.timer = s.push(&event{at: at, kind: evRun, t: t})
	s.waiters = append(s.waiters, w)
	t.park()
	// Run by the timer: the waiter is still listed.
	for i, x := range s.waiters {
		if x.t == t && x.woken == &woken {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
	return woken
}

// wokenAt is when a Clock.Wait that was woken now resumes: now, or with
// a long CheckInterval (a late main loop, Config.CheckInterval) the next
// multiple of it on the host's clock.
func (s *Sim) wokenAt(sl *slot) time.Duration {
	ci := s.cfg.CheckInterval
	if ci <= time.Second {
		return s.now
	}
	l := sl.local(s.now)
	if l%ci == 0 {
		return s.now
	}
	return sl.trueAt(l + ci - l%ci)
}

// wakeWaiters schedules every waiter whose channel is closed (Setup.Await)
// or has a value, or whose context is done (Clock.Wait).
func (s *Sim) wakeWaiters() {
	keep := s.waiters[:0]
	for _, w := range s.waiters {
		if w.ctx != nil {
			select {
			case <-w.ch:
				*w.woken = true
			case <-w.ctx.Done():
			default:
				keep = append(keep, w)
				continue
			}
			s.remove(w.timer)
			s.push(&event{at: s.wokenAt(w.t.in.slot), kind: evRun, t: w.t})
			continue
		}
		select {
		case <-w.ch:
			s.push(&event{at: s.now, kind: evRun, t: w.t})
		default:
			keep = append(keep, w)
		}
	}
	s.waiters = keep
}
