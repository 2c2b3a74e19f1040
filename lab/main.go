// Command lab runs the QEMU lab (docs/lab.md): scenarios with two guests
// (or three), each with Debian's kernel, an i6300esb watchdog that resets
// it, and one shared virtio disk whose path can be hung per guest through
// QEMU's block layer, on our daemon and on C sanlock 3.8.5, 3.9.5 and
// 5.1.1.
//
// It prints one line per scenario and daemon, "lab: SCENARIO DAEMON
// PASS|FAIL detail", then "N passed, N failed", and leaves each run's
// timeline, consoles and daemon logs under the results directory. Every
// guest it starts is stopped (QMP quit, then SIGKILL of its pid) and the
// shared disk images are removed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemon is one sanlock implementation as the guests run it.
type daemon struct {
	label   string // "ours", "3.8.5", "3.9.5", "5.1.1"
	tree    string // Debian tree shared as the guest's root
	sanlock string // path in the guest
	wdmd    string // path in the guest
}

// scenario is one lab case, run once per daemon or pair of daemons.
type scenario struct {
	name  string
	pairs [][2]string // daemon labels of guest A and guest B
	// guests is the number of guests, 2 when 0; the guests after B run
	// B's daemon.
	guests int
	// oursTree, when set, is the Debian tree our daemon runs in for this
	// scenario (it runs in bookworm otherwise).
	oursTree string
	// pathFaults: guest A reaches the shared disk through a fusefault
	// mount of its directory, so that its path alone can fail with EIO or
	// be slowed (env.pathFault); B opens the file directly.
	pathFaults bool
	// installed: our sanlock runs from /usr/sbin/sanlock, installed into
	// the guest's overlay from bin/ before it starts, as a package puts
	// it; the live upgrade then installs another build there first
	// (env.reexec).
	installed bool
	// tree, when set, is every guest's Debian tree for this scenario.
	tree string
	// guestArgs, when set, gives each run of the scenario more QEMU
	// arguments per guest.
	guestArgs func(cfg *labConfig) (func(name string) []string, error)
	run       func(e *env) (bool, string)
}

func main() {
	cfg := &labConfig{}
	var only, results, daemonsFlag string
	flag.StringVar(&cfg.Repo, "repo", ".", "repository (shared read-only; bin/ holds sanlock, wdmd, lab-agent, lab-holder, lab-sanlock-next)")
	flag.StringVar(&cfg.Cache, "cache", "/var/cache/gosanlock/lab", "kernel and initramfs (scripts/lab-kernel.sh)")
	flag.StringVar(&cfg.Trees, "trees", "/var/cache/gosanlock/trees", "Debian trees (scripts/debian-trees.sh, scripts/lab-trees.sh)")
	flag.StringVar(&cfg.Qemu, "qemu", "qemu-system-x86_64", "QEMU binary")
	flag.IntVar(&cfg.MemMB, "mem", 512, "memory of each guest (MB)")
	flag.BoolVar(&cfg.Verbose, "v", false, "print every guest command")
	flag.StringVar(&only, "run", "", "run only the scenarios whose name contains this, or is NAME for =NAME (comma-separated)")
	flag.StringVar(&daemonsFlag, "daemons", "", "run only these daemon labels (comma-separated, e.g. ours,ours+5.1.1)")
	flag.StringVar(&results, "results", "", "results directory (default var/lab/TIME in the repository)")
	shellPair := flag.String("shell", "", "boot guests A and B with these daemons' trees (e.g. ours,5.1.1) and run \"A cmd\" / \"B cmd\" lines from standard input")
	flag.Parse()

	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		fatal(err)
	}
	cfg.Repo = repo
	if results == "" {
		results = filepath.Join(repo, "var", "lab", time.Now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(results, 0o755); err != nil {
		fatal(err)
	}
	daemons := map[string]daemon{
		"ours":  {label: "ours", tree: filepath.Join(cfg.Trees, "bookworm"), sanlock: "/lab/bin/sanlock", wdmd: "/lab/bin/wdmd"},
		"3.8.5": {label: "3.8.5", tree: filepath.Join(cfg.Trees, "bookworm"), sanlock: "/usr/sbin/sanlock", wdmd: "/usr/sbin/wdmd"},
		"3.9.5": {label: "3.9.5", tree: filepath.Join(cfg.Trees, "trixie"), sanlock: "/usr/sbin/sanlock", wdmd: "/usr/sbin/wdmd"},
		"5.1.1": {label: "5.1.1", tree: filepath.Join(cfg.Trees, "sid"), sanlock: "/usr/sbin/sanlock", wdmd: "/usr/sbin/wdmd"},
	}
	for _, d := range daemons {
		if _, err := os.Stat(filepath.Join(d.tree, ".gosanlock-ready")); err != nil {
			fatal(fmt.Errorf("tree %s not built (make trees; scripts/lab-trees.sh)", d.tree))
		}
	}
	for _, b := range []string{"sanlock", "wdmd", "lab-agent", "lab-holder", "lab-sanlock-next"} {
		if _, err := os.Stat(filepath.Join(repo, "bin", b)); err != nil {
			fatal(fmt.Errorf("bin/%s missing (make lab builds it)", b))
		}
	}

	// A stop signal ends the scenario in progress; its guests are then
	// stopped by the scenario's own cleanup.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		interrupted.Store(true)
	}()

	started := time.Now()
	passed, failed := 0, 0
	list := scenarios()
	if *shellPair != "" {
		p := strings.SplitN(*shellPair+","+*shellPair, ",", 3)
		list = []scenario{shellScenario([2]string{p[0], p[1]})}
	}
	for _, sc := range list {
		if !selected(sc.name, only) {
			continue
		}
		for _, p := range sc.pairs {
			label := p[0]
			if p[1] != p[0] {
				label = p[0] + "+" + p[1]
			}
			if !listed(label, daemonsFlag) {
				continue
			}
			if interrupted.Load() {
				break
			}
			t0 := time.Now()
			da, db := daemons[p[0]], daemons[p[1]]
			for _, d := range []*daemon{&da, &db} {
				if d.label == "ours" && sc.oursTree != "" {
					d.tree = filepath.Join(cfg.Trees, sc.oursTree)
				}
				if d.label == "ours" && sc.installed {
					d.sanlock = installedSanlock
				}
				if sc.tree != "" {
					d.tree = filepath.Join(cfg.Trees, sc.tree)
				}
			}
			ok, detail := runScenario(cfg, sc, da, db, filepath.Join(results, sc.name+"-"+label))
			verdict := "PASS"
			if ok {
				passed++
			} else {
				verdict = "FAIL"
				failed++
			}
			// One line per verdict, whatever the detail holds.
			detail = strings.Join(strings.Fields(detail), " ")
			fmt.Printf("lab: %s %s %s %s (%.0f s)\n", sc.name, label, verdict, detail, time.Since(t0).Seconds())
		}
	}
	fmt.Printf("lab: results in %s, %.0f s\n", results, time.Since(started).Seconds())
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// selected reports whether name matches one of the comma-separated
// patterns (all names match an empty list): a pattern matches the names
// that contain it, or, written "=NAME", that one name only.
func selected(name, patterns string) bool {
	if patterns == "" {
		return true
	}
	for _, p := range strings.Split(patterns, ",") {
		if exact, ok := strings.CutPrefix(p, "="); ok {
			if name == exact {
				return true
			}
		} else if p != "" && strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// listed reports whether label is one of the comma-separated labels (all
// are listed by an empty list).
func listed(label, labels string) bool {
	if labels == "" {
		return true
	}
	for _, l := range strings.Split(labels, ",") {
		if l == label {
			return true
		}
	}
	return false
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "lab: %v\n", err)
	os.Exit(2)
}
