package sanlog

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestRing(t *testing.T) {
	r := NewRing(16)
	_, _ = r.Write([]byte("abc\n"))
	assert.Equal(t, "abc\n", string(r.Dump()))
	_, _ = r.Write([]byte("defgh\n"))
	_, _ = r.Write([]byte("ijklm\n")) // 16 bytes: exactly full
	assert.Equal(t, "abc\ndefgh\nijklm\n", string(r.Dump()))
	_, _ = r.Write([]byte("no\n")) // wraps: partial first line dropped
	assert.Equal(t, "defgh\nijklm\nno\n", string(r.Dump()))
	_, _ = r.Write([]byte(strings.Repeat("x", 40) + "\nend\n"))
	assert.Equal(t, "end\n", string(r.Dump()))
}

func TestLineFormatAndLevels(t *testing.T) {
	var out strings.Builder
	f := &lineFormat{pid: 42, now: time.Now, mon: func() uint64 { return 437 }}
	core := &lineCore{LevelEnabler: PriorityEnabler(4), out: &writerSink{fmt: f, w: &out}}
	lg := zap.New(core)
	ts := time.Date(2026, 11, 22, 8, 33, 40, 0, time.Local)
	ce := lg.Check(zapcore.WarnLevel, "sanlock daemon started 3.8.5 host h (vm)")
	ce.Time = ts
	ce.Write()
	lg.Info("not at priority 4")
	lg.With(Prefix("s1 "), TID(9457)).Error("renewal error", zap.Int("rv", -202))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "2026-11-22 08:33:40 437 [42]: sanlock daemon started 3.8.5 host h (vm)", lines[0])
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d 437 \[9457\]: s1 renewal error rv=-202$`, lines[1])

	assert.Equal(t, 7, Priority(zapcore.DebugLevel))
	assert.Equal(t, 6, Priority(zapcore.InfoLevel))
	assert.Equal(t, 4, Priority(zapcore.WarnLevel))
	assert.Equal(t, 3, Priority(zapcore.ErrorLevel))
	assert.False(t, PriorityEnabler(-1).Enabled(zapcore.ErrorLevel))
}

// TestRingModel checks Ring against a dumb model: the last size bytes of
// everything written, minus a partial first line.
func TestRingModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 7, 16, 100} {
		r := NewRing(size)
		var all []byte
		for i := range 300 {
			n := rng.IntN(size * 2)
			p := make([]byte, n)
			for j := range p {
				p[j] = "ab\n"[rng.IntN(3)]
			}
			_, _ = r.Write(p)
			all = append(all, p...)
			want := all
			if len(all) > size {
				want = all[len(all)-size:]
				if all[len(all)-size-1] != '\n' {
					if k := bytes.IndexByte(want, '\n'); k >= 0 {
						want = want[k+1:]
					}
				}
			}
			require.Equal(t, string(want), string(r.Dump()), "size %d step %d", size, i)
		}
	}
}
