// Package promtext serves metrics in the Prometheus text exposition format
// 0.0.4: the daemon's `/metrics` endpoint (docs/metrics.md). It keeps the
// counters and histograms that are updated as events happen, reads the Go
// runtime's figures at scrape time, and writes families sorted by name and
// series sorted by label values, as the Prometheus client library did
// before it (docs/dependencies.md says why that library was dropped).
//
// Only what the daemon needs is here: counters, gauges, histograms and one
// summary (the Go runtime's GC pauses); no protobuf or OpenMetrics output.
package promtext

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The metric types of a family's `# TYPE` line.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
	Summary   = "summary"
)

// ContentType is the media type of the text format written by Write.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label is one label of a series.
type Label struct{ Name, Value string }

// Quantile is one quantile of a summary series.
type Quantile struct{ Q, Value float64 }

// Series is one labelled series of a family. Counters and gauges use
// Value; histograms use Bounds (the finite upper bounds, ascending),
// Cumulative (the count of observations ≤ each bound), Count and Sum;
// summaries use Quantiles, Count and Sum.
type Series struct {
	Labels     []Label
	Value      float64
	Bounds     []float64
	Cumulative []uint64
	Quantiles  []Quantile
	Count      uint64
	Sum        float64
}

// Family is a metric name with its help text, type and series.
type Family struct {
	Name, Help, Type string
	Series           []Series
}

// Write writes fams in the text format: families in name order (a family
// without series is left out), the labels of each series in name order,
// the series of a family ordered by their label values. It sorts fams and
// their series in place.
func Write(w io.Writer, fams []Family) error {
	bw := bufio.NewWriter(w)
	slices.SortStableFunc(fams, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	for i := range fams {
		f := &fams[i]
		if len(f.Series) == 0 {
			continue
		}
		for j := range f.Series {
			slices.SortStableFunc(f.Series[j].Labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
		}
		slices.SortStableFunc(f.Series, compareSeries)
		writeFamily(bw, f)
	}
	return bw.Flush()
}

// compareSeries orders series by their label values, label by label.
func compareSeries(a, b Series) int {
	for i := 0; i < len(a.Labels) && i < len(b.Labels); i++ {
		if c := strings.Compare(a.Labels[i].Value, b.Labels[i].Value); c != 0 {
			return c
		}
	}
	return len(a.Labels) - len(b.Labels)
}

func writeFamily(w *bufio.Writer, f *Family) {
	if f.Help != "" {
		w.WriteString("# HELP ")
		w.WriteString(f.Name)
		w.WriteByte(' ')
		writeEscaped(w, f.Help, false)
		w.WriteByte('\n')
	}
	w.WriteString("# TYPE ")
	w.WriteString(f.Name)
	w.WriteByte(' ')
	w.WriteString(f.Type)
	w.WriteByte('\n')
	for i := range f.Series {
		s := &f.Series[i]
		switch f.Type {
		case Histogram:
			for k, b := range s.Bounds {
				writeSample(w, f.Name, "_bucket", s.Labels, "le", b, float64(s.Cumulative[k]))
			}
			writeSample(w, f.Name, "_bucket", s.Labels, "le", math.Inf(1), float64(s.Count))
			writeSample(w, f.Name, "_sum", s.Labels, "", 0, s.Sum)
			writeSample(w, f.Name, "_count", s.Labels, "", 0, float64(s.Count))
		case Summary:
			for _, q := range s.Quantiles {
				writeSample(w, f.Name, "", s.Labels, "quantile", q.Q, q.Value)
			}
			writeSample(w, f.Name, "_sum", s.Labels, "", 0, s.Sum)
			writeSample(w, f.Name, "_count", s.Labels, "", 0, float64(s.Count))
		default:
			writeSample(w, f.Name, "", s.Labels, "", 0, s.Value)
		}
	}
}

// writeSample writes one line: name+suffix, the labels (plus extra=xv when
// extra is set: a histogram's le, a summary's quantile) and the value.
func writeSample(w *bufio.Writer, name, suffix string, labels []Label, extra string, xv, v float64) {
	w.WriteString(name)
	w.WriteString(suffix)
	if len(labels) > 0 || extra != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l.Name)
			w.WriteString(`="`)
			writeEscaped(w, l.Value, true)
			w.WriteByte('"')
		}
		if extra != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extra)
			w.WriteString(`="`)
			writeFloat(w, xv)
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	writeFloat(w, v)
	w.WriteByte('\n')
}

// writeFloat writes v as the shortest decimal that reads back as v
// (exponent form for large and small values), +Inf, -Inf or NaN.
func writeFloat(w *bufio.Writer, v float64) {
	var b [32]byte
	w.Write(strconv.AppendFloat(b[:0], v, 'g', -1, 64))
}

// writeEscaped escapes a backslash and a newline (and, in a label value,
// a double quote), as the format requires.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// vec is the series of a counter or histogram family by label values.
type vec[T any] struct {
	name, help string
	labels     []string
	mu         sync.Mutex
	series     map[string]*entry[T]
}

type entry[T any] struct {
	values []string
	v      T
}

func newVec[T any](name, help string, labels []string) vec[T] {
	return vec[T]{name: name, help: help, labels: labels, series: map[string]*entry[T]{}}
}

// with runs f on the series of values (created at zero) under the lock.
// It panics when the number of values is not that of the labels: a
// programming error, as with the Prometheus client.
func (v *vec[T]) with(values []string, f func(*T)) {
	if len(values) != len(v.labels) {
		panic("promtext: " + v.name + ": " + strconv.Itoa(len(values)) + " label values for " +
			strconv.Itoa(len(v.labels)) + " labels")
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.series[key]
	if !ok {
		e = &entry[T]{values: slices.Clone(values)}
		v.series[key] = e
	}
	f(&e.v)
}

// family returns the family with one series per entry, filled by fill
// under the lock.
func (v *vec[T]) family(typ string, fill func(*Series, *T)) Family {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := Family{Name: v.name, Help: v.help, Type: typ, Series: make([]Series, 0, len(v.series))}
	for _, e := range v.series {
		s := Series{Labels: make([]Label, len(v.labels))}
		for i, n := range v.labels {
			s.Labels[i] = Label{n, e.values[i]}
		}
		fill(&s, &e.v)
		f.Series = append(f.Series, s)
	}
	return f
}

// CounterVec is a counter family with labels.
type CounterVec struct{ v vec[float64] }

// NewCounterVec returns a counter family; its series appear once counted.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{newVec[float64](name, help, labels)}
}

// Inc adds 1 to the series of the label values (in the order of the labels).
func (c *CounterVec) Inc(values ...string) { c.Add(1, values...) }

// Add adds d (≥ 0) to the series of the label values.
func (c *CounterVec) Add(d float64, values ...string) {
	if d < 0 {
		panic("promtext: counter " + c.v.name + " decreased")
	}
	c.v.with(values, func(x *float64) { *x += d })
}

// Family returns the counter's current series.
func (c *CounterVec) Family() Family {
	return c.v.family(Counter, func(s *Series, x *float64) { s.Value = *x })
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct {
	v      vec[hist]
	bounds []float64
}

type hist struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

// NewHistogramVec returns a histogram family with the given finite upper
// bounds (ascending); its series appear once observed.
func NewHistogramVec(name, help string, bounds []float64, labels ...string) *HistogramVec {
	if !slices.IsSorted(bounds) {
		panic("promtext: histogram " + name + ": bounds not ascending")
	}
	return &HistogramVec{v: newVec[hist](name, help, labels), bounds: slices.Clone(bounds)}
}

// Observe counts x in the series of the label values: in the first bucket
// whose upper bound is ≥ x.
func (h *HistogramVec) Observe(x float64, values ...string) {
	i, _ := slices.BinarySearch(h.bounds, x)
	h.v.with(values, func(e *hist) {
		if e.counts == nil {
			e.counts = make([]uint64, len(h.bounds)+1)
		}
		e.counts[i]++
		e.sum += x
	})
}

// Family returns the histogram's current series.
func (h *HistogramVec) Family() Family {
	return h.v.family(Histogram, func(s *Series, e *hist) {
		s.Bounds = h.bounds
		s.Cumulative = make([]uint64, len(h.bounds))
		var n uint64
		for i := range h.bounds {
			n += e.counts[i]
			s.Cumulative[i] = n
		}
		s.Count = n + e.counts[len(h.bounds)]
		s.Sum = e.sum
	})
}

// Gauge1 returns a gauge family of one series, labelled by labels (none
// for an unlabelled series).
func Gauge1(name, help string, v float64, labels ...Label) Family {
	return Family{Name: name, Help: help, Type: Gauge, Series: []Series{{Labels: labels, Value: v}}}
}

// Handler serves the families that gather returns at each request, in the
// text format, gzip-compressed when the client accepts gzip.
func Handler(gather func() []Family) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fams := gather()
		h := w.Header()
		h.Set("Content-Type", ContentType)
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			_ = Write(w, fams)
			return
		}
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		zw := gzip.NewWriter(w)
		if Write(zw, fams) == nil {
			_ = zw.Close()
		}
	})
}

// acceptsGzip tells whether an Accept-Encoding value lists gzip without
// q=0.
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		f, err := strconv.ParseFloat(q, 64)
		return err == nil && f > 0
	}
	return false
}
