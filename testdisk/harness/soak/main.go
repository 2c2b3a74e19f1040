// Command soak runs the mixed-cluster exclusion scenario for a long time
// with storage faults and host pauses injected, and checks every recorded
// holding as it goes (see scripts/soak.sh, docs/harness.md).
//
// It builds our sanlock and the holder program, starts one emulated host
// per -kinds entry on one lockspace, runs -holders holder processes per host
// on one resource, and until -duration or -count is reached (or SIGINT /
// SIGTERM) injects one fault at a time on a random host:
//
//	delay  5-50 ms latency on every I/O of the host, for 1-4 s
//	eio    EIO on every I/O of the host, for 0.5-2 s
//	hang   every I/O of the host held, for 0.5-2 s
//	pause  SIGSTOP of the whole host (daemon and clients), for 0.5-3 s
//
// Each fault stays well below 8 x io_timeout (8 s), so no host loses its
// lockspace; safety must hold whatever the faults do. Every -interval it
// prints one line: elapsed time, acquisitions (total and per second over
// the interval), faults injected, holder restarts and violations. The last
// line starts with "soak:"; the exit status is 1 if any violation was found.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

func main() {
	var (
		kindsFlag = flag.String("kinds", "c,go,go", "host kinds (c, go, c395 or c511), one per host")
		holders   = flag.Int("holders", 2, "holder processes per host")
		duration  = flag.Duration("duration", 0, "stop after this long (0: until -count or a signal)")
		count     = flag.Int("count", 0, "stop after this many acquisitions (0: no limit)")
		shared    = flag.Float64("shared", 0.3, "fraction of shared-mode acquisitions")
		faults    = flag.Bool("faults", true, "inject storage faults and pauses")
		interval  = flag.Duration("interval", 10*time.Second, "report interval")
		keep      = flag.Bool("keep", false, "keep the work directory (logs) at the end")
		seed      = flag.Uint64("seed", 0, "fault schedule seed (0: from the clock)")
	)
	flag.Parse()
	os.Exit(run(*kindsFlag, *holders, *duration, *count, *shared, *faults, *interval, *keep, *seed))
}

func run(kindsFlag string, nHolders int, duration time.Duration, count int, shared float64,
	faults bool, interval time.Duration, keep bool, seed uint64) int {
	kinds, err := harness.ParseKinds(kindsFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "soak: needs root (FUSE mounts, daemons)")
		return 2
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	bin, err := os.MkdirTemp("", "soak-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	goSanlock, holderBin, err := harness.Build(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := harness.NewCluster(harness.Options{GoBinary: goSanlock, KeepDir: keep,
		Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "soak: close:", err)
		}
		if keep {
			fmt.Println("soak: work directory kept:", c.Dir)
		}
	}()
	const ls = "soak"
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "soak:", err)
		c.Keep()
		keep = true
		return 1
	}
	if err := c.InitLockspace("ls", ls, 1); err != nil {
		return fail(err)
	}
	if err := c.InitResource("res", ls, "r1", 8); err != nil {
		return fail(err)
	}
	hosts := make([]*harness.Host, len(kinds))
	for i, k := range kinds {
		h, err := c.AddHost(k, fmt.Sprintf("h%d%s", i+1, k))
		if err != nil {
			return fail(err)
		}
		hosts[i] = h
	}
	errs := make(chan error, len(hosts))
	for i, h := range hosts {
		go func() { errs <- h.AddLockspace(ls, uint64(i+1), "ls", 1) }()
	}
	for range hosts {
		if err := <-errs; err != nil {
			return fail(err)
		}
	}
	fmt.Printf("soak: seed %d, hosts %v, %d holders per host, shared %.0f%%, faults %v, work dir %s\n",
		seed, kinds, nHolders, shared*100, faults, c.Dir)

	type holder struct {
		h        *harness.Host
		name     string
		log      string
		proc     *harness.Proc
		off      int64
		restarts int
	}
	var hs []*holder
	start := func(x *holder) error {
		p, _, err := x.h.StartProc(x.name, holderBin, "-host", x.h.Name, "-ls", ls, "-res", "r1",
			"-path", x.h.Path("res"), "-log", x.log, "-shared", fmt.Sprint(shared))
		x.proc = p
		return err
	}
	for _, h := range hosts {
		for k := 0; k < nHolders; k++ {
			x := &holder{h: h, name: fmt.Sprintf("holder%d", k), log: filepath.Join(h.Dir, fmt.Sprintf("holder%d.log", k))}
			if err := start(x); err != nil {
				return fail(err)
			}
			hs = append(hs, x)
		}
	}

	var all []harness.Holding
	// collect reads the complete new records of every holder log.
	collect := func() error {
		for _, x := range hs {
			f, err := os.Open(x.log)
			if err != nil {
				if os.IsNotExist(err) {
					continue
				}
				return err
			}
			if _, err := f.Seek(x.off, io.SeekStart); err != nil {
				f.Close()
				return err
			}
			r := bufio.NewReader(f)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break // partial last line: read it next time
				}
				x.off += int64(len(line))
				h, err := harness.ParseHoldings(strings.NewReader(line))
				if err != nil {
					f.Close()
					return err
				}
				all = append(all, h...)
			}
			f.Close()
		}
		return nil
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	began := time.Now()
	var end <-chan time.Time
	if duration > 0 {
		end = time.After(duration)
	}
	report := time.NewTicker(interval)
	defer report.Stop()
	nextFault := time.After(time.Duration(1+rng.IntN(3)) * time.Second)
	var faultEnd <-chan time.Time
	var undo func()
	injected := map[string]int{}
	var violations []string
	lastN, lastT := 0, began
	restarts := 0

	status := func(prefix string) {
		now := time.Now()
		rate := float64(len(all)-lastN) / now.Sub(lastT).Seconds()
		lastN, lastT = len(all), now
		var fs []string
		for k, n := range injected {
			fs = append(fs, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(fs)
		total := 0
		for _, n := range injected {
			total += n
		}
		fmt.Printf("%s%v acquisitions %d (%.1f/s) faults %d (%s) holder restarts %d violations %d\n",
			prefix, now.Sub(began).Round(time.Second), len(all), rate, total, strings.Join(fs, " "),
			restarts, len(violations))
	}

loop:
	for {
		select {
		case <-sig:
			break loop
		case <-end:
			break loop
		case <-report.C:
			if err := collect(); err != nil {
				return fail(err)
			}
			violations = harness.Check(all)
			for _, v := range violations {
				fmt.Println("VIOLATION:", v)
			}
			if len(violations) > 0 {
				break loop
			}
			status("")
			for _, x := range hs {
				if x.proc.Exited() {
					fmt.Printf("  %s %s exited (%v); restarting\n", x.h.Name, x.name, x.proc.Err())
					x.restarts++
					restarts++
					if err := start(x); err != nil {
						return fail(err)
					}
				}
			}
			if count > 0 && len(all) >= count {
				break loop
			}
		case <-nextFault:
			if !faults {
				continue
			}
			h := hosts[rng.IntN(len(hosts))]
			var d time.Duration
			switch kind := []string{"delay", "eio", "hang", "pause"}[rng.IntN(4)]; kind {
			case "delay":
				d = time.Second + time.Duration(rng.IntN(3000))*time.Millisecond
				h.SetFault(fusefault.Fault{Mode: fusefault.Delay, Delay: time.Duration(5+rng.IntN(45)) * time.Millisecond})
				undo = func() { h.SetFault(fusefault.Fault{}) }
				injected[kind]++
			case "eio", "hang":
				d = 500*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
				m := fusefault.Error
				if kind == "hang" {
					m = fusefault.Hang
				}
				h.SetFault(fusefault.Fault{Mode: m})
				undo = func() { h.SetFault(fusefault.Fault{}) }
				injected[kind]++
			case "pause":
				d = 500*time.Millisecond + time.Duration(rng.IntN(2500))*time.Millisecond
				fmt.Printf("  %s: paused for %v\n", h.Name, d)
				if err := h.Pause(); err != nil {
					return fail(err)
				}
				undo = func() { h.Resume() }
				injected[kind]++
			}
			faultEnd = time.After(d)
		case <-faultEnd:
			undo()
			undo = nil
			// Leave the cluster alone for 2-6 s between faults, so that
			// renewals catch up.
			nextFault = time.After(time.Duration(2000+rng.IntN(4000)) * time.Millisecond)
		}
	}
	if undo != nil {
		undo()
	}
	for _, x := range hs {
		x.proc.Signal(syscall.SIGTERM)
	}
	for _, x := range hs {
		if err := x.proc.Wait(30 * time.Second); err != nil {
			fmt.Printf("  %s %s: %v\n", x.h.Name, x.name, err)
		}
	}
	if err := collect(); err != nil {
		return fail(err)
	}
	violations = harness.Check(all)
	for _, v := range violations {
		fmt.Println("VIOLATION:", v)
	}
	lastN, lastT = 0, began
	fmt.Printf("soak: %s, %d overlapping shared pairs\n", harness.Summary(all), harness.SharedOverlaps(all))
	status("soak: ")
	if len(violations) > 0 {
		c.Keep()
		keep = true
		return 1
	}
	return 0
}
