package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTimelineSVG(t *testing.T) {
	tl := newTimeline()
	at := tl.start
	for i, e := range []event{
		{Guest: "A", What: "holder acquired"},
		{Guest: "A", What: "fault: hung"},
		{Guest: "A", What: `qmp WATCHDOG {"action": "reset"}`},
		{Guest: "A", What: `qmp RESET {"guest": true}`},
		{Guest: "A", What: `qmp RESET {"guest": true}`},
		{Guest: "B", What: "holder acquired <lver 2>"},
	} {
		e.At = at.Add(time.Duration(i*15) * time.Second)
		if i == 4 { // the second reset device, in the same second
			e.At = tl.events[3].At.Add(100 * time.Millisecond)
		}
		tl.events = append(tl.events, e)
	}
	path := filepath.Join(t.TempDir(), "t.svg")
	if err := tl.writeSVG(path, "reset & takeover"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if strings.Count(svg, "<circle") != 5 {
		t.Errorf("want 5 events drawn (one RESET of two), got %d", strings.Count(svg, "<circle"))
	}
	if !strings.Contains(svg, "reset &amp; takeover") || !strings.Contains(svg, "&lt;lver 2&gt;") {
		t.Error("text not escaped")
	}
}

func TestListedAndSelected(t *testing.T) {
	if !listed("ours", "") || !listed("ours+5.1.1", "ours,ours+5.1.1") || listed("ours+5.1.1", "ours") {
		t.Error("listed: labels must match whole")
	}
	if !selected("reset-hung-holder", "reset") || selected("lvmlockd", "reset,grace") {
		t.Error("selected: names match by substring")
	}
	if !selected("lvmlockd", "=lvmlockd") || selected("lvmlockd-reexec", "=lvmlockd,=reset") {
		t.Error("selected: =NAME matches that name only")
	}
}

func TestGuestNames(t *testing.T) {
	if guestName(0) != "A" || guestName(1) != "B" || guestName(2) != "C" {
		t.Errorf("guest names %s %s %s", guestName(0), guestName(1), guestName(2))
	}
}
