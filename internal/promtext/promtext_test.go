package promtext

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, fams ...Family) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Write(&b, fams))
	return b.String()
}

func TestCounterAndHistogramText(t *testing.T) {
	c := NewCounterVec("x_requests_total", "Requests by result.", "cmd", "result")
	c.Inc("release", "0")
	c.Inc("acquire", "-243")
	c.Add(2, "acquire", "0")
	h := NewHistogramVec("x_seconds", "Durations.", []float64{0.001, 0.01, 1}, "lockspace")
	h.Observe(0.001, "b") // a bound is inclusive
	h.Observe(0.5, "b")
	h.Observe(7, "b") // only in +Inf
	h.Observe(0.002, "a")
	empty := NewCounterVec("x_empty_total", "Never counted.", "l")

	want := `# HELP x_requests_total Requests by result.
# TYPE x_requests_total counter
x_requests_total{cmd="acquire",result="-243"} 1
x_requests_total{cmd="acquire",result="0"} 2
x_requests_total{cmd="release",result="0"} 1
# HELP x_seconds Durations.
# TYPE x_seconds histogram
x_seconds_bucket{lockspace="a",le="0.001"} 0
x_seconds_bucket{lockspace="a",le="0.01"} 1
x_seconds_bucket{lockspace="a",le="1"} 1
x_seconds_bucket{lockspace="a",le="+Inf"} 1
x_seconds_sum{lockspace="a"} 0.002
x_seconds_count{lockspace="a"} 1
x_seconds_bucket{lockspace="b",le="0.001"} 1
x_seconds_bucket{lockspace="b",le="0.01"} 1
x_seconds_bucket{lockspace="b",le="1"} 2
x_seconds_bucket{lockspace="b",le="+Inf"} 3
x_seconds_sum{lockspace="b"} 7.501
x_seconds_count{lockspace="b"} 3
`
	assert.Equal(t, want, write(t, h.Family(), empty.Family(), c.Family()))
}

func TestGaugesSortedAndEscaped(t *testing.T) {
	f := Family{Name: "x_state", Help: "A \\ help\nwith two lines.", Type: Gauge}
	// Labels given out of name order are written in name order; series in
	// the order of their values.
	f.Series = append(f.Series,
		Series{Labels: []Label{{"lockspace", `q"uo\te` + "\n"}, {"host_id", "2"}}, Value: -1},
		Series{Labels: []Label{{"lockspace", "a"}, {"host_id", "10"}}, Value: 1e21},
		Series{Labels: []Label{{"lockspace", "a"}, {"host_id", "1"}}, Value: math.Inf(-1)},
	)
	g := Gauge1("x_plain", "", 2.5)
	want := `# TYPE x_plain gauge
x_plain 2.5
# HELP x_state A \\ help\nwith two lines.
# TYPE x_state gauge
x_state{host_id="1",lockspace="a"} -Inf
x_state{host_id="10",lockspace="a"} 1e+21
x_state{host_id="2",lockspace="q\"uo\\te\n"} -1
`
	assert.Equal(t, want, write(t, f, g))
}

func TestSummaryText(t *testing.T) {
	f := Family{Name: "x_pause_seconds", Help: "Pauses.", Type: Summary, Series: []Series{{
		Quantiles: []Quantile{{0, 0}, {0.25, 1e-05}, {0.5, 2e-05}, {0.75, 3e-05}, {1, 0.001}},
		Count:     4, Sum: 0.00106}}}
	want := `# HELP x_pause_seconds Pauses.
# TYPE x_pause_seconds summary
x_pause_seconds{quantile="0"} 0
x_pause_seconds{quantile="0.25"} 1e-05
x_pause_seconds{quantile="0.5"} 2e-05
x_pause_seconds{quantile="0.75"} 3e-05
x_pause_seconds{quantile="1"} 0.001
x_pause_seconds_sum 0.00106
x_pause_seconds_count 4
`
	assert.Equal(t, want, write(t, f))
}

func TestWrongLabelCountPanics(t *testing.T) {
	c := NewCounterVec("x_total", "", "a", "b")
	assert.Panics(t, func() { c.Inc("only one") })
	assert.Panics(t, func() { c.Add(-1, "a", "b") })
	assert.Panics(t, func() { NewHistogramVec("x", "", []float64{2, 1}) })
}

func TestConcurrentUpdates(t *testing.T) {
	c := NewCounterVec("x_total", "", "l")
	h := NewHistogramVec("x_seconds", "", []float64{1}, "l")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				c.Inc("a")
				h.Observe(0.5, "a")
				if j%100 == 0 {
					_ = write(t, c.Family(), h.Family())
				}
			}
		}()
	}
	wg.Wait()
	out := write(t, c.Family(), h.Family())
	assert.Contains(t, out, `x_total{l="a"} 8000`)
	assert.Contains(t, out, `x_seconds_count{l="a"} 8000`)
	assert.Contains(t, out, `x_seconds_bucket{l="a",le="1"} 8000`)
}

func TestGoRuntime(t *testing.T) {
	out := write(t, GoRuntime()...)
	for _, name := range []string{"go_goroutines", "go_threads", "go_gc_duration_seconds", "go_info",
		"go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes",
		"go_memstats_last_gc_time_seconds", "go_sched_gomaxprocs_threads", "go_gc_gogc_percent"} {
		assert.Contains(t, out, "\n# TYPE "+name+" ", name)
	}
	assert.Contains(t, out, "\ngo_gc_duration_seconds{quantile=\"0.5\"} ")
	assert.Regexp(t, `\ngo_goroutines [1-9]`, out)
	assert.Regexp(t, `\ngo_memstats_sys_bytes [1-9]`, out)
	assert.Contains(t, out, `go_info{version="go`)
	assert.Contains(t, out, "\n# TYPE go_memstats_alloc_bytes_total counter\n")
}

func TestHandlerGzip(t *testing.T) {
	c := NewCounterVec("x_total", "Things.", "l")
	c.Inc("v")
	srv := httptest.NewServer(Handler(func() []Family { return []Family{c.Family()} }))
	defer srv.Close()
	get := func(enc string) (*http.Response, string) {
		req, err := http.NewRequest("GET", srv.URL, nil)
		require.NoError(t, err)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			require.NoError(t, err)
			r = zr
		}
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		return resp, string(b)
	}
	want := "# HELP x_total Things.\n# TYPE x_total counter\nx_total{l=\"v\"} 1\n"
	for enc, gz := range map[string]bool{"": false, "gzip": true, "deflate, gzip;q=0.5": true,
		"gzip;q=0": false, "identity": false} {
		resp, body := get(enc)
		assert.Equal(t, ContentType, resp.Header.Get("Content-Type"), enc)
		assert.Equal(t, gz, resp.Header.Get("Content-Encoding") == "gzip", enc)
		assert.Equal(t, want, body, enc)
	}
}
