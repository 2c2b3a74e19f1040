package daemon

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsOffByDefault(t *testing.T) {
	td := startDaemon(t, nil)
	stop, err := td.srv.startMetrics()
	require.NoError(t, err)
	stop()
	assert.Nil(t, td.srv.metricsOf())
	// The hooks are no-ops without the endpoint.
	td.srv.metricsOf().Replied(&wire.Request{}, 0)
	td.srv.renewalHook("ls")(nil, 1, 1)
	(*Server)(nil).renewalHook("ls")(rescode.ErrAIOTimeout, -1, -1)
}

func TestMetricsScrape(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	td := startDaemon(t, func(c *Config, _ *Deps) { c.MetricsAddress = addr })
	stop, err := td.srv.startMetrics()
	require.NoError(t, err)
	t.Cleanup(stop)

	// A second endpoint on the same address fails with a clear error.
	td2 := startDaemon(t, func(c *Config, _ *Deps) { c.MetricsAddress = addr })
	_, err = td2.srv.startMetrics()
	require.ErrorContains(t, err, "metrics listen "+addr)

	held := td.dial() // one open, unregistered connection
	_ = held
	m := td.srv.metricsOf()
	require.NotNil(t, m)
	m.Replied(&wire.Request{Header: wire.Header{Cmd: wire.CmdAcquire}}, -243)
	m.Replied(&wire.Request{Header: wire.Header{Cmd: wire.CmdStatus}}, 0) // not counted

	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, `sanlock_requests_total{cmd="acquire",result="-243"} 1`)
	assert.NotContains(t, text, `cmd="status"`)
	assert.Regexp(t, `sanlock_clients_connected\{registered="0"\} [1-9]`, text)
	assert.Contains(t, text, "# HELP sanlock_clients_connected ")
}
