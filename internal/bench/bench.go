// Package bench is `make bench` (cmd/slbench): it measures, in one run and
// side by side, the bare I/O floor of an acquire+release (a few preads and
// pwrites, no daemon), sanlock 3.8.5 when /usr/sbin/sanlock is installed,
// and gosanlock, on the user's own storage, and prints one table per case
// with ratios taken within each run.
//
// Every daemon runs alone, as its own process in its own run directory
// (SANLOCK_RUN_DIR), started with `daemon -D -w 0 -l 0 -U root -G root`, on
// fresh lease files of the same kind (under Config.Dir), and is driven
// through the libsanlock wire protocol by the Go client package (and
// python3-sanlock, when installed, as a second driver of the serial case).
// Lease areas are formatted by a separate short-lived daemon of the same
// implementation, so formatting does not count in memory figures.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Case names, in the order they run.
const (
	CaseSerial     = "serial"
	CaseParallel   = "parallel"
	CaseContention = "contention"
	CaseIdle       = "idle"
	CaseJoin       = "join"
	CaseHeld       = "held"
	CaseMultiHost  = "multihost"
)

// AllCases lists every case.
var AllCases = []string{CaseSerial, CaseParallel, CaseContention, CaseIdle, CaseJoin, CaseHeld, CaseMultiHost}

// Config says what to measure and how much.
type Config struct {
	Cases []string // subset of AllCases
	Runs  int      // runs per case; tables show the median
	Dir   string   // lease files go in a fresh directory under Dir

	Ours    string // our sanlock binary (required)
	Sanlock string // sanlock 3.8.5 binary; "" or missing: not measured
	Python  string // python3 with the sanlock module; "": not used

	IOTimeout uint32 // io_timeout of the lease, contention and multihost cases

	Serial     int // serial: acquire+release pairs
	ParClients int // parallel: clients, each on its own lease file
	ParPairs   int // parallel: pairs per client

	ContProcs     int           // contention: registered clients
	ContResources int           // contention: EX resources (one file)
	ContDuration  time.Duration // contention: how long

	IdleSmall        int           // idle: lockspaces of the small set
	IdleSmallTimeout uint32        // ... and their io_timeout
	IdleLarge        int           // idle and join: lockspaces of the large set
	IdleLargeTimeout uint32        // ... and their io_timeout
	IdleSettle       time.Duration // idle: wait after joining before measuring
	IdleWindow       time.Duration // idle: CPU window of the small set
	IdleLargeWindow  time.Duration // idle: CPU window of the large set

	Held       int           // held: leases held by one client
	HeldWindow time.Duration // held: CPU window while holding

	Hosts     []int         // multihost: host counts
	MHSettle  time.Duration // multihost: wait after the joins before the idle window
	MHIdle    time.Duration // multihost: idle window
	MHContend time.Duration // multihost: contention window

	PprofDir     string        // save CPU and heap profiles of our daemon under the serial load
	PprofSeconds time.Duration // length of the profile

	Progress io.Writer // progress lines (nil: none)
}

// Defaults is `make bench`.
func Defaults() Config {
	return Config{
		Cases: AllCases, Runs: 3, Dir: "/var/tmp",
		Sanlock: "/usr/sbin/sanlock", Python: "/usr/bin/python3",
		IOTimeout: 1,
		Serial:    300, ParClients: 8, ParPairs: 100,
		ContProcs: 16, ContResources: 8, ContDuration: 30 * time.Second,
		IdleSmall: 20, IdleSmallTimeout: 1, IdleLarge: 100, IdleLargeTimeout: 10,
		IdleSettle: 12 * time.Second, IdleWindow: 20 * time.Second, IdleLargeWindow: 40 * time.Second,
		Held: 1000, HeldWindow: 20 * time.Second,
		Hosts: []int{2, 8, 32, 64}, MHSettle: 12 * time.Second, MHIdle: 20 * time.Second, MHContend: 60 * time.Second,
		PprofSeconds: 10 * time.Second,
	}
}

// Quick shrinks every size for a smoke run (seconds, not minutes): one
// run, a few pairs, small lockspace sets at io_timeout 1, two hosts.
func (c Config) Quick() Config {
	c.Runs = 1
	c.Serial, c.ParClients, c.ParPairs = 10, 2, 5
	c.ContProcs, c.ContResources, c.ContDuration = 4, 2, time.Second/2
	c.IdleSmall, c.IdleSmallTimeout, c.IdleLarge, c.IdleLargeTimeout = 2, 1, 3, 1
	c.IdleSettle, c.IdleWindow, c.IdleLargeWindow = 0, time.Second/2, time.Second/2
	c.Held, c.HeldWindow = 5, time.Second/2
	c.Hosts, c.MHSettle, c.MHIdle, c.MHContend = []int{2}, 0, time.Second/2, time.Second/2
	c.PprofSeconds = 2 * time.Second
	return c
}

func (c *Config) check() error {
	for _, n := range c.Cases {
		if !slices.Contains(AllCases, n) {
			return fmt.Errorf("unknown case %q (cases: %s)", n, strings.Join(AllCases, ","))
		}
	}
	if c.Runs < 1 {
		return errors.New("runs must be at least 1")
	}
	if c.Ours == "" {
		return errors.New("no gosanlock binary given")
	}
	if _, err := os.Stat(c.Ours); err != nil {
		return fmt.Errorf("gosanlock binary: %w", err)
	}
	if c.Serial < 1 || c.ParClients < 1 || c.ParPairs < 1 || c.ContProcs < 1 || c.ContResources < 1 ||
		c.IdleSmall < 1 || c.IdleLarge < 1 || c.Held < 1 {
		return errors.New("counts must be at least 1")
	}
	for _, h := range c.Hosts {
		if h < 1 || h > 2000 {
			return fmt.Errorf("host count %d out of 1..2000", h)
		}
	}
	if c.IOTimeout < 1 || c.IdleSmallTimeout < 1 || c.IdleLargeTimeout < 1 {
		return errors.New("io_timeout must be at least 1")
	}
	return nil
}

func (c *Config) has(name string) bool { return slices.Contains(c.Cases, name) }

func (c *Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// runner holds what every case needs.
type runner struct {
	cfg    Config
	impls  []Impl // sanlock first when present, then ours
	cols   []string
	python bool
}

// Impls returns the implementations that will be measured.
func (c Config) Impls() []Impl {
	var out []Impl
	if c.Sanlock != "" {
		if _, err := os.Stat(c.Sanlock); err == nil {
			out = append(out, Impl{Name: "sanlock-3.8.5", Bin: c.Sanlock})
		}
	}
	return append(out, Impl{Name: "gosanlock", Bin: c.Ours, Ours: true})
}

// pythonOK reports whether python has the sanlock module.
func pythonOK(py string) bool {
	if py == "" {
		return false
	}
	return exec.Command(py, "-c", "import sanlock").Run() == nil
}

// Run measures the selected cases and prints each case's table to out as
// soon as its runs are done. It returns every table (also for -json).
func Run(ctx context.Context, cfg Config, out io.Writer) ([]*Table, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, impls: cfg.Impls(), python: pythonOK(cfg.Python)}
	for _, im := range r.impls {
		r.cols = append(r.cols, im.Name)
	}
	cfg.progress("measuring %s with %s; lease files under %s; %d run(s)",
		strings.Join(cfg.Cases, ","), strings.Join(r.cols, " and "), cfg.Dir, cfg.Runs)
	var tables []*Table
	emit := func(ts ...*Table) {
		for _, t := range ts {
			if t != nil && len(t.rows) > 0 {
				t.Print(out)
				tables = append(tables, t)
			}
		}
	}
	groups := []struct {
		cases []string
		fn    func(context.Context) ([]*Table, error)
	}{
		{[]string{CaseSerial, CaseParallel, CaseContention}, r.leaseGroup},
		{[]string{CaseIdle, CaseJoin}, r.lockspaceGroup},
		{[]string{CaseHeld}, r.heldCase},
		{[]string{CaseMultiHost}, r.multiHostCase},
	}
	for _, g := range groups {
		if !slices.ContainsFunc(g.cases, cfg.has) {
			continue
		}
		ts, err := g.fn(ctx)
		emit(ts...)
		if err != nil {
			return tables, err
		}
	}
	return tables, nil
}

// order returns the implementations in the order run measures them:
// alternated from run to run, so that a slow phase of a noisy machine does
// not always fall on the same one.
func (r *runner) order(run int) []Impl {
	out := slices.Clone(r.impls)
	if run%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// tempDir makes a fresh directory for one run's lease files.
func (r *runner) tempDir() (string, error) {
	return os.MkdirTemp(r.cfg.Dir, "slbench-")
}

// withFormatter runs fn against a short-lived daemon of impl, used to
// format lease areas so that the measured daemon starts clean.
func withFormatter(ctx context.Context, impl Impl, fn func(d *daemon) error) error {
	d, err := startDaemon(ctx, impl, nil)
	if err != nil {
		return err
	}
	defer d.stop()
	return fn(d)
}
