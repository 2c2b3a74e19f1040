package diskio

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestBackgroundReadTurns: background reads of a large class take one of
// the turns; the next waits for a turn to come back with its buffer, gives
// up after the turns' wait (or a twentieth of the time left before its
// deadline), and foreground and small reads never wait. The clock is the
// bubble's: the waits are exact.
func TestBackgroundReadTurns(t *testing.T) {
	const n = 1 << 20
	synctest.Test(t, func(t *testing.T) {
		bg := Background(context.Background())
		tr := newReadTurns(bgReadTurns, time.Minute)
		var held []*Buf
		for range bgReadTurns {
			b := tr.getBuf(bg, n)
			if b.turn != tr {
				t.Fatal("a background read found no free turn")
			}
			held = append(held, b)
		}
		if b := tr.getBuf(context.Background(), n); b.turn != nil {
			t.Fatal("a foreground read took a turn")
		} else {
			b.Release()
		}
		if b := tr.getBuf(bg, 4096); b.turn != nil {
			t.Fatal("a small background read took a turn")
		} else {
			b.Release()
		}

		// With every turn out, a read waits until one comes back.
		got := make(chan *Buf)
		start := time.Now()
		go func() { got <- tr.getBuf(bg, n) }()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("a background read went on with all turns taken (turn %v)", b.turn != nil)
		default:
		}
		held[0].Release()
		b := <-got
		if b.turn != tr {
			t.Fatal("the waiting read did not get the released turn")
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("the waiting read went on after %v, want at the release (1s)", d)
		}
		held[0] = b

		// A bounded wait: with every turn out, the read goes on without
		// one after the turns' wait.
		tr.wait = 10 * time.Millisecond
		start = time.Now()
		b = tr.getBuf(bg, n)
		if b.turn != nil {
			t.Fatal("a read that found no turn in time holds one")
		}
		if d := time.Since(start); d != tr.wait {
			t.Fatalf("waited %v for a turn, want %v", d, tr.wait)
		}
		b.Release()

		// So does one whose deadline leaves too little time to wait: a
		// twentieth of the time left.
		tr.wait = time.Minute
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		start = time.Now()
		b = tr.getBuf(ctx, n)
		if d := time.Since(start); b.turn != nil || d != 10*time.Millisecond {
			t.Fatalf("turn %v after %v: the wait was not a twentieth of the 200ms left", b.turn != nil, d)
		}
		b.Release()

		// An abandoned buffer (timed-out read) gives its turn back.
		held[1].endTurn()
		if b := tr.getBuf(bg, n); b.turn != tr {
			t.Fatal("the abandoned buffer's turn did not come back")
		} else {
			held[1] = b
		}
		for _, b := range held {
			b.Release()
		}
		if len(tr.ch) != 0 {
			t.Fatalf("%d turns still out", len(tr.ch))
		}
	})
}

// TestProcessReadTurns: the process's turns are the documented ones.
func TestProcessReadTurns(t *testing.T) {
	if cap(bgTurns.ch) != bgReadTurns || bgTurns.wait != bgReadWait {
		t.Fatalf("process turns: %d, wait %v", cap(bgTurns.ch), bgTurns.wait)
	}
}
