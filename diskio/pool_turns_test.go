package diskio

import (
	"context"
	"testing"
	"time"
)

// TestBackgroundReadTurns: background reads of a large class take one of
// bgReadTurns turns; the next waits for a turn to come back with its
// buffer, gives up after bgReadWait, and foreground reads never wait.
func TestBackgroundReadTurns(t *testing.T) {
	const n = 1 << 20
	bg := Background(context.Background())
	saved := bgReadWait
	defer func() { bgReadWait = saved }()

	bgReadWait = time.Minute
	var held []*Buf
	for range bgReadTurns {
		b := getBufFor(bg, n)
		if !b.turn {
			t.Fatal("a background read found no free turn")
		}
		held = append(held, b)
	}
	if b := getBufFor(context.Background(), n); b.turn {
		t.Fatal("a foreground read took a turn")
	} else {
		b.Release()
	}
	if b := getBufFor(bg, 4096); b.turn {
		t.Fatal("a small background read took a turn")
	} else {
		b.Release()
	}
	got := make(chan *Buf)
	go func() { got <- getBufFor(bg, n) }()
	select {
	case b := <-got:
		t.Fatalf("a background read went on with all turns taken (turn %v)", b.turn)
	case <-time.After(50 * time.Millisecond):
	}
	held[0].Release()
	b := <-got
	if !b.turn {
		t.Fatal("the waiting read did not get the released turn")
	}
	held[0] = b

	// A bounded wait: with every turn out, the read goes on without one.
	bgReadWait = 10 * time.Millisecond
	b = getBufFor(bg, n)
	if b.turn {
		t.Fatal("a read that found no turn in time holds one")
	}
	b.Release()
	// So does one whose deadline leaves too little time to wait.
	bgReadWait = time.Minute
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	b = getBufFor(ctx, n)
	if b.turn || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("turn %v after %v: the wait was not bounded by the deadline", b.turn, time.Since(start))
	}
	b.Release()

	// An abandoned buffer (timed-out read) gives its turn back.
	held[1].endTurn()
	if b := getBufFor(bg, n); !b.turn {
		t.Fatal("the abandoned buffer's turn did not come back")
	} else {
		held[1] = b
	}
	for _, b := range held {
		b.Release()
	}
	if len(bgReads) != 0 {
		t.Fatalf("%d turns still out", len(bgReads))
	}
}
