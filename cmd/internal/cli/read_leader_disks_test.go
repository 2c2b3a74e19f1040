package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// TestReadLeaderDisksVsC: "direct read_leader -r" of a resource on several
// disks prints the leader a majority of the disks agree on, as sanlock
// 3.8.5 does, or fails with its result (SANLK_LEADER_READ, _DIFF, or an
// open error when too few disks open) and all-zero fields. Each case
// changes some disks of a lease that sanlock initialised, then both tools
// read it.
func TestReadLeaderDisksVsC(t *testing.T) {
	needC(t)
	// set changes disk i's leader (its offset 0) with a write_leader -F
	// file, or zeroes (""), or removes it ("rm").
	for _, c := range []struct {
		name  string
		disks int
		set   map[int]string
		zeros bool // on failure the C tool prints uninitialised memory: compare the done line only
	}{
		{name: "3 same", disks: 3},
		{name: "3, one lver differs", disks: 3, set: map[int]string{0: "lver 7\n"}},
		{name: "3, first zeroed", disks: 3, set: map[int]string{0: ""}},
		{name: "3, first of another resource", disks: 3, set: map[int]string{0: "resource_name Q\n"}},
		{name: "3, all differ", disks: 3, set: map[int]string{0: "lver 7\n", 1: "lver 8\n"}},
		{name: "3, two zeroed", disks: 3, set: map[int]string{0: "", 2: ""}},
		{name: "3, one missing", disks: 3, set: map[int]string{1: "rm"}},
		{name: "3, two missing", disks: 3, set: map[int]string{1: "rm", 2: "rm"}, zeros: true},
		{name: "2, differ", disks: 2, set: map[int]string{1: "lver 7\n"}},
		{name: "2, one zeroed", disks: 2, set: map[int]string{1: ""}},
		{name: "4, two against two", disks: 4, set: map[int]string{0: "lver 7\n", 1: "lver 7\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := leaseDir(t)
			res := "LS:R"
			paths := make([]string, c.disks)
			for i := range paths {
				paths[i] = filepath.Join(dir, fmt.Sprintf("d%d", i))
				require.NoError(t, os.WriteFile(paths[i], nil, 0o644))
				require.NoError(t, os.Truncate(paths[i], 2<<20))
				res += ":" + paths[i] + ":0"
			}
			out, rc := runC(t, "direct", "init", "-r", res)
			require.Equal(t, 0, rc, out)
			for i, v := range c.set {
				switch v {
				case "rm":
					require.NoError(t, os.Remove(paths[i]))
				case "":
					dev, err := diskfmt.OpenFile(paths[i])
					require.NoError(t, err)
					require.NoError(t, dev.WriteAt(context.Background(), make([]byte, 4096), 0))
					dev.Close()
				default:
					file := filepath.Join(dir, "F")
					require.NoError(t, os.WriteFile(file, []byte(v), 0o644))
					out, rc := runC(t, "direct", "write_leader", "-r", "LS:R:"+paths[i]+":0", "-F", file)
					require.Equal(t, 0, rc, out)
				}
			}
			want, wantRC := runC(t, "direct", "read_leader", "-r", res)
			got, gotRC := runMain(t, "direct", "read_leader", "-r", res)
			assert.Equal(t, wantRC, gotRC)
			if c.zeros {
				want, _, _ = strings.Cut(want, "\n")
				got, _, _ = strings.Cut(got, "\n")
			}
			assert.Equal(t, want, got)
		})
	}
}
