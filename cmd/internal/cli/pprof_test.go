package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServePprof: the paths slbench -pprof fetches answer with profiles
// (gzip-compressed protobuf), the index lists the runtime's profiles, and
// anything else is 404.
func TestServePprof(t *testing.T) {
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		servePprof(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	for _, p := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap", "/debug/pprof/heap?gc=1", "/debug/pprof/goroutine"} {
		w := get(p)
		b := w.Body.Bytes()
		if w.Code != http.StatusOK || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: status %d, %d bytes, want 200 and a gzip profile", p, w.Code, len(b))
		}
	}
	if w := get("/debug/pprof/goroutine?debug=1"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "goroutine profile:") {
		t.Errorf("goroutine?debug=1: status %d, body %.80q", w.Code, w.Body.String())
	}
	if w := get("/debug/pprof/"); !strings.Contains(w.Body.String(), "heap\n") || !strings.Contains(w.Body.String(), "profile\n") {
		t.Errorf("index: %q", w.Body.String())
	}
	for _, p := range []string{"/debug/pprof/nosuch", "/metrics"} {
		if w := get(p); w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, w.Code)
		}
	}
}
