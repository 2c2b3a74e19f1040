package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/sanlog"
)

// TestLogFormatJSON: with log_format = json the log file and -D's stderr
// get one JSON object per line at the same priorities as the text lines;
// log_dump's ring keeps sanlock's text lines.
func TestLogFormatJSON(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.LogFile = filepath.Join(t.TempDir(), "sanlock.log")
	cfg.SyslogPriority = -1
	cfg.Debug = true
	cfg.LogfileUseUTC = true
	cfg.ApplyConfigKey("log_format", "json")
	var stderr bytes.Buffer
	ls := newLogSinks(cfg, &stderr, nil)
	ls.lg.Error("acquire error -243", sanlog.Prefix("s1:r2 "), sanlog.TID(4242))
	ls.lg.Warn("sanlock daemon started")
	ls.lg.Debug("debug only to stderr and ring")
	ls.Close()

	b, err := os.ReadFile(cfg.LogFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2, "logfile_priority 4: error and warning")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m), lines[0])
	require.Equal(t, "error", m["level"])
	require.Equal(t, "acquire error -243", m["msg"])
	require.Equal(t, "s1:r2 ", m["log-prefix"])
	require.EqualValues(t, 4242, m["tid"])
	require.EqualValues(t, os.Getpid(), m["pid"])
	require.Contains(t, m, "mono")
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, m["ts"])
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &m))
	require.Equal(t, "warn", m["level"])

	se := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, se, 3, "-D: everything")
	for _, l := range se {
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
	}

	ring := string(ls.Ring.Dump())
	require.Regexp(t, `(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+ \[4242\]: s1:r2 acquire error -243$`, ring)
}
