package bench

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// TestSmoke runs every case at -quick sizes against our daemon (and
// sanlock 3.8.5 and python3-sanlock when installed, as in CI), with a CPU
// profile of the serial case, so that `make bench` cannot rot. It asserts
// only that every table is produced and filled, never a speed.
func TestSmoke(t *testing.T) {
	testenv.NeedRoot(t, "the daemons start with -U root -G root")
	if testing.Short() {
		t.Skip("-short")
	}
	ours := filepath.Join(t.TempDir(), "sanlock")
	out, err := exec.Command("go", "build", "-o", ours, "github.com/gosanlock/gosanlock/cmd/sanlock").CombinedOutput()
	require.NoError(t, err, "%s", out)

	cfg := Defaults().Quick()
	cfg.Ours = ours
	cfg.PprofDir = t.TempDir()
	cfg.PprofSeconds = time.Second
	var progress, tables bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ts, err := Run(ctx, cfg, &tables)
	t.Logf("progress:\n%s\ntables:\n%s", &progress, &tables)
	require.NoError(t, err)

	impls := cfg.Impls()
	got := map[string]*Table{}
	for _, tb := range ts {
		got[tb.Case] = tb
	}
	for _, name := range AllCases {
		tb := got[name]
		require.NotNil(t, tb, "no table for case %s", name)
		require.NotEmpty(t, tb.Rows(), "case %s", name)
		assert.Contains(t, tables.String(), "== "+name+":")
		for _, row := range tb.Rows() {
			if strings.HasPrefix(row, "python3-sanlock") && !pythonOK(cfg.Python) {
				continue
			}
			for _, im := range impls {
				assert.False(t, math.IsNaN(tb.Median(row, im.Name)), "case %s, %q: no value for %s", name, row, im.Name)
			}
		}
	}
	for _, row := range []string{"pairs/s", "p50 (ms)"} {
		assert.Greater(t, got[CaseSerial].Median(row, ColFloor), 0.0, "serial floor %s", row)
	}
	assert.Greater(t, got[CaseParallel].Median("pairs/s", ColFloor), 0.0)
	assert.FileExists(t, filepath.Join(cfg.PprofDir, "gosanlock-serial.cpu.pprof"))

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, ts))
	assert.Contains(t, js.String(), `"case": "multihost"`)
}

func TestMedianAndRatios(t *testing.T) {
	tb := newTable("x", "test", []string{ColFloor, "sanlock-3.8.5", "gosanlock"})
	for run, v := range [][3]float64{{2, 8, 4}, {3, 6, 6}, {4, 10, 5}} {
		tb.set(run, "p50 (ms)", ColFloor, v[0])
		tb.set(run, "p50 (ms)", "sanlock-3.8.5", v[1])
		tb.set(run, "p50 (ms)", "gosanlock", v[2])
	}
	tb.set(0, "never", "gosanlock", math.Inf(1))
	assert.Equal(t, 3.0, tb.Median("p50 (ms)", ColFloor))
	assert.Equal(t, 5.0, tb.Median("p50 (ms)", "gosanlock"))
	// Ratios are per run, then the median: go/floor = 2, 2, 1.25.
	assert.Equal(t, 2.0, tb.ratioMedian("p50 (ms)", ratio{"gosanlock", ColFloor}))
	var b bytes.Buffer
	tb.Print(&b)
	assert.Contains(t, b.String(), "go/sanlock")
	assert.Contains(t, b.String(), "inf")
	assert.Equal(t, math.Inf(1), maxMin([]int{3, 0}))
	assert.Equal(t, 2.0, maxMin([]int{3, 6}))
}
