package harness_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// Binaries built once by TestMain.
var (
	goSanlock string // our cmd/sanlock
	holderBin string // testdisk/harness/holder
	buildErr  error
)

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "harness-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		goSanlock, holderBin, buildErr = harness.Build(dir)
		return m.Run()
	}()
	os.Exit(code)
}

// needReal skips when the machine cannot run the harness (harness.NeedReal).
func needReal(t *testing.T) { harness.NeedReal(t, "the harness", buildErr) }

// newCluster makes a cluster closed at cleanup (harness.TestCluster).
func newCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	needReal(t)
	return harness.TestCluster(t, harness.Options{GoBinary: goSanlock})
}

// hostKinds is the kind of each host of the mixed cluster: $GOSANLOCK_HARNESS_KINDS
// (e.g. "c,c,c") or one C daemon and two of ours.
func hostKinds(t *testing.T) []harness.Kind {
	s := os.Getenv("GOSANLOCK_HARNESS_KINDS")
	if s == "" {
		s = "c,go,go"
	}
	ks, err := harness.ParseKinds(s)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// addHosts starts one host per kind (in parallel) and joins them to
// lockspace ls in file as host ids 1, 2, ... (in parallel), io_timeout 1.
func addHosts(t *testing.T, c *harness.Cluster, prefix string, kinds []harness.Kind, ls, file string) []*harness.Host {
	t.Helper()
	hosts := make([]*harness.Host, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.AddHost(k, fmt.Sprintf("%s%d%s", prefix, i+1, k))
			if err == nil {
				err = h.AddLockspace(ls, uint64(i+1), file, 1)
			}
			hosts[i], errs[i] = h, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return hosts
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// holderSummary returns the "done ..." line of a holder's output file.
func holderSummary(t *testing.T, out string) string {
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "done ") {
			return l
		}
	}
	return "(no summary) " + string(b)
}
