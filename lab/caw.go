package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The caw-iscsi scenario: a SCSI disk that implements COMPARE AND WRITE,
// seen by both guests. Guest A runs a LIO iSCSI target (target_core_iblock
// on its /dev/vda) and both guests log in to it with open-iscsi over a
// network between the two QEMUs only (UDP on 127.0.0.1); each then sees
// the LUN as /dev/sda. The kernel modules are Debian's, from the package
// the lab boots, loaded from a 9p share; the tree is sid-iscsi (sid with
// open-iscsi, sg3-utils, iproute2, kmod). scripts/lab-caw.sh makes both.

// cawShellFlag makes -shell boot the caw-iscsi guests, iSCSI disk ready.
var cawShellFlag = flag.Bool("caw", false, "with -shell: boot the caw-iscsi guests (sid-iscsi tree, guest network, iSCSI disk /dev/sda on both)")

const (
	cawTree   = "sid-iscsi"
	cawIQN    = "iqn.2026-01.lab.gosanlock:caw"
	cawDisk   = "/dev/sda"
	cawTarget = "10.0.2.1" // guest A's address; B is 10.0.2.2
	// cawLBA is the block sg_compare_and_write works on (32 MiB), away
	// from the lockspace (0) and the resource (1 MiB).
	cawLBA = 65536
)

// cawGuestArgs returns the QEMU arguments of the caw guests: a virtio-net
// NIC on a UDP socket pair on 127.0.0.1 (each guest's packets go to the
// other's port, nowhere else) and the modules' share "caw".
func cawGuestArgs(cfg *labConfig) (func(name string) []string, error) {
	ports := make([]int, 2)
	for i := range ports {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = c.LocalAddr().(*net.UDPAddr).Port
		c.Close()
	}
	mods := filepath.Join(cfg.Cache, "caw")
	return func(name string) []string {
		me, peer, mac := ports[0], ports[1], "52:54:00:00:00:01"
		if name == "B" {
			me, peer, mac = ports[1], ports[0], "52:54:00:00:00:02"
		}
		return []string{
			"-netdev", fmt.Sprintf("socket,id=n0,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", peer, me),
			"-device", "virtio-net-pci,netdev=n0,mac=" + mac,
			"-fsdev", "local,id=caw,path=" + mods + ",security_model=none,readonly=on",
			"-device", "virtio-9p-pci,fsdev=caw,mount_tag=caw",
		}
	}, nil
}

// cawScenario is the caw-iscsi scenario as the scenario list holds it.
func cawScenario() scenario {
	return scenario{name: "caw-iscsi", pairs: [][2]string{{"5.1.1", "5.1.1"}, {"ours", "5.1.1"}},
		tree: cawTree, guestArgs: cawGuestArgs, run: cawIscsi}
}

// cawShell turns the -shell scenario into the caw guests' when -caw is set.
func cawShell(sc scenario) scenario {
	if !*cawShellFlag {
		return sc
	}
	sc.tree, sc.guestArgs = cawTree, cawGuestArgs
	run := sc.run
	sc.run = func(e *env) (bool, string) {
		if err := e.cawPrepare(); err != nil {
			return false, err.Error()
		}
		return run(e)
	}
	return sc
}

// cawPrepare loads the modules and sets up the network on both guests,
// starts the target on A and logs both in; it returns once /dev/sda is
// the LUN on both.
func (e *env) cawPrepare() error {
	if _, err := os.Stat(filepath.Join(e.cfg.Trees, cawTree, ".gosanlock-caw-ready")); err != nil {
		return fmt.Errorf("tree %s not built (scripts/lab-caw.sh)", cawTree)
	}
	for i, g := range []*guest{e.a, e.b} {
		ip := fmt.Sprintf("10.0.2.%d", i+1)
		cmd := `mkdir -p /run/caw && mount -t 9p -o trans=virtio,version=9p2000.L,ro caw /run/caw || exit 1
for m in $(cat /run/caw/order); do n=$(echo ${m%.ko} | tr - _); [ -d /sys/module/$n ] || insmod /run/caw/$m 2>&1 || echo "insmod $m failed"; done
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
ip link set lo up && ip addr add ` + ip + `/24 dev eth0 && ip link set eth0 up || exit 1
mkdir -p /etc/iscsi && echo InitiatorName=iqn.2026-01.lab.gosanlock:` + g.name + ` >/etc/iscsi/initiatorname.iscsi
iscsid || exit 1`
		out, rc, err := g.sh(120*time.Second, cmd)
		if err != nil || rc != 0 {
			return fmt.Errorf("%s: modules and network (rc %d, %v): %s", g.name, rc, err, strings.TrimSpace(out))
		}
		g.tl.add(g.name, "iscsi modules, network, iscsid: "+strings.Join(strings.Fields(out), " "))
	}
	t := "/sys/kernel/config/target"
	tpg := t + "/iscsi/" + cawIQN + "/tpgt_1"
	target := strings.Join([]string{
		"set -e",
		"mkdir -p " + t + "/core/iblock_0/lun0",
		"echo udev_path=/dev/vda >" + t + "/core/iblock_0/lun0/control",
		"echo 1 >" + t + "/core/iblock_0/lun0/enable",
		"mkdir -p " + tpg + "/lun/lun_0 " + tpg + "/np/" + cawTarget + ":3260",
		"ln -s " + t + "/core/iblock_0/lun0 " + tpg + "/lun/lun_0/lun0",
		"echo 0 >" + tpg + "/attrib/authentication",
		"echo 1 >" + tpg + "/attrib/generate_node_acls",
		"echo 1 >" + tpg + "/attrib/cache_dynamic_acls",
		"echo 0 >" + tpg + "/attrib/demo_mode_write_protect",
		"echo 1 >" + tpg + "/enable",
	}, "\n")
	if out, rc, err := e.a.sh(60*time.Second, target); err != nil || rc != 0 {
		return fmt.Errorf("A: LIO target (rc %d, %v): %s", rc, err, strings.TrimSpace(out))
	}
	e.a.tl.add("A", "LIO iSCSI target "+cawIQN+" on /dev/vda at "+cawTarget+":3260")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, g := range []*guest{e.a, e.b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := "iscsiadm -m discovery -t st -p " + cawTarget + " && iscsiadm -m node -T " + cawIQN + " -p " + cawTarget + " --login && " +
				"for i in $(seq 100); do [ -b " + cawDisk + " ] && break; sleep 0.2; done; " +
				"chgrp disk " + cawDisk + " && chmod 660 " + cawDisk + " && " +
				"echo $(cat /sys/block/sda/device/vendor /sys/block/sda/device/model) $(cat /sys/block/sda/size) sectors"
			out, rc, err := g.sh(120*time.Second, cmd)
			if err != nil || rc != 0 {
				errs[i] = fmt.Errorf("%s: iscsi login (rc %d, %v): %s", g.name, rc, err, strings.TrimSpace(out))
				return
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			g.tl.add(g.name, "iscsi logged in: "+lines[len(lines)-1])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cawCheck runs SCSI COMPARE AND WRITE on the iSCSI disk from both
// guests, at block cawLBA (zeros at first): A swaps zeros for "A"s; B's
// compare of zeros must then miscompare (sg3_utils exit status 14), and
// B's swap of "A"s for "B"s must succeed.
func (e *env) cawCheck() error {
	fill := func(name, a, b string) string {
		return fmt.Sprintf("head -c 512 /dev/zero | tr '\\0' '%s' >/tmp/%s && head -c 512 /dev/zero | tr '\\0' '%s' >>/tmp/%s", a, name, b, name)
	}
	caw := func(file string) string {
		return fmt.Sprintf("sg_compare_and_write --in=/tmp/%s --lba=%d --num=1 --xferlen=1024 %s", file, cawLBA, cawDisk)
	}
	steps := []struct {
		g    *guest
		cmd  string
		want int
		what string
	}{
		{e.a, fill("z2a", "\\0", "A") + " && " + caw("z2a"), 0, "CAW zeros->A"},
		{e.b, fill("z2b", "\\0", "B") + " && " + caw("z2b"), 14, "CAW zeros->B (miscompare)"},
		{e.b, fill("a2b", "A", "B") + " && " + caw("a2b"), 0, "CAW A->B"},
	}
	for _, st := range steps {
		out, rc, err := st.g.sh(60*time.Second, st.cmd)
		st.g.tl.add(st.g.name, fmt.Sprintf("%s: rc %d %s", st.what, rc, strings.Join(strings.Fields(out), " ")))
		if err != nil || rc != st.want {
			return fmt.Errorf("%s: %s: rc %d (want %d), %v: %s", st.g.name, st.what, rc, st.want, err, strings.TrimSpace(out))
		}
	}
	out, _, err := e.a.sh(30*time.Second, fmt.Sprintf("dd if=%s bs=512 skip=%d count=1 iflag=direct status=none | tr -d B | wc -c", cawDisk, cawLBA))
	if err != nil || strings.TrimSpace(out) != "0" {
		return fmt.Errorf("A: block %d after CAW is not all B (%q, %v)", cawLBA, out, err)
	}
	return nil
}

// Offsets on the LUN: the lockspace caw (5.1.1's, CAW-marked) and its
// resource R1; the lockspace pl (ours, not marked), its resource R1 made
// by 5.1.1 (marked) and R2 made by ours (not marked).
const (
	cawLS    = "caw:%d:" + cawDisk + ":0"
	cawRes   = "caw:R1:" + cawDisk + ":1048576"
	cawPlLS  = "pl:%d:" + cawDisk + ":4194304"
	cawPlR1  = "pl:R1:" + cawDisk + ":5242880"
	cawPlR2  = "pl:R2:" + cawDisk + ":6291456"
	cawStrac = "/var/log/strace.daemon"
)

// cawRun runs cmd on g and records it on the timeline; it returns the
// output with the exit status as a last line "rc N".
func (e *env) cawRun(g *guest, what, cmd string) (string, error) {
	out, rc, err := g.sh(180*time.Second, cmd+"; echo rc $?")
	g.tl.add(g.name, what+": "+strings.Join(strings.Fields(out), " "))
	if err != nil || rc != 0 || lastRC(out) != "0" {
		return out, fmt.Errorf("%s: %s (rc %d/%s, %v): %s", g.name, what, rc, lastRC(out), err, strings.TrimSpace(out))
	}
	return out, nil
}

// lastRC returns the status cawRun appended.
func lastRC(out string) string {
	f := strings.Fields(out)
	if len(f) < 2 || f[len(f)-2] != "rc" {
		return "?"
	}
	return f[len(f)-1]
}

// cawFlags returns the flags line of read_leader for the lease given
// ("-s LS" or "-r RES"), read by B's 5.1.1.
func (e *env) cawFlags(lease string) (string, error) {
	out, err := e.cawRun(e.b, "read_leader "+lease, "/usr/sbin/sanlock direct read_leader "+lease+" | grep ^flags")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]), nil
}

// cawHold starts the sleep holder of res on g (as the lab-holder loop
// does, once) and returns "sanlock client command"'s output after 10 s.
func (e *env) cawHold(g *guest, res string) (string, error) {
	s := e.daemonOf(g).sanlock
	return e.cawRun(g, "hold "+res, fmt.Sprintf("cd /; setsid %s client command -r %s -c /bin/sleep 3600 >>/var/log/cmd.log 2>&1 </dev/null & "+
		"sleep 10; cat /var/log/cmd.log", s, res))
}

// cawTry acquires res on g with a program that exits at once and returns
// the acquire result ("0", "-243", ...).
func (e *env) cawTry(g *guest, res string) (string, error) {
	out, err := e.cawRun(g, "try "+res, fmt.Sprintf("%s client command -r %s -c /bin/true 2>&1 | grep 'acquire done'", e.daemonOf(g).sanlock, res))
	if err != nil && !strings.Contains(out, "acquire done") {
		return "", err
	}
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "done" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("%s: no acquire result: %s", g.name, out)
}

// cawOwner returns owner_id and lver of res as B's 5.1.1 reads them.
func (e *env) cawOwner(res string) string {
	out, _ := e.cawRun(e.b, "owner "+res, "/usr/sbin/sanlock direct read_leader -r "+res+" | grep -E '^(owner_id|lver) '")
	return strings.Join(strings.Fields(strings.ReplaceAll(out, "\nrc 0", "")), " ")
}

// cawSCSI returns the number of SCSI COMPARE AND WRITE commands (SG_IO,
// opcode 0x89) strace saw g's daemon send, and the number of its debug
// lines that name a CAW step (delta_caw_acquire, paxos_caw_release, a
// paxos_acquire on a CAW leader).
func (e *env) cawSCSI(g *guest) (string, string) {
	out, _, _ := g.sh(30*time.Second, "grep -c 'SG_IO.*cmdp=\"\\\\x89' "+cawStrac)
	logs, _, _ := g.sh(30*time.Second, "grep -cE 'delta_caw_acquire|paxos_caw_release|paxos_acquire leader.* caw$' /var/log/sanlock.stderr")
	return strings.TrimSpace(out), strings.TrimSpace(logs)
}

// cawStartDaemons starts the daemons without watchdog; 5.1.1 runs under
// strace (ioctl only, through seccomp), which records its SG_IO commands.
func (e *env) cawStartDaemons() error {
	for _, g := range []*guest{e.a, e.b} {
		d := e.daemonOf(g)
		if d.label != "5.1.1" {
			if err := e.startDaemons(g, false); err != nil {
				return err
			}
			continue
		}
		cmd := fmt.Sprintf("setsid strace -f --seccomp-bpf -e trace=ioctl -o %[1]s %[2]s daemon -D -w 0 %[3]s "+
			">/var/log/sanlock.stderr 2>&1 </dev/null & "+
			"for i in $(seq 100); do %[2]s client status >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1", cawStrac, d.sanlock, e.userOpts)
		if out, rc, err := g.sh(40*time.Second, cmd); err != nil || rc != 0 {
			return fmt.Errorf("%s: sanlock did not start under strace (rc %d, %v): %s", g.name, rc, err, out)
		}
		g.tl.add(g.name, "sanlock 5.1.1 started under strace (-w 0)")
	}
	return nil
}

// cawJoin adds the lockspace ls (a format with %d for the host_id) on
// both guests at once and returns each add_lockspace's exit status.
func (e *env) cawJoin(ls string) [2]string {
	var rcs [2]string
	var wg sync.WaitGroup
	for i, g := range []*guest{e.a, e.b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ := e.cawRun(g, "add_lockspace "+fmt.Sprintf(ls, i+1),
				fmt.Sprintf("%s client add_lockspace -s %s -o %d 2>&1 | tail -1", e.daemonOf(g).sanlock, fmt.Sprintf(ls, i+1), ioTimeout))
			rcs[i] = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(out), "rc 0"))
		}()
	}
	wg.Wait()
	return rcs
}

// joined reports whether add_lockspace's last line says it succeeded
// ("add_lockspace_timeout done 0" when -o is given).
func joined(last string) bool { return strings.HasSuffix(last, " done 0") }

// cawIscsi: COMPARE AND WRITE on an iSCSI LUN both guests share. The
// device's CAW is checked with sg_compare_and_write; then B's 5.1.1
// formats the lockspace caw and its resource R1 on the LUN, and the
// leader flags must carry CAW (0x08). With 5.1.1 on A, both join, A
// holds R1, B is refused (-243), and strace shows both daemons sending
// SCSI COMPARE AND WRITE. With ours on A, ours must refuse the marked
// lockspace and resource (-283), whether 5.1.1 holds the resource or
// not, while an unmarked resource on the same LUN works between them.
func cawIscsi(e *env) (bool, string) {
	if err := e.cawPrepare(); err != nil {
		return false, err.Error()
	}
	if err := e.cawCheck(); err != nil {
		return false, err.Error()
	}
	if err := e.cawStartDaemons(); err != nil {
		return false, err.Error()
	}
	init := fmt.Sprintf("/usr/sbin/sanlock direct init -s %s -o %d && /usr/sbin/sanlock direct init -r %s -o %d", fmt.Sprintf(cawLS, 0), ioTimeout, cawRes, ioTimeout)
	if _, err := e.cawRun(e.b, "5.1.1 init caw", init); err != nil {
		return false, err.Error()
	}
	lsFlags, err := e.cawFlags("-s " + fmt.Sprintf(cawLS, 1))
	if err != nil {
		return false, err.Error()
	}
	resFlags, err := e.cawFlags("-r " + cawRes)
	if err != nil {
		return false, err.Error()
	}
	detail := fmt.Sprintf("SCSI CAW on the LUN: A swap ok, B miscompare (14), B swap ok; 5.1.1's lockspace %s, resource %s;", lsFlags, resFlags)
	if !strings.Contains(lsFlags, "CAW") || !strings.Contains(resFlags, "CAW") {
		return false, detail + " leases not marked CAW"
	}
	if e.da.label == "5.1.1" {
		return e.cawBoth511(detail)
	}
	return e.cawOursBeside511(detail)
}

// cawBoth511: both guests run 5.1.1 on the CAW-marked lockspace.
func (e *env) cawBoth511(detail string) (bool, string) {
	if rcs := e.cawJoin(cawLS); !joined(rcs[0]) || !joined(rcs[1]) {
		return false, fmt.Sprintf("%s join: A %q B %q", detail, rcs[0], rcs[1])
	}
	if _, err := e.cawHold(e.a, cawRes); err != nil {
		return false, err.Error()
	}
	owner := e.cawOwner(cawRes)
	rb, err := e.cawTry(e.b, cawRes)
	if err != nil {
		return false, err.Error()
	}
	ca, la := e.cawSCSI(e.a)
	cb, lb := e.cawSCSI(e.b)
	detail += fmt.Sprintf(" both joined; A holds R1 (%s), B's acquire %s; SCSI CAW commands (strace) A %s, B %s; CAW debug lines A %s, B %s", owner, rb, ca, cb, la, lb)
	ok := strings.HasPrefix(owner, "owner_id 1 ") && rb == "-243" && la != "0" && lb != "0" && la != "" && lb != ""
	return ok, detail
}

// cawOursBeside511: ours on A, 5.1.1 on B.
func (e *env) cawOursBeside511(detail string) (bool, string) {
	ok := true
	rcs := e.cawJoin(cawLS)
	detail += fmt.Sprintf(" join caw: ours %q, 5.1.1 %q;", rcs[0], rcs[1])
	if !strings.Contains(rcs[0], "-283") || !joined(rcs[1]) {
		ok = false
	}
	// The lockspace pl, formatted by ours (no CAW mark); R1 formatted by
	// 5.1.1 (marked), R2 by ours (not marked).
	if _, err := e.cawRun(e.a, "ours init pl, R2", fmt.Sprintf("/lab/bin/sanlock direct init -s %s -o %d && /lab/bin/sanlock direct init -r %s -o %d",
		fmt.Sprintf(cawPlLS, 0), ioTimeout, cawPlR2, ioTimeout)); err != nil {
		return false, err.Error()
	}
	if _, err := e.cawRun(e.b, "5.1.1 init pl:R1", fmt.Sprintf("/usr/sbin/sanlock direct init -r %s -o %d", cawPlR1, ioTimeout)); err != nil {
		return false, err.Error()
	}
	plFlags, _ := e.cawFlags("-s " + fmt.Sprintf(cawPlLS, 1))
	r1Flags, _ := e.cawFlags("-r " + cawPlR1)
	r2Flags, _ := e.cawFlags("-r " + cawPlR2)
	detail += fmt.Sprintf(" pl %s, pl:R1 (5.1.1) %s, pl:R2 (ours) %s;", plFlags, r1Flags, r2Flags)
	if !strings.Contains(r1Flags, "CAW") || strings.Contains(plFlags, "CAW") || strings.Contains(r2Flags, "CAW") {
		ok = false
	}
	if rcs := e.cawJoin(cawPlLS); !joined(rcs[0]) || !joined(rcs[1]) {
		return false, fmt.Sprintf("%s join pl: ours %q 5.1.1 %q", detail, rcs[0], rcs[1])
	}
	r1Free, err := e.cawTry(e.a, cawPlR1)
	if err != nil {
		return false, err.Error()
	}
	if _, err := e.cawHold(e.b, cawPlR1); err != nil {
		return false, err.Error()
	}
	r1Held, err := e.cawTry(e.a, cawPlR1)
	if err != nil {
		return false, err.Error()
	}
	owner1 := e.cawOwner(cawPlR1)
	if _, err := e.cawHold(e.a, cawPlR2); err != nil {
		return false, err.Error()
	}
	owner2 := e.cawOwner(cawPlR2)
	r2, err := e.cawTry(e.b, cawPlR2)
	if err != nil {
		return false, err.Error()
	}
	cb, lb := e.cawSCSI(e.b)
	detail += fmt.Sprintf(" ours on pl:R1 free %s, held by 5.1.1 %s (%s); ours holds pl:R2 (%s), 5.1.1's acquire %s; 5.1.1's SCSI CAW commands (strace) %s, CAW debug lines %s",
		r1Free, r1Held, owner1, owner2, r2, cb, lb)
	if r1Free != "-283" || r1Held != "-283" || !strings.HasPrefix(owner1, "owner_id 2 ") || !strings.HasPrefix(owner2, "owner_id 1 ") || r2 != "-243" {
		ok = false
	}
	return ok, detail
}
