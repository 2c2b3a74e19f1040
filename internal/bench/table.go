package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// ColFloor is the column of the bare I/O floor.
const ColFloor = "floor"

// Table holds one case's figures for every run. A figure is a row; its
// columns are the floor and the implementations. Ratios are taken within
// each run (only ratios from one run mean anything on a noisy machine) and
// the table shows the median over runs of every value and every ratio.
type Table struct {
	Case  string
	Title string
	Notes []string

	cols []string // value columns, in order
	rows []string // figures, in order of first set
	// vals[row][col] holds one value per run (NaN when a run lacked it).
	vals map[string]map[string][]float64
	runs int
}

func newTable(name, title string, cols []string) *Table {
	return &Table{Case: name, Title: title, cols: cols, vals: map[string]map[string][]float64{}}
}

// set records value v of figure row for column col in run (0-based).
func (t *Table) set(run int, row, col string, v float64) {
	if t.vals[row] == nil {
		t.vals[row] = map[string][]float64{}
		t.rows = append(t.rows, row)
	}
	s := t.vals[row][col]
	for len(s) <= run {
		s = append(s, math.NaN())
	}
	s[run] = v
	t.vals[row][col] = s
	t.runs = max(t.runs, run+1)
}

func (t *Table) note(format string, args ...any) {
	t.Notes = append(t.Notes, fmt.Sprintf(format, args...))
}

// ratio is a derived column a/b.
type ratio struct{ num, den string }

func (r ratio) name() string { return short(r.num) + "/" + short(r.den) }

// short is a column's name in a ratio header.
func short(col string) string {
	switch col {
	case "gosanlock":
		return "go"
	case "sanlock-3.8.5":
		return "sanlock"
	}
	return col
}

// ratios lists the ratio columns that have data in some row.
func (t *Table) ratios() []ratio {
	var impls []string
	for _, c := range t.cols {
		if c != ColFloor {
			impls = append(impls, c)
		}
	}
	var rs []ratio
	if len(impls) == 2 {
		rs = append(rs, ratio{impls[1], impls[0]})
	}
	if slices.Contains(t.cols, ColFloor) {
		for _, c := range impls {
			rs = append(rs, ratio{c, ColFloor})
		}
	}
	var out []ratio
	for _, r := range rs {
		for _, row := range t.rows {
			if !math.IsNaN(t.ratioMedian(row, r)) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func median(v []float64) float64 {
	var s []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	a, b := s[len(s)/2-1], s[len(s)/2]
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return b
	}
	return (a + b) / 2
}

// Median returns the median over runs of figure row in column col (NaN if
// absent).
func (t *Table) Median(row, col string) float64 {
	if t.vals[row] == nil {
		return math.NaN()
	}
	return median(t.vals[row][col])
}

func (t *Table) perRunRatios(row string, r ratio) []float64 {
	num, den := t.vals[row][r.num], t.vals[row][r.den]
	out := make([]float64, 0, len(num))
	for i := range num {
		if i >= len(den) || math.IsNaN(num[i]) || math.IsNaN(den[i]) || den[i] == 0 || math.IsInf(num[i], 0) || math.IsInf(den[i], 0) {
			continue
		}
		out = append(out, num[i]/den[i])
	}
	return out
}

func (t *Table) ratioMedian(row string, r ratio) float64 {
	return median(t.perRunRatios(row, r))
}

// Rows returns the figures in order.
func (t *Table) Rows() []string { return t.rows }

func fmtVal(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.2f", v)
	case math.Abs(v) >= 0.1:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// Print writes the table as aligned text.
func (t *Table) Print(w io.Writer) {
	fmt.Fprintf(w, "== %s: %s (median of %d run(s)) ==\n", t.Case, t.Title, t.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rs := t.ratios()
	hdr := []string{"figure"}
	hdr = append(hdr, t.cols...)
	for _, r := range rs {
		hdr = append(hdr, r.name())
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, row := range t.rows {
		cells := []string{row}
		for _, c := range t.cols {
			cells = append(cells, fmtVal(t.Median(row, c)))
		}
		for _, r := range rs {
			cells = append(cells, fmtRatio(t.ratioMedian(row, r)))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	_ = tw.Flush()
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
}

// jsonNum is a float that encodes NaN as null and infinities as strings.
type jsonNum float64

func (v jsonNum) MarshalJSON() ([]byte, error) {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-inf"`), nil
	}
	return json.Marshal(f)
}

type jsonRow struct {
	Figure string               `json:"figure"`
	Median map[string]jsonNum   `json:"median"`
	Ratios map[string]jsonNum   `json:"ratios,omitempty"`
	Runs   map[string][]jsonNum `json:"runs"`
}

type jsonTable struct {
	Case  string    `json:"case"`
	Title string    `json:"title"`
	Runs  int       `json:"runs"`
	Notes []string  `json:"notes,omitempty"`
	Rows  []jsonRow `json:"rows"`
}

func (t *Table) jsonValue() jsonTable {
	jt := jsonTable{Case: t.Case, Title: t.Title, Runs: t.runs, Notes: t.Notes}
	rs := t.ratios()
	for _, row := range t.rows {
		jr := jsonRow{Figure: row, Median: map[string]jsonNum{}, Runs: map[string][]jsonNum{}}
		for _, c := range t.cols {
			if _, ok := t.vals[row][c]; !ok {
				continue
			}
			jr.Median[c] = jsonNum(t.Median(row, c))
			for _, v := range t.vals[row][c] {
				jr.Runs[c] = append(jr.Runs[c], jsonNum(v))
			}
		}
		for _, r := range rs {
			if v := t.ratioMedian(row, r); !math.IsNaN(v) {
				if jr.Ratios == nil {
					jr.Ratios = map[string]jsonNum{}
				}
				jr.Ratios[r.name()] = jsonNum(v)
			}
		}
		jt.Rows = append(jt.Rows, jr)
	}
	return jt
}

// WriteJSON writes all tables as one JSON document.
func WriteJSON(w io.Writer, ts []*Table) error {
	out := struct {
		Tables []jsonTable `json:"tables"`
	}{}
	for _, t := range ts {
		out.Tables = append(out.Tables, t.jsonValue())
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
