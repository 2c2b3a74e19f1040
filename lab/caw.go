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
// open-iscsi, sg3-utils, iproute2). scripts/lab-caw.sh makes both.

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

// cawIscsi is the scenario; filled in below.
func cawIscsi(e *env) (bool, string) {
	if err := e.cawPrepare(); err != nil {
		return false, err.Error()
	}
	return false, "not written yet"
}
