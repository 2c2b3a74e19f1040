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

	"github.com/gosanlock/gosanlock/diskio"
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
			res, paths := diskSetup(t, leaseDir(t), c.disks, nil)
			changeDisks(t, paths, c.set)
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

// diskSetup makes a resource LS:R on n files in dir, initialised by the
// real sanlock, and runs the real sanlock's commands of prep (PATHS is the
// resource string). It returns the resource string and the paths.
func diskSetup(t *testing.T, dir string, n int, prep [][]string) (string, []string) {
	t.Helper()
	res := "LS:R"
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("d%d", i))
		require.NoError(t, os.WriteFile(paths[i], nil, 0o644))
		require.NoError(t, os.Truncate(paths[i], 2<<20))
		res += ":" + paths[i] + ":0"
	}
	out, rc := runC(t, "direct", "init", "-r", res)
	require.Equal(t, 0, rc, out)
	for _, args := range prep {
		args = substAll(args, "PATHS", res)
		out, rc := runC(t, args...)
		require.Equal(t, 0, rc, "%q: %s", args, out)
	}
	return res, paths
}

// changeDisks changes the leader of disk i as set[i] says: the fields of a
// write_leader -F file, "" for zeros, "rm" to remove the file.
func changeDisks(t *testing.T, paths []string, set map[int]string) {
	t.Helper()
	for i, v := range set {
		switch v {
		case "rm":
			require.NoError(t, os.Remove(paths[i]))
		case "":
			dev, err := diskio.OpenFile(paths[i])
			require.NoError(t, err)
			require.NoError(t, dev.WriteAt(context.Background(), make([]byte, 4096), 0))
			dev.Close()
		default:
			file := paths[i] + ".F"
			require.NoError(t, os.WriteFile(file, []byte(v), 0o644))
			out, rc := runC(t, "direct", "write_leader", "-r", "LS:R:"+paths[i]+":0", "-F", file)
			require.Equal(t, 0, rc, out)
		}
	}
}

// TestReleaseDisksVsC: "direct release" of a resource on several disks
// takes the leader a majority agrees on and writes the released leader to
// every disk that opens, as sanlock 3.8.5 does. Each tool runs on its own
// copy; then every disk's leader is compared (times and checksums masked).
func TestReleaseDisksVsC(t *testing.T) {
	needC(t)
	// A leader held by host_id 0 (written by host_id 0), so release
	// writes it.
	held := "owner_id 0\nwrite_id 0\nowner_generation 0\nwrite_generation 0\n"
	prep := [][]string{{"direct", "acquire", "-r", "PATHS", "-i", "1", "-g", "1"}}
	for _, c := range []struct {
		name string
		set  map[int]string
	}{
		{"held", nil},
		{"first zeroed", map[int]string{0: ""}},
		{"first and second zeroed", map[int]string{0: "", 1: ""}},
		{"all differ", map[int]string{0: "lver 7\n", 1: "lver 8\n"}},
		{"first missing", map[int]string{0: "rm"}},
		{"last missing", map[int]string{2: "rm"}},
		{"two missing", map[int]string{0: "rm", 1: "rm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(tool func(*testing.T, ...string) (string, int)) (string, int, []string) {
				res, paths := diskSetup(t, leaseDir(t), 3, prep)
				changeDisks(t, paths, map[int]string{0: held, 1: held, 2: held})
				changeDisks(t, paths, c.set)
				out, rc := tool(t, "direct", "release", "-r", res)
				var leaders []string
				for _, p := range paths {
					if _, err := os.Stat(p); err != nil {
						leaders = append(leaders, "missing")
						continue
					}
					l, _ := runC(t, "direct", "read_leader", "-r", "LS:R:"+p+":0")
					leaders = append(leaders, maskLeaderTimes(l))
				}
				return out, rc, leaders
			}
			wantOut, wantRC, wantLeaders := run(runC)
			gotOut, gotRC, gotLeaders := run(runMain)
			assert.Equal(t, wantOut, gotOut)
			assert.Equal(t, wantRC, gotRC)
			assert.Equal(t, wantLeaders, gotLeaders)
		})
	}
}

// maskLeaderTimes hides the read_leader lines that hold a time (and the
// checksum that covers it).
func maskLeaderTimes(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, k := range []string{"timestamp ", "write_timestamp ", "checksum "} {
			if strings.HasPrefix(l, k) {
				lines[i] = k + "X"
			}
		}
	}
	return strings.Join(lines, "\n")
}
