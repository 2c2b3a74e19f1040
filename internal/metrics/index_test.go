package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get serves one request to the endpoint's mux.
func get(t *testing.T, h http.Handler, method, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body), rec.Result().Header
}

func TestIndexPage(t *testing.T) {
	for _, wd := range []bool{false, true} {
		m := newEndpoint(Source{Watchdog: wd, Clients: func() (int, int) { return 1, 2 }})
		m.reqResults.Inc("acquire", "0")
		h := m.handler()
		code, body, hdr := get(t, h, http.MethodGet, "/")
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
		assert.Contains(t, body, `<a href="/metrics">/metrics</a>`)
		assert.Contains(t, body, "<code>sanlock_clients_connected</code></td><td>gauge</td><td>2</td>")
		assert.Contains(t, body, "<code>sanlock_requests_total</code></td><td>counter</td><td>1</td>")
		assert.Contains(t, body, "<code>go_goroutines</code>")
		assert.Less(t, strings.Index(body, "sanlock_requests_total"), strings.Index(body, "go_goroutines"), "own families first")
		assert.NotContains(t, body, "sanlock_renewal_failures_total", "families without series are left out")
		if wd {
			assert.Contains(t, body, "Watchdog: in use")
		} else {
			assert.Contains(t, body, "Watchdog: not in use")
		}
	}
	h := newEndpoint(Source{}).handler()
	for _, p := range []string{"/index.html", "/metrics/", "/x"} {
		code, _, _ := get(t, h, http.MethodGet, p)
		assert.Equal(t, http.StatusNotFound, code, p)
	}
	code, _, hdr := get(t, h, http.MethodPost, "/")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))
	code, body, _ := get(t, h, http.MethodGet, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "# TYPE sanlock_clients_connected gauge")
}
