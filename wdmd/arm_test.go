package wdmd

import (
	"fmt"

	"go.uber.org/zap"
)

// The device armed from the start, as wdmd 3.8.5 does it: the daemon
// opens the device on demand (Select), and only the tests that replay
// 3.8.5's timelines use this.

// Arm selects and arms the watchdog device at start, as wdmd 3.8.5 does
// (docs/wdmd.md "Device selection"): the device stays open until the
// daemon stops. It fails with ErrNoDevice when no candidate works.
func (m *Monitor) Arm() error {
	d, err := arm(m.cfg.Driver, Candidates(m.cfg.FirstDevice), m.cfg.FireTimeout, m.log)
	if err != nil {
		return err
	}
	m.dev = d
	m.lazy = false
	return nil
}

// arm opens the first usable candidate and sets its timeout to fire
// seconds, as wdmd 3.8.5 does at its start (docs/wdmd.md "Device
// selection"). The device stays open.
func arm(drv Driver, candidates []string, fire int, log *zap.Logger) (*device, error) {
	for _, p := range candidates {
		if drv.Stat(p) != nil {
			continue
		}
		wd, err := drv.Open(p)
		if err != nil {
			log.Error(fmt.Sprintf("open %s error %d", p, errno(err)))
			continue
		}
		d := &device{drv: drv, path: p, wd: wd, log: log, fire: fire}
		t, err := wd.GetTimeout()
		if err != nil {
			log.Error(fmt.Sprintf("%s failed to report timeout", p))
			d.closeClean()
			continue
		}
		if t != fire {
			t, err = wd.SetTimeout(fire)
			if err != nil {
				log.Error(fmt.Sprintf("%s failed to set timeout", p))
				d.closeClean()
				continue
			}
			if t != fire {
				log.Error(fmt.Sprintf("%s failed to set new timeout", p))
				d.closeClean()
				continue
			}
		}
		log.Error(fmt.Sprintf("%s armed with fire_timeout %d", p, fire))
		return d, nil
	}
	log.Error(ErrNoDevice.Error())
	return nil, ErrNoDevice
}
