package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"

	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/handover/serving"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// The new image's side of a handover (docs/upgrade.md "Protocol"):
// `sanlock daemon` started by handover.Handover skips daemonize, the pid
// file lock, the bind and the joins, and adopts the running daemon's
// fds and state instead.

// adoptable checks what this image can take over: everything but event
// listeners.
func adoptable(st *handover.State) error {
	for _, c := range st.Clients {
		if c.EventLockspace != "" || len(c.PendingEvents) > 0 {
			return errors.New("this image cannot adopt event listeners yet")
		}
	}
	return nil
}

// runAdopted is Run for a process started by a handover.
func runAdopted(ctx context.Context, cfg *Config, deps Deps) error {
	sigs := notifySignals()
	defer signal.Stop(sigs)
	t, err := handover.Receive()
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	if err := adoptable(t.Snapshot()); err != nil {
		return t.Fail(err)
	}
	ad, err := t.Ready(ctx)
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	if err := adoptable(ad.State); err != nil {
		serving.CloseAll(ad.Files)
		return t.Fail(err)
	}
	s := New(cfg, deps)
	conns, err := s.prepareAdopted(ad)
	if err != nil {
		serving.CloseAll(ad.Files)
		return t.Fail(err)
	}
	leases, err := s.mgr.PrepareAdoption(ad.State, adoptedClients(conns), ad.Files, s.adoptListener)
	if err != nil {
		serving.CloseAll(ad.Files)
		return t.Fail(err)
	}
	if err := t.TookOver(ctx); err != nil {
		leases.Abort()
		return fmt.Errorf("handover: %w", err)
	}
	// From here on this image serves: renewals first, they have a
	// deadline (the handed-over last success + id_renewal_seconds).
	leases.Start()
	s.rewritePid()
	s.lg.Warn(fmt.Sprintf("sanlock daemon took over from pid %d (%s) host %s", ad.State.OldPid,
		ad.State.OldVersion, s.hostName))
	s.fds = newFDGuard()
	s.conns.Add(1)
	go s.acceptLoop()
	for _, c := range conns {
		s.conns.Add(1)
		go c.serve()
	}
	return s.serveSignals(ctx, sigs)
}

// prepareAdopted builds the server from the handed-over state without
// acting: no accept, no read, no write to any client, disk or pid file.
func (s *Server) prepareAdopted(ad *handover.Adopted) ([]*Conn, error) {
	st := ad.State
	s.started = true
	s.rx.adopted = true
	cfg := &s.cfg
	cfg.ResolveIDs()
	s.logs = newLogSinks(cfg, s.deps.Stderr, s.deps.LogCore)
	s.lg = s.logs.lg
	s.startMon = s.monoSeconds()
	s.nofile = raiseNofile()
	s.nodename = Nodename()
	s.hostName = st.Config.HostName
	if st.PidFile.FD >= 0 {
		s.lockf = ad.Files[st.PidFile.FD]
	}
	uln, fd, err := serving.AdoptListener(ad.Files[st.Listener.FD])
	if err != nil {
		return nil, err
	}
	s.ln, s.lnFD = uln, fd
	s.startManager() // the pending adds below are expected by it
	var conns []*Conn
	for _, hc := range st.Clients {
		uc, fd, err := serving.AdoptConn(ad.Files[hc.FD], true)
		if err != nil {
			return nil, fmt.Errorf("connection ci %d: %w", hc.Slot, err)
		}
		if hc.Slot < firstConnSlot || hc.Slot >= s.cfg.MaxConns {
			uc.Close()
			return nil, fmt.Errorf("connection slot %d out of range", hc.Slot)
		}
		c := &Conn{srv: s, uc: uc, slot: hc.Slot, fd: fd, peerPid: int(hc.PeerPid), id: manager.ClientID(s.lastID.Add(1))}
		cs := manager.ClientStatus{Order: hc.Slot, Pid: hc.Pid, Registered: hc.Registered, Name: hc.Name,
			Restrict: hc.Restrict, Flags: hc.Flags, KillPath: hc.KillPath, KillArgs: hc.KillArgs,
			PidDead: hc.PidDead, KillCount: hc.KillCount}
		if !cs.Registered {
			cs.Pid = -1
		}
		if len(hc.Pending) > 0 {
			q, err := serving.DecodePending(hc.Pending)
			if err != nil {
				uc.Close()
				return nil, fmt.Errorf("connection ci %d: %w", hc.Slot, err)
			}
			s.gate.SetRedo(&c.rd, hc.Pending)
			if q.Header.Cmd == wire.CmdAddLockspace {
				s.mgr.Lockspaces.ExpectAdd(lockspaceOf(q).Name) // in progress until it runs
			}
		}
		for len(s.slots) <= hc.Slot {
			s.slots = append(s.slots, nil)
		}
		if s.slots[hc.Slot] != nil {
			uc.Close()
			return nil, fmt.Errorf("connection slot %d used twice", hc.Slot)
		}
		s.restoreClient(c, cs)
		s.slots[hc.Slot] = c
		conns = append(conns, c)
	}
	return conns, nil
}

// adoptListener wraps a handed-over event listener connection. It is in
// no slot (as after REG_EVENT) and nothing reads it but the manager's
// non-blocking end checks.
func (s *Server) adoptListener(f *os.File) (manager.Listener, error) {
	uc, fd, err := serving.AdoptConn(f, false)
	if err != nil {
		return nil, fmt.Errorf("event listener: %w", err)
	}
	return &Conn{srv: s, uc: uc, slot: -1, fd: fd, peerPid: -1, id: manager.ClientID(s.lastID.Add(1))}, nil
}

// rewritePid writes our pid into the handed-over pid file.
func (s *Server) rewritePid() {
	if s.lockf == nil {
		return
	}
	if err := s.lockf.Truncate(0); err == nil {
		_, err = s.lockf.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			s.lg.Error("pid file write: " + err.Error())
		}
	}
}
