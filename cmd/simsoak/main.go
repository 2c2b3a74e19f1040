// Command simsoak runs the testdisk/sim simulator over seed after seed,
// with the default fault mix, until stopped (SIGINT/SIGTERM), until a
// duration has passed or until a number of lease operations was reached.
// Every interval it prints operations per second, faults injected and
// violations; on a violation it prints the report (seed, replay command,
// last trace lines) and exits 1.
//
//	go run ./cmd/simsoak -duration 10m
//	go run ./cmd/simsoak -ops 1000000 -seed 1
//
// Seeds are independent runs, so -procs N runs N of them at a time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/sim"
)

func main() {
	os.Exit(run())
}

func run() int {
	seed := flag.Uint64("seed", 0, "first seed (0: from the clock); seeds run in order from it")
	dur := flag.Duration("duration", 0, "stop after this long (0: no limit)")
	ops := flag.Uint64("ops", 0, "stop after this many lease operations (0: no limit)")
	per := flag.Int("per-seed", 2000, "lease operations per seed")
	every := flag.Duration("every", 10*time.Second, "progress line interval")
	procs := flag.Int("procs", 1, "seeds run at a time (each seed runs on one goroutine at a time)")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	if *procs < 1 {
		*procs = 1
	}
	// The simulator hands control between goroutines; one P per seed
	// avoids cross-CPU wake-ups.
	runtime.GOMAXPROCS(*procs)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	fmt.Printf("simsoak: first seed %d, %d ops per seed, procs %d\n", *seed, *per, *procs)

	var (
		mu                             sync.Mutex
		next                           = *seed
		seeds, total, steps            uint64
		diskFaults, hostFaults, resets uint64
		escalations, kills             uint64
		violation                      *sim.Result
		done                           atomic.Bool
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range *procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && !done.Load() {
				mu.Lock()
				s := next
				next++
				mu.Unlock()
				cfg := sim.DefaultConfig(s)
				cfg.MaxOps = *per
				r := sim.Run(cfg)
				mu.Lock()
				seeds++
				total += r.Counts.Ops()
				steps += r.Steps
				diskFaults += r.Disk.Injected() + r.Disk.Cut
				hostFaults += r.Counts.HostFaults()
				resets += r.Counts.Resets
				escalations += r.Counts.Doomed
				kills += r.Counts.Kills
				if r.Violation != nil && violation == nil {
					violation = r
					done.Store(true)
				}
				if *ops > 0 && total >= *ops {
					done.Store(true)
				}
				mu.Unlock()
			}
		}()
	}
	line := func() {
		mu.Lock()
		defer mu.Unlock()
		el := time.Since(start)
		v := 0
		if violation != nil {
			v = 1
		}
		fmt.Printf("%8s seeds=%d (%d..%d) ops=%d ops/s=%.0f steps=%d disk-faults=%d host-faults=%d watchdog-resets=%d escalations=%d signals=%d violations=%d\n",
			el.Round(time.Second), seeds, *seed, next-1, total, float64(total)/el.Seconds(), steps, diskFaults, hostFaults, resets,
			escalations, kills, v)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(*every)
	defer tick.Stop()
loop:
	for {
		select {
		case <-tick.C:
			line()
		case <-finished:
			break loop
		}
	}
	line()
	if violation != nil {
		fmt.Print(violation.Report())
		return 1
	}
	return 0
}
