package manager

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// generationFile is the file that keeps lockspace space's generation for
// hostID in dir: delta_lease_SPACE_HOSTID, the name 5.1.1 uses in
// /var/lib/sanlock.
func generationFile(dir, space string, hostID uint64) string {
	return filepath.Join(dir, fmt.Sprintf("delta_lease_%s_%d", space, hostID))
}

// saveGeneration runs after a join that took generation gen: as 5.1.1
// does, when Settings.GenerationDir exists, it compares the generation
// saved by the last join on this host (gen-1 is expected: the join takes
// the next one) and only logs a difference, then saves gen as decimal
// text and a newline. The file is a record for people and tools; nothing
// depends on it, so every failure is only logged.
func (sp *space) saveGeneration(gen uint64) {
	dir := sp.m.conf().GenerationDir
	if dir == "" {
		return
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return
	}
	path := generationFile(dir, sp.ls.Name, sp.ls.HostID)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		sp.log().Info("generation file read error", zap.String("path", path), zap.Error(err))
	default:
		prev, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if perr != nil || prev+1 != gen {
			sp.log().Warn("generation file differs from the lease", zap.String("path", path),
				zap.String("saved", strings.TrimSpace(string(b))), zap.Uint64("previous_generation", gen-1))
		}
	}
	if err := os.WriteFile(path, []byte(strconv.FormatUint(gen, 10)+"\n"), 0o644); err != nil {
		sp.log().Info("generation file write error", zap.String("path", path), zap.Error(err))
	}
}
