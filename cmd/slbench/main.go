// Command slbench is `make bench`: it measures, side by side in one run on
// the storage under -dir, the bare I/O floor of a lease acquire+release,
// sanlock 3.8.5 (when installed) and gosanlock, and prints one table per
// case. Run it as root (the daemons start with -U root -G root).
//
//	slbench                         # every case, 3 runs, medians
//	slbench -quick                  # smoke sizes, a minute or so
//	slbench -cases serial,parallel -runs 5 -dir /mnt/san
//	slbench -cases serial -pprof /tmp/prof   # CPU/heap profile of gosanlock
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gosanlock/gosanlock/internal/bench"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("slbench", flag.ContinueOnError)
	cfg := bench.Defaults()
	if slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimLeft(a, "-")
		return a == "quick" || a == "quick=true"
	}) {
		cfg = cfg.Quick()
	}
	cfg.Ours = defaultOurs()
	cases := strings.Join(cfg.Cases, ",")
	hosts := joinInts(cfg.Hosts)
	var jsonPath string
	var ioTimeout, smallTO, largeTO uint
	fs.Bool("quick", false, "smoke sizes: one run, a few pairs, tiny lockspace sets, H=2 (other flags still apply)")
	fs.StringVar(&cases, "cases", cases, "comma-separated cases: "+strings.Join(bench.AllCases, ",")+" (or all)")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs per case; tables show the median of the runs")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory for the lease files (the storage to measure; not tmpfs: O_DIRECT)")
	fs.StringVar(&cfg.Ours, "ours", cfg.Ours, "gosanlock binary")
	fs.StringVar(&cfg.Sanlock, "sanlock", cfg.Sanlock, "sanlock 3.8.5 binary (\"\" or missing: not measured)")
	fs.StringVar(&cfg.Python, "python", cfg.Python, "python3 with python3-sanlock, a second driver of the serial case (\"\": none)")
	fs.UintVar(&ioTimeout, "io-timeout", uint(cfg.IOTimeout), "io_timeout of the serial, parallel, contention, held and multihost lockspaces")
	fs.IntVar(&cfg.Serial, "serial", cfg.Serial, "serial: acquire+release pairs")
	fs.IntVar(&cfg.ParClients, "par-clients", cfg.ParClients, "parallel: clients (one lease file each)")
	fs.IntVar(&cfg.ParPairs, "par-pairs", cfg.ParPairs, "parallel: pairs per client")
	fs.IntVar(&cfg.ContProcs, "cont-clients", cfg.ContProcs, "contention: clients")
	fs.IntVar(&cfg.ContResources, "cont-resources", cfg.ContResources, "contention: EX resources")
	fs.DurationVar(&cfg.ContDuration, "cont-duration", cfg.ContDuration, "contention: duration")
	fs.IntVar(&cfg.IdleSmall, "idle-small", cfg.IdleSmall, "idle: lockspaces in the small set")
	fs.UintVar(&smallTO, "idle-small-timeout", uint(cfg.IdleSmallTimeout), "idle: io_timeout of the small set")
	fs.IntVar(&cfg.IdleLarge, "idle-large", cfg.IdleLarge, "idle and join: lockspaces in the large set")
	fs.UintVar(&largeTO, "idle-large-timeout", uint(cfg.IdleLargeTimeout), "idle and join: io_timeout of the large set")
	fs.DurationVar(&cfg.IdleSettle, "settle", cfg.IdleSettle, "wait after joining (or acquiring) before measuring idle CPU/RSS (a joined daemon settles: its first renewals, gosanlock's drop of start-up pages 5 s after its second renewal)")
	fs.DurationVar(&cfg.IdleWindow, "idle-window", cfg.IdleWindow, "idle: CPU window of the small set")
	fs.DurationVar(&cfg.IdleLargeWindow, "idle-large-window", cfg.IdleLargeWindow, "idle: CPU window of the large set")
	fs.IntVar(&cfg.Held, "held", cfg.Held, "held: leases held by one client")
	fs.DurationVar(&cfg.HeldWindow, "held-window", cfg.HeldWindow, "held: CPU window while holding")
	fs.StringVar(&hosts, "hosts", hosts, "multihost: comma-separated host counts")
	fs.DurationVar(&cfg.MHSettle, "mh-settle", cfg.MHSettle, "multihost: wait after the joins before the idle window (a joined daemon settles: its first renewals, gosanlock's drop of start-up pages 5 s after its second renewal)")
	fs.DurationVar(&cfg.MHIdle, "mh-idle", cfg.MHIdle, "multihost: idle window")
	fs.DurationVar(&cfg.MHContend, "mh-contend", cfg.MHContend, "multihost: contention window")
	fs.StringVar(&cfg.PprofDir, "pprof", "", "save CPU and heap profiles of gosanlock under the serial load in this directory (needs SANLOCK_PPROF support)")
	fs.DurationVar(&cfg.PprofSeconds, "pprof-seconds", cfg.PprofSeconds, "length of the CPU profile")
	fs.StringVar(&jsonPath, "json", "", "also write every table (medians, ratios, per-run values) as JSON to this file (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cases != "all" {
		cfg.Cases = strings.Split(cases, ",")
	}
	var err error
	if cfg.Hosts, err = parseInts(hosts); err != nil {
		fmt.Fprintf(os.Stderr, "slbench: -hosts: %v\n", err)
		return 2
	}
	cfg.IOTimeout, cfg.IdleSmallTimeout, cfg.IdleLargeTimeout = uint32(ioTimeout), uint32(smallTO), uint32(largeTO)
	cfg.Progress = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := os.Stdout
	if jsonPath == "-" {
		out = os.Stderr
	}
	tables, err := bench.Run(ctx, cfg, out)
	if jsonPath != "" {
		w := os.Stdout
		if jsonPath != "-" {
			f, ferr := os.Create(jsonPath)
			if ferr != nil {
				fmt.Fprintf(os.Stderr, "slbench: %v\n", ferr)
				return 1
			}
			defer f.Close()
			w = f
		}
		if jerr := bench.WriteJSON(w, tables); jerr != nil {
			fmt.Fprintf(os.Stderr, "slbench: %v\n", jerr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "slbench: %v\n", err)
		return 1
	}
	return 0
}

// defaultOurs is the sanlock next to this executable, else bin/sanlock.
func defaultOurs() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "sanlock")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("bin", "sanlock")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
