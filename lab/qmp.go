package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmp is a connection to one QEMU's monitor (QMP). Commands are sent one
// at a time; events are handed to onEvent with the host time they were
// read at.
type qmp struct {
	conn    net.Conn
	mu      sync.Mutex // one command at a time
	replies chan qmpMessage
	onEvent func(at time.Time, name string, data json.RawMessage)
	closed  chan struct{}
}

// qmpMessage is any message QEMU sends: a greeting, a reply or an event.
type qmpMessage struct {
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
}

// dialQMP connects to the QMP socket at path (retrying until deadline,
// as QEMU creates it while starting) and leaves capabilities negotiation.
func dialQMP(path string, deadline time.Time, onEvent func(time.Time, string, json.RawMessage)) (*qmp, error) {
	var conn net.Conn
	var err error
	for {
		conn, err = net.Dial("unix", path)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("qmp %s: %w", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	q := &qmp{conn: conn, replies: make(chan qmpMessage, 1), onEvent: onEvent, closed: make(chan struct{})}
	go q.read()
	// The greeting arrives as the first reply-less message; the read loop
	// passes it on as a reply, which is dropped here.
	select {
	case <-q.replies:
	case <-q.closed:
		return nil, fmt.Errorf("qmp %s: closed before the greeting", path)
	case <-time.After(time.Until(deadline)):
		conn.Close()
		return nil, fmt.Errorf("qmp %s: no greeting", path)
	}
	if _, err := q.command("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// read dispatches QEMU's messages until the connection closes.
func (q *qmp) read() {
	defer close(q.closed)
	sc := bufio.NewScanner(q.conn)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m qmpMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.Event != "" {
			if q.onEvent != nil {
				q.onEvent(time.Now(), m.Event, m.Data)
			}
			continue
		}
		select {
		case q.replies <- m:
		default:
		}
	}
}

// command runs one QMP command and returns its "return" value.
func (q *qmp) command(name string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	req := map[string]any{"execute": name}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", name, err)
	}
	select {
	case m := <-q.replies:
		if m.Error != nil {
			return nil, fmt.Errorf("qmp %s: %s: %s", name, m.Error.Class, m.Error.Desc)
		}
		return m.Return, nil
	case <-q.closed:
		return nil, fmt.Errorf("qmp %s: connection closed", name)
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("qmp %s: no reply in 10 s", name)
	}
}

func (q *qmp) close() error { return q.conn.Close() }
