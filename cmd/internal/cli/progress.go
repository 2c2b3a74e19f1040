package cli

import (
	"fmt"
	"io"
	"sync"
)

// progress draws one status line on stderr while a client action waits,
// redrawn in place, only when stderr is a terminal. A nil or disabled
// progress draws nothing, so callers need not ask.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool // a line is on the screen
}

// newProgress is the progress line of an action writing to w; nil unless
// tty.
func newProgress(w io.Writer, tty bool) *progress {
	if !tty {
		return nil
	}
	return &progress{w: w}
}

// show replaces the line with "sanlock: " and the formatted text.
func (p *progress) show(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[Ksanlock: "+format, a...)
	p.shown = true
}

// note writes "sanlock: " and the formatted text as a line of its own
// that stays on the screen: the redrawn line, if any, is erased first and
// drawn again by the next show.
func (p *progress) note(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[Ksanlock: "+format+"\n", a...)
	p.shown = false
}

// clear removes the line, leaving the cursor at the start of it.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
