package metrics

import (
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/gosanlock/gosanlock/internal/promtext"
)

// indexPage is the page at `/`: where the metrics are and what a scrape
// holds now, family by family. The daemon's own families come first, then
// the Go runtime's.
var indexPage = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>gosanlock daemon metrics</title></head>
<body>
<h1>gosanlock daemon</h1>
<p>Prometheus metrics: <a href="/metrics">/metrics</a> (text format 0.0.4).
Alert rules and a Grafana dashboard: contrib/monitoring/ in the source tree; the metrics are described in docs/metrics.md.</p>
<p>Watchdog: {{if .Watchdog}}in use (sanlock_lockspace_watchdog_expiry_seconds is exported){{else}}not in use (-w 0): no watchdog metrics{{end}}.</p>
<h2>Exported now</h2>
<table>
<tr><th>metric</th><th>type</th><th>series</th><th>meaning</th></tr>
{{range .Families}}<tr><td><code>{{.Name}}</code></td><td>{{.Type}}</td><td>{{len .Series}}</td><td>{{.Help}}</td></tr>
{{end}}</table>
</body>
</html>
`))

// index serves indexPage at `/` (GET and HEAD); every other path is a 404.
func (m *Endpoint) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	fams := slices.DeleteFunc(m.gather(), func(f promtext.Family) bool { return len(f.Series) == 0 })
	own := func(f promtext.Family) bool { return strings.HasPrefix(f.Name, namespace+"_") }
	slices.SortStableFunc(fams, func(a, b promtext.Family) int {
		if own(a) != own(b) {
			if own(a) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexPage.Execute(w, struct {
		Watchdog bool
		Families []promtext.Family
	}{m.src.Watchdog, fams})
}
