package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// TestClientAcquireWait: `client acquire ... --wait D` (our extension)
// retries while another process holds the lease and succeeds once it is
// released; without --wait the output and result are those of the real
// 3.8.5 tool. Runs against a real 3.8.5 daemon.
func TestClientAcquireWait(t *testing.T) {
	needC(t)
	runDir := startDaemon(t)
	t.Setenv("SANLOCK_RUN_DIR", runDir)
	f := filepath.Join(leaseDir(t), "leases")
	if err := os.WriteFile(f, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{
		{"direct", "init", "-o", "1", "-s", "LS:0:" + f + ":0"},
		{"direct", "init", "-r", "LS:R1:" + f + ":1M"},
		{"client", "add_lockspace", "-o", "1", "-s", "LS:1:" + f + ":0"},
	} {
		if out, rc := runMain(t, a...); rc != 0 {
			t.Fatalf("%v: rc %d: %s", a, rc, out)
		}
	}
	res := "LS:R1:" + f + ":1M"

	// Another process holds R1.
	holder := exec.Command(os.Args[0], "client", "command", "-r", res, "-c", "/bin/sleep", "120")
	holder.Env = append(os.Environ(), asSanlockEV+"=1")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = holder.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = holder.Process.Kill()
			<-exited
		}
	})
	// Wait until the holder's acquire has completed: a resource still
	// being acquired is listed too (list=add), and an acquire by another
	// client meanwhile gets -16 (busy), not -17 (held).
	for i := 0; ; i++ {
		out, _ := runMain(t, "client", "status", "-D")
		if strings.Contains(out, "r LS:R1") && strings.Contains(out, "list=held") {
			break
		}
		if i > 200 {
			t.Fatalf("holder did not acquire: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// This process registers; the tool acquires for it (-p).
	c, err := client.Dial(runDir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	pid := fmt.Sprint(os.Getpid())
	// REGISTER has no reply: wait until the daemon lists us, so that the
	// first acquire for our pid does not race the registration (3.8.5
	// answered that race with -16 once under make test's load).
	for i := 0; ; i++ {
		recs, err := c.Status(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, r := range recs {
			listed = listed || (r.Type == client.StateClient && r.Data32 == uint32(os.Getpid()))
		}
		if listed {
			break
		}
		if i > 200 {
			t.Fatal("our registration is not listed")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Without --wait: one attempt, exactly as 3.8.5.
	same(t, "client", "acquire", "-r", res, "-p", pid)

	// --wait that runs out: the last attempt's result, 3.8.5's lines.
	out, rc := runMain(t, "client", "acquire", "-r", res, "-p", pid, "--wait", "500ms")
	if want := "acquire pid " + pid + "\nacquire done -17\n"; out != want || rc == 0 {
		t.Errorf("--wait 500ms while held: %q rc %d, want %q", out, rc, want)
	}

	// --wait that outlives the holder.
	type result struct {
		out string
		rc  int
	}
	got := make(chan result, 1)
	go func() {
		o, r := runMain(t, "client", "acquire", "-r", res, "-p", pid, "--wait", "60s")
		got <- result{o, r}
	}()
	time.Sleep(300 * time.Millisecond)
	_ = holder.Process.Kill()
	r := <-got
	if want := "acquire pid " + pid + "\nacquire done 0\n"; r.out != want || r.rc != 0 {
		t.Errorf("--wait 60s: %q rc %d, want %q", r.out, r.rc, want)
	}
	if inq, err := reg.Inquire(context.Background()); err != nil || inq.Count != 1 || !strings.Contains(inq.State, "LS:R1") {
		t.Errorf("after --wait acquire: inquire %q %d %v", inq.State, inq.Count, err)
	}
}

// TestAcquireWaitOption: parsing of --wait.
func TestAcquireWaitOption(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  string
	}{
		{[]string{"-r", "LS:R:/p:0", "--wait", "30s"}, 30 * time.Second, ""},
		{[]string{"--wait", "5", "-r", "LS:R:/p:0"}, 5 * time.Second, ""},
		{[]string{"-r", "LS:R:/p:0", "--wait"}, 0, "option '--wait' requires arg"},
		{[]string{"--wait", "soon"}, 0, "invalid --wait duration"},
		{[]string{"--wait", "-1s"}, 0, "invalid --wait duration"},
	} {
		o := defaultOptions()
		err := scanOptions(o, "client", "acquire", tc.args, &strings.Builder{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || o.acquireWait != tc.want {
			t.Errorf("%v: %v %v, want %v", tc.args, o.acquireWait, err, tc.want)
		}
	}
	// Other actions keep sanlock's answer to a long option.
	err := scanOptions(defaultOptions(), "client", "release", []string{"--wait", "1s"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "unknown option --wait") {
		t.Errorf("client release --wait: %v", err)
	}
}
