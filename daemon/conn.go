package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/handover/serving"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Class is a command's dispatch class (docs/protocol.md "Dispatch classes"). Every command runs on
// its connection's goroutine, so commands of different connections run
// concurrently; the class decides what happens to the connection and to the
// client record's name.
type Class int

const (
	// ClassKeep (sanlock "I-keep"): the connection stays open; the client
	// name is not changed.
	ClassKeep Class = iota
	// ClassClose (sanlock "I-close"): the connection is closed after the
	// handler returns; an unregistered client is renamed to the command's
	// debug name ("status", "log_dump", ...).
	ClassClose
	// ClassWork (sanlock "W"): the connection stays open; an unregistered
	// client is renamed "cmd<N>" (or add_lockspace / inq_lockspace /
	// rem_lockspace for those).
	ClassWork
)

// Handler serves one request on one connection. It writes its reply with
// c.Reply / c.Write (or nothing, for REGISTER and SHUTDOWN). ctx ends when
// the daemon stops. A non-nil error is logged and closes the connection.
// Handlers must not call Server.Stop (use RequestShutdown).
type Handler func(ctx context.Context, c *Conn, q *wire.Request) error

type route struct {
	h     Handler
	class Class
}

// ErrHold, returned by a handler, keeps the connection open but stops
// reading from it; the handler has taken ownership (e.g. SHUTDOWN_WAIT and,
// later, event listeners). Whoever holds it must eventually call
// Conn.Close.
var ErrHold = errors.New("daemon: connection held by handler")

// Handle registers h for cmd with the given class, replacing any previous
// handler. It is safe to call while the server runs.
func (s *Server) Handle(cmd wire.Cmd, class Class, h Handler) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.handlers[cmd] = route{h: s.strictHandler(h), class: class}
}

func (s *Server) route(cmd wire.Cmd) (route, bool) {
	s.hmu.RLock()
	defer s.hmu.RUnlock()
	r, ok := s.handlers[cmd]
	return r, ok
}

// drainTimeout bounds the discarding of an announced but unused payload
// after an early error (sanlock retries for about 20 ms).
const drainTimeout = 20 * time.Millisecond

// Conn is one accepted connection: the transport of a client, whose
// state (registration, name, restrict flags, kill program) is kept by the
// lease manager under the connection's ID (manager.ClientRegistry); with
// both, a client record in STATUS (docs/protocol.md "Record texts").
type Conn struct {
	srv     *Server
	uc      net.Conn // a *net.UnixConn, except with Serve on another listener
	slot    int
	fd      int
	peerPid int // SO_PEERCRED pid at accept
	peerUID int // SO_PEERCRED uid at accept (-1 if unknown)
	id      manager.ClientID

	wmu sync.Mutex // serialises writes

	mu        sync.Mutex
	cmdActive wire.Cmd
	cmdLast   wire.Cmd
	// inRequest: a request is dispatched; reqCause: why it fails, once
	// known (lasterror.go).
	inRequest bool
	reqCause  string
	// evListener: REG_EVENT made (or is making) this connection a
	// lockspace's event listener; a handover carries it with the
	// lockspace, not as a client (docs/upgrade.md "Adopting event listeners").
	evListener bool

	rd serving.Reader // reads through the quiesce gate (handover.go)

	pend serving.Slot // the restartable request running (pending.go)
}

var _ manager.Listener = (*Conn)(nil)

// ID returns the connection's client ID, unique for the daemon's life.
func (c *Conn) ID() manager.ClientID { return c.id }

// Slot returns the connection's slot ("ci").
func (c *Conn) Slot() int { return c.slot }

// FD returns the daemon-side file descriptor number.
func (c *Conn) FD() int { return c.fd }

// PeerPid returns the SO_PEERCRED pid recorded at accept (-1 if unknown).
func (c *Conn) PeerPid() int { return c.peerPid }

// Info returns the identity handed to OnClientDead.
func (c *Conn) Info() *ClientInfo {
	return &ClientInfo{ID: c.id, Slot: c.slot, Pid: c.clientStatus().Pid}
}

// SendNoWait writes b in one non-blocking send (event listeners).
func (c *Conn) SendNoWait(b []byte) error { return sendNoWait(c, b) }

// Ended reports whether an event listener ended (non-blocking read).
func (c *Conn) Ended() bool { return listenerEnded(c) }

// Write sends b in full.
func (c *Conn) Write(b []byte) error { return c.write(b) }

func (c *Conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.pend.Hold(b) {
		return nil
	}
	_, err := c.uc.Write(b)
	return err
}

// replyHeader is the header of a reply to q: q's, with version 1, length
// 32 (wire.Reply.MarshalBinary sets the length of a counted payload), data
// = rv and the given data2.
func replyHeader(q *wire.Request, rv int32, data2 uint32) wire.Header {
	h := q.Header
	h.Version, h.Length, h.Data, h.Data2 = wire.ProtoVersion, wire.HeaderSize, uint32(rv), data2
	return h
}

// send writes rp in the reply shape of its command (wire.Reply.MarshalBinary).
func (c *Conn) send(rp *wire.Reply) error {
	b, err := rp.MarshalBinary(rp.Header.Cmd)
	if err != nil {
		return err
	}
	c.noteResult(rp.Header.Cmd, int32(rp.Header.Data))
	return c.write(b)
}

// Reply sends the result reply of docs/protocol.md "Header" for q.
func (c *Conn) Reply(q *wire.Request, result int32) error {
	h := wire.ResultReply(q.Header, result)
	c.srv.metricsOf().Replied(q, result)
	c.noteResult(q.Header.Cmd, result)
	return c.write(h.Bytes())
}

// Close closes the connection (for handlers that returned ErrHold).
func (c *Conn) Close() error {
	err := c.uc.Close()
	c.srv.freeSlot(c)
	return err
}

// Raw returns the underlying connection (for held connections).
func (c *Conn) Raw() net.Conn { return c.uc }

// errNoSocket: the connection is not a socket (an in-memory connection of
// Serve), so it has no descriptor to read or send without blocking.
var errNoSocket = errors.New("daemon: connection is not a socket")

// rawConn returns the descriptor access of a socket connection.
func (c *Conn) rawConn() (syscall.RawConn, error) {
	if sc, ok := c.uc.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSocket
}

// serve reads requests one at a time and dispatches them. A bad header, an
// unknown command, an oversized or truncated payload, or a handler error
// closes this connection only; a panic is recovered and logged.
func (c *Conn) serve() {
	s := c.srv
	held := false
	c.rd.Init(&s.gate, c.uc)
	defer s.conns.Done()
	defer c.rd.End()
	defer func() {
		if r := recover(); r != nil {
			s.lg.Error("connection panic", zap.Int("ci", c.slot), zap.Any("panic", r),
				zap.ByteString("stack", debug.Stack()))
		}
		if held {
			return
		}
		_ = c.uc.Close()
		c.dead()
		s.freeSlot(c)
	}()
	for {
		c.rd.Begin()
		q, err := wire.ReadRequest(&c.rd, s.cfg.MaxPayload)
		if errors.Is(err, serving.ErrRedo) {
			err = c.runRedo()
			if errors.Is(err, ErrHold) {
				held = true
				return
			}
			if err != nil {
				if !errors.Is(err, errCloseConn) && !s.isClosing() {
					s.lg.Error("handed-over request error", zap.Int("ci", c.slot), zap.Int("fd", c.fd), zap.Error(err))
				}
				return
			}
			continue
		}
		if err != nil {
			var rv *rescode.Error
			if errors.As(err, &rv) && q != nil {
				// A payload the C daemon answers with a result (-E2BIG,
				// -ERANGE): drain what was announced, reply, go on.
				c.drain(q)
				if c.clientStatus().Restrict&wire.RestrictAll != 0 {
					continue
				}
				if err := c.replyBadPayload(q, int32(rv.Code)); err != nil {
					return
				}
				continue
			}
			if errors.Is(err, wire.ErrUnknownCmd) && q != nil {
				// A command number we do not know, under a magic we
				// do: drop its announced payload and answer
				// -ENOSYS. Both C daemons leave such a client
				// waiting for ever (docs/protocol.md "Unknown
				// commands").
				if c.unknownCmd(q) {
					continue
				}
				return
			}
			if !errors.Is(err, io.EOF) && !s.isClosing() {
				c.logBad(q, err)
			}
			return
		}
		if c.clientStatus().Restrict&wire.RestrictAll != 0 {
			continue // never answered (docs/protocol.md "Header checks" step 4)
		}
		err = c.dispatch(q)
		if errors.Is(err, ErrHold) {
			held = true
			return
		}
		if err != nil {
			if !errors.Is(err, errCloseConn) && !s.isClosing() {
				s.lg.Error("cmd_"+q.Header.Cmd.DebugName()+" error", zap.Int("ci", c.slot), zap.Int("fd", c.fd), zap.Error(err))
			}
			return
		}
	}
}

// replyBadPayload answers a request whose payload the C daemon rejects
// with a result (num_disks out of range, too many resources): in the order
// sanlock 3.8.5 checks things and in the reply shape it uses (measured
// black-box, docs/compat.md). ACQUIRE first resolves its target pid, so an
// unknown pid gives -ESRCH and an unregistered self -EBUSY before -ERANGE.
// READ_RESOURCE and READ_RESOURCE_OWNERS reply with the resource echoed, as
// on every other error of theirs.
func (c *Conn) replyBadPayload(q *wire.Request, result int32) error {
	switch q.Header.Cmd {
	case wire.CmdAcquire, wire.CmdAcquire2:
		if _, code := targetConn(c, q); code != 0 {
			result = code
		}
	case wire.CmdReadResource, wire.CmdReadResourceOwners:
		var res wire.Resource
		if len(q.Resources) > 0 {
			res = q.Resources[0]
		}
		res.Disks, res.NumDisks = nil, 0
		return c.send(&wire.Reply{Header: replyHeader(q, result, 0), Resource: &res})
	}
	return c.Reply(q, result)
}

// errCloseConn ends the connection after an I-close command.
var errCloseConn = errors.New("daemon: close after command")

// dispatch runs the handler of q's command.
func (c *Conn) dispatch(q *wire.Request) error {
	s := c.srv
	cmd := q.Header.Cmd
	r, ok := s.route(cmd)
	if ok {
		switch r.class {
		case ClassClose:
			s.reg.NameCommand(c.id, cmd.DebugName())
		case ClassWork:
			switch cmd {
			case wire.CmdAddLockspace, wire.CmdInqLockspace, wire.CmdRemLockspace:
				s.reg.NameCommand(c.id, cmd.DebugName())
			default:
				s.reg.NameCommand(c.id, "cmd"+strconv.Itoa(int(cmd)))
			}
		}
	}
	c.mu.Lock()
	c.cmdLast = cmd
	if ok && r.class == ClassWork {
		// Only worker commands are "active" (3.8.5 shows cmd_active 0
		// for the commands its main loop answers itself, status included).
		c.cmdActive = cmd
	}
	c.mu.Unlock()
	if !ok {
		// A command whose payload was read but that nothing serves:
		// answer -ENOSYS and go on (the request was framed exactly).
		s.lg.Warn("cmd_"+cmd.DebugName()+" not implemented", zap.Int("ci", c.slot), zap.Int("fd", c.fd))
		return c.Reply(q, rescode.RvENOSYS)
	}
	if cmd != wire.CmdRegister && s.cfg.DebugCmd(cmd) {
		s.lg.Debug("cmd_"+cmd.DebugName(), zap.Int("ci", c.slot), zap.Int("fd", c.fd))
	}
	if s.deps.Tuning != nil {
		s.deps.Tuning.RequestBegin()
	}
	c.beginRequest()
	end := s.metricsOf().Begin(q)
	var err error
	if serving.Restartable(q) {
		err = c.runHandler(r.h, q)
	} else {
		err = r.h(s.ctx, c, q)
	}
	end()
	c.endRequest()
	if s.deps.Tuning != nil {
		s.deps.Tuning.RequestEnd()
	}
	c.mu.Lock()
	c.cmdActive = 0
	c.mu.Unlock()
	if err == nil && r.class == ClassClose {
		return errCloseConn
	}
	return err
}

// unknownCmd answers a request whose command number is unknown: its
// payload, framed only by the length field, is discarded (at most
// MaxPayload bytes, within the drain timeout) and the reply is -ENOSYS.
// It reports whether the connection can go on: not when the announced
// payload could not be read whole, since the next header would start
// inside it. Nothing of the payload is looked at.
func (c *Conn) unknownCmd(q *wire.Request) bool {
	s := c.srv
	s.lg.Warn("cmd"+strconv.FormatUint(uint64(q.Header.Cmd), 10)+" unknown", zap.Int("ci", c.slot), zap.Int("fd", c.fd),
		zap.Uint32("length", q.Header.Length))
	limit := int64(s.cfg.MaxPayload)
	if limit <= 0 {
		limit = wire.DefaultMaxPayload
	}
	whole := q.DrainLen() <= limit
	if whole {
		c.drain(q)
		whole = q.DrainLen() == 0
	}
	if c.clientStatus().Restrict&wire.RestrictAll != 0 {
		return whole // never answered (docs/protocol.md "Header checks" step 4)
	}
	if err := c.Reply(q, rescode.RvENOSYS); err != nil {
		return false
	}
	return whole
}

// drain discards the unread rest of an announced payload, bounded in size
// and time (docs/protocol.md "Header").
func (c *Conn) drain(q *wire.Request) {
	_ = c.uc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = wire.Drain(c.uc, q, int64(c.srv.cfg.MaxPayload))
	_ = c.uc.SetReadDeadline(time.Time{})
}

func (c *Conn) logBad(q *wire.Request, err error) {
	f := []zap.Field{zap.Int("ci", c.slot), zap.Int("fd", c.fd), zap.Error(err)}
	if q != nil {
		f = append(f, zap.Uint32("cmd", uint32(q.Header.Cmd)), zap.Uint32("length", q.Header.Length))
	}
	c.srv.lg.Debug("bad message, connection closed", f...)
}

// register marks the connection registered to its peer pid (docs/protocol.md "Commands" #1).
func (c *Conn) register() error {
	if c.peerPid <= 0 {
		return errors.New("register: no peer pid")
	}
	c.srv.reg.Register(c.id, c.peerPid)
	c.srv.lg.Debug("cmd_register", zap.Int("ci", c.slot), zap.Int("fd", c.fd), zap.Int("pid", c.peerPid))
	return nil
}

// dead runs the death handling of a registered connection (docs/protocol.md "Registration").
// Unregistered connections are simply freed. During daemon exit the hooks
// are skipped.
func (c *Conn) dead() {
	if !c.srv.reg.MarkDead(c.id) {
		return
	}
	c.mu.Lock()
	active := c.cmdActive
	c.mu.Unlock()
	s := c.srv
	if s.isClosing() {
		return
	}
	s.lg.Debug("client_pid_dead", zap.Int("ci", c.slot), zap.Int("fd", c.fd), zap.Int("pid", c.peerPid),
		zap.Int("cmd_active", int(active)))
	info := c.Info()
	s.mgr.Resources.ClientDead(c.id)
	if s.deps.OnClientDead != nil {
		s.deps.OnClientDead(info)
	}
}

// clientRecord is the CLIENT record of the connection (docs/protocol.md "Record texts").
func (c *Conn) clientRecord() wire.StateRecord {
	c.mu.Lock()
	active, last := c.cmdActive, c.cmdLast
	c.mu.Unlock()
	return c.clientStatus().Record(c.slot, c.fd, uint32(active), uint32(last))
}

// clientStatus is the client state of the connection (its record, a
// handover's snapshot).
func (c *Conn) clientStatus() manager.ClientStatus {
	st, _ := c.srv.reg.Status(c.id)
	return st
}

// restoreClient gives an adopted connection its handed-over client state.
func (s *Server) restoreClient(c *Conn, st manager.ClientStatus) { s.reg.Add(c.id, st) }

// adoptedClients are the clients of adopted connections as the lease
// manager's adoption takes them: the registered ones, 0 for the others.
func adoptedClients(conns []*Conn) []manager.ClientID {
	clients := make([]manager.ClientID, len(conns))
	for i, c := range conns {
		if c.clientStatus().Registered {
			clients[i] = c.id
		}
	}
	return clients
}
