package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

// Hosts of kind C395 and C511 run the sanlock daemon of a Debian tree
// (internal/debtree): chrooted, in a mount namespace of their own that has
// the host's /var/tmp (with the hosts' fusefault views below it) at the
// same path, the host directory's run/ at /run and the host directory's
// sanlock.conf at /etc/sanlock/sanlock.conf. The daemon's socket is
// run/sanlock/sanlock.sock on the host side, so Host.RunDir, Host.Client
// and the holder program (which runs on the host with SANLOCK_RUN_DIR set
// to Host.RunDir) work as for the other kinds. Only the mount namespace
// is new: pids, /proc and the clock are the machine's, so the daemon
// identifies its clients by their host pids, the process group of the
// host holds the daemon and its clients, and Kill, Pause and the
// monotonic times of the holder records mean what they mean for the
// other kinds.

// TreeSanlockConf is the sanlock.conf of a C395 or C511 host that has no
// HostOptions.SanlockConf. 3.9.5 and later read watchdog_fire_timeout
// from it also with -w 0 and count host_dead_seconds as 8 × io_timeout +
// watchdog_fire_timeout; 3.8.5 always counts with 60, and our daemon's
// default is 60 too, so the value is pinned to 60 here (docs/testing.md,
// "Timeouts of mixed versions"). io_timeout is the daemon's default for
// add_lockspace with io_timeout 0, 10 in every version.
const TreeSanlockConf = "io_timeout = 10\nwatchdog_fire_timeout = 60\n"

// treeName is the debtree name of a kind's tree ("" for C and Go).
func treeName(k Kind) string {
	switch k {
	case C395:
		return "trixie"
	case C511:
		return "sid"
	}
	return ""
}

// tree returns the tree of a C395 or C511 kind: Options.Trees, else the
// built tree debtree.Find finds.
func (c *Cluster) tree(k Kind) (*debtree.Tree, error) {
	name := treeName(k)
	if name == "" {
		return nil, fmt.Errorf("harness: kind %q has no tree", k)
	}
	if tr := c.opts.Trees[k]; tr != nil {
		return tr, nil
	}
	tr, err := debtree.Find(name)
	if err != nil {
		return nil, fmt.Errorf("harness: %s hosts: %w", k, err)
	}
	return tr, nil
}

// Tree is the Debian tree the host's daemon runs in (nil for C and Go).
func (h *Host) Tree() *debtree.Tree { return h.tree }

// confPath is the host's sanlock.conf (written by setupHost when there is
// one).
func (h *Host) confPath() string { return filepath.Join(h.Dir, "sanlock.conf") }

// treeDaemonCmd is the command that runs the tree's `sanlock ARGS` as the
// host's daemon, in a new process group.
func (h *Host) treeDaemonCmd(args, env []string) *exec.Cmd {
	cmd := h.tree.Command(&debtree.Options{
		RunDir: filepath.Dir(h.RunDir),
		Binds:  []debtree.Bind{{Host: h.confPath(), Tree: "/etc/sanlock/sanlock.conf"}},
		Env:    append([]string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir, "SANLOCK_PRIVILEGED=0"}, env...),
	}, append([]string{"sanlock"}, args...)...)
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}
