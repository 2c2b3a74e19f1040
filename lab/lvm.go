package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// lvmStep is one lvm command of the lvmlockd scenario, on guest A or B,
// and whether it must succeed (must), fail (mustNot) or is only compared
// between the daemons (maybe).
type lvmStep struct {
	on     string
	cmd    string
	expect expectation
}

type expectation int

const (
	mustNot expectation = iota
	must
	maybe
)

// lvmSteps is the lvmlockd scenario: a shared VG on the lab disk, its
// lockspace started on both hosts, an LV active exclusively on A and so
// refused on B, shared on both, the VG lock moving between the hosts,
// lvmlockctl, lock-stop and vgremove.
var lvmSteps = []lvmStep{
	{"A", "vgcreate --shared vg1 /dev/vda", must},
	// Without udev, the lock LV's device node is made at the end of the
	// activation, after lvmlockd looked for it: the first lock-start
	// fails (-212) until dmsetup mknodes, and is then repeated.
	{"B", "vgchange --lock-start vg1 || { dmsetup mknodes; vgchange --lock-start vg1; }", must},
	{"A", "lvcreate -an -L 8M -n lv1 vg1", must},
	{"A", "lvchange -aey vg1/lv1", must},
	{"B", "lvchange -aey vg1/lv1", mustNot},
	{"B", "lvchange -asy vg1/lv1", mustNot},
	{"A", "lvchange -an vg1/lv1", must},
	{"A", "lvchange -asy vg1/lv1", must},
	{"B", "lvchange -asy vg1/lv1", must},
	{"A", "lvchange -aey vg1/lv1", mustNot},
	{"A", "lvchange -an vg1/lv1", must},
	{"B", "lvchange -an vg1/lv1", must},
	{"B", "lvcreate -an -L 8M -n lv2 vg1", must},
	{"A", "lvremove -y vg1/lv2", must},
	{"B", "pvs", must},
	{"A", "lvmlockctl -i", must},
	{"B", "vgchange --lock-stop vg1", must},
	{"A", "lvremove -y vg1/lv1", must},
	// vgremove asks A's daemon for the lockspace's live hosts (lvmlockd
	// refuses to free the VG, -16, while another one is live): wait until
	// A's daemon has read B's released delta lease, which its renewal
	// does every 20 s at lvm's io_timeout of 10 s, so that the answer does
	// not depend on where the renewal was when B stopped.
	{"A", "sleep 25", must},
	// vgremove is only compared between the daemons: with C sanlock 5.1.1
	// and lvm 2.03.31 it does not return (lvmlockd's release with rename
	// fails, the lockspace is removed with its leases held and the daemon
	// then signals lvmlockd, which ignores it).
	{"A", "timeout 60 vgremove -y vg1", maybe},
}

// lvmResults keeps each daemon's step results (true: the command
// succeeded) so that the runs on the different daemons can be compared.
var lvmResults = struct {
	sync.Mutex
	byLabel map[string][]bool
}{byLabel: map[string][]bool{}}

// lvmConf configures lvm for lvmlockd with sanlock and without udev.
const lvmConf = `devices { obtain_device_list_from_udev = 0 external_device_info_source = "none" use_devicesfile = 0 }
global { use_lvmlockd = 1 }
activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
`

// startLvmlockd starts the daemons (with wdmd) and lvmlockd on both guests.
func (e *env) startLvmlockd() error {
	if err := e.setupDaemonsOnly(true); err != nil {
		return err
	}
	for i, g := range []*guest{e.a, e.b} {
		cmd := fmt.Sprintf("printf '%%s' '%s' >/etc/lvm/lvm.conf && printf 'local {\\n host_id = %d\\n}\\n' >/etc/lvm/lvmlocal.conf && "+
			"setsid lvmlockd -D >/var/log/lvmlockd.log 2>&1 </dev/null & "+
			"for i in $(seq 100); do lvmlockctl -i >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1", lvmConf, i+1)
		if out, rc, err := g.sh(60*time.Second, cmd); err != nil || rc != 0 {
			return fmt.Errorf("%s: lvmlockd did not start (rc %d, %v): %s", g.name, rc, err, out)
		}
		g.tl.add(g.name, "lvmlockd started")
	}
	return nil
}

// lvmRun runs steps in order and returns each one's success and the
// steps whose result was not the expected one.
func (e *env) lvmRun(steps []lvmStep) (got []bool, unexpected []string) {
	for _, s := range steps {
		g := e.a
		if s.on == "B" {
			g = e.b
		}
		t0 := time.Now()
		out, rc, err := g.sh(90*time.Second, "dmsetup mknodes >/dev/null 2>&1; "+s.cmd)
		ok := err == nil && rc == 0
		got = append(got, ok)
		g.tl.add(g.name, fmt.Sprintf("%s: rc %d in %.1f s", s.cmd, rc, time.Since(t0).Seconds()))
		if s.expect != maybe && ok != (s.expect == must) {
			unexpected = append(unexpected, fmt.Sprintf("%s %q rc %d (%s)", s.on, s.cmd, rc, lastLines(out, 2)))
		}
	}
	return got, unexpected
}

// lvmlockdScenario runs lvmSteps and compares the results with the other
// daemons' runs of the same scenario (the same lvm version).
func lvmlockdScenario(e *env) (bool, string) {
	if err := e.startLvmlockd(); err != nil {
		return false, err.Error()
	}
	got, unexpected := e.lvmRun(lvmSteps)
	label := e.da.label
	if e.db.label != e.da.label {
		label += "+" + e.db.label
	}
	// Only runs with the same lvm (the same scenario) are compared.
	lvmResults.Lock()
	lvmResults.byLabel[e.name+" "+label] = got
	var differs, compared []string
	for key, res := range lvmResults.byLabel {
		other, ok := strings.CutPrefix(key, e.name+" ")
		if !ok || other == label {
			continue
		}
		compared = append(compared, other)
		for i := range res {
			if res[i] != got[i] {
				differs = append(differs, fmt.Sprintf("step %d %q differs from %s", i+1, lvmSteps[i].cmd, other))
			}
		}
	}
	lvmResults.Unlock()
	okCheck := len(unexpected) == 0 && len(differs) == 0
	detail := fmt.Sprintf("%d lvm steps", len(lvmSteps))
	if len(unexpected) > 0 {
		detail += "; unexpected: " + strings.Join(unexpected, "; ")
	}
	switch {
	case len(differs) > 0:
		detail += "; " + strings.Join(differs, "; ")
	case len(compared) > 0:
		sort.Strings(compared)
		detail += ", results equal to " + strings.Join(compared, ", ")
	}
	if r := e.resets(); len(r) > 0 {
		okCheck = false
		detail += "; " + strings.Join(r, "; ")
	}
	return okCheck, detail
}
