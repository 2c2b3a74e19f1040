package wdmd

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// MaxScripts is the number of script slots (docs/wdmd.md "Script tests").
const MaxScripts = 8

// ScriptEntry is one directory entry seen by a scan.
type ScriptEntry struct {
	Name      string
	Regular   bool
	OwnerExec bool
}

// ScriptStatus is the outcome of a finished script.
type ScriptStatus struct {
	Exited   bool // exit status in Code
	Code     int
	Signaled bool // killed by Signal
	Signal   int
}

// ScriptRunner runs script tests for the Monitor: directory scans, process
// start, non-blocking reaping and SIGKILL.
type ScriptRunner interface {
	// ReadDir lists dir sorted by name.
	ReadDir(dir string) ([]ScriptEntry, error)
	// Check is nil if path is a regular file with the owner-execute bit.
	Check(path string) error
	// Start runs path without arguments and returns its pid.
	Start(path string) (int, error)
	// Reap reports whether pid has finished, and how, without waiting.
	Reap(pid int) (done bool, st ScriptStatus)
	// Kill sends SIGKILL to pid.
	Kill(pid int)
}

type script struct {
	name       string
	path       string
	pid        int
	start      uint64
	lastGood   uint64 // time of the last exit 0
	lastResult int
	runCount   int
	failCount  int
	goodCount  int
	killCount  int
	longCount  int
	killed     bool // SIGKILL sent for the current run
}

// scanScripts adds new executable regular files of the scripts dir
// (never removes any; docs/wdmd.md "Script tests").
func (m *Monitor) scanScripts() {
	ents, err := m.cfg.Scripts.ReadDir(m.cfg.ScriptDir)
	if err != nil {
		m.log.Debug("script dir error", zap.String("dir", m.cfg.ScriptDir), zap.Error(err))
		return
	}
	for _, e := range ents {
		if e.Name == "" || e.Name[0] == '.' {
			continue
		}
		if !e.Regular || !e.OwnerExec {
			m.log.Debug(fmt.Sprintf("script %s ignore %d", e.Name, -1))
			continue
		}
		known := false
		for _, s := range m.scripts {
			if s.name == e.Name {
				known = true
			}
		}
		if known {
			continue
		}
		slot := -1
		for i, s := range m.scripts {
			if s.name == "" {
				slot = i
				break
			}
		}
		if slot < 0 && len(m.scripts) < MaxScripts {
			m.scripts = append(m.scripts, &script{})
			slot = len(m.scripts) - 1
		}
		if slot < 0 {
			m.log.Error(fmt.Sprintf("script %s no space", e.Name))
			continue
		}
		*m.scripts[slot] = script{name: e.Name, path: filepath.Join(m.cfg.ScriptDir, e.Name)}
		m.log.Error(fmt.Sprintf("add_script %d %s", slot, e.Name))
	}
}

// testScripts starts the scripts due in this test, waits for them (up to
// test interval - 1 seconds after the test started, checking every
// second) and returns how many failed or are still running.
func (m *Monitor) testScripts(ctx context.Context, start uint64) int {
	r := m.cfg.Scripts
	wait := m.normal - 1
	pending := map[*script]bool{}
	for _, s := range m.scripts {
		if s.name == "" {
			continue
		}
		if s.pid != 0 { // still running from an earlier test
			pending[s] = true
			continue
		}
		if s.lastGood != 0 && s.goodCount > 0 && start-s.lastGood < wait {
			continue // passed recently
		}
		if err := r.Check(s.path); err != nil {
			m.log.Error(fmt.Sprintf("script %s removed %d", s.name, -errno(err)))
			*s = script{}
			continue
		}
		pid, err := r.Start(s.path)
		if err != nil {
			m.log.Error(fmt.Sprintf("script %s start error %d", s.name, errno(err)))
			s.lastResult = -errno(err)
			s.failCount++
			continue
		}
		s.pid, s.start, s.killed = pid, start, false
		s.runCount++
		m.log.Debug(fmt.Sprintf("script %s pid %d", s.name, pid))
		pending[s] = true
	}
	fails := 0
	for {
		now := seconds(m.clock)
		for s := range pending {
			done, st := r.Reap(s.pid)
			if !done {
				if m.cfg.KillScriptSec > 0 && !s.killed && now-s.start >= uint64(m.cfg.KillScriptSec) {
					r.Kill(s.pid)
					s.killed = true
					s.killCount++
				}
				continue
			}
			delete(pending, s)
			pid := s.pid
			s.pid = 0
			switch {
			case st.Exited && st.Code == 0:
				s.lastResult = 0
				s.lastGood = now
				s.goodCount++
				continue
			case st.Exited:
				s.lastResult = st.Code
				m.log.Error(fmt.Sprintf("script %s pid %d exit status %d", s.name, pid, st.Code))
			default:
				s.lastResult = 4 // EINTR
				m.log.Error(fmt.Sprintf("script %s pid %d term signal %d", s.name, pid, st.Signal))
			}
			s.failCount++
			fails++
			m.scriptSummary(s)
		}
		if len(pending) == 0 || now-start >= wait {
			break
		}
		if m.clock.Sleep(ctx, time.Second) != nil {
			break
		}
	}
	now := seconds(m.clock)
	for s := range pending {
		m.log.Error(fmt.Sprintf("script %s pid %d start %d now %d taking too long", s.name, s.pid, s.start, now))
		s.longCount++
		fails++
		m.scriptSummary(s)
	}
	return fails
}

func (m *Monitor) scriptSummary(s *script) {
	m.log.Error(fmt.Sprintf("script %s last_result %d start %d run %d fail %d good %d kill %d long %d",
		s.name, s.lastResult, s.start, s.runCount, s.failCount, s.goodCount, s.killCount, s.longCount))
}
