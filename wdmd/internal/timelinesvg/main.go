// Command timelinesvg draws a wdmd failure timeline as an SVG picture.
// Its input is the text that the wdmd timeline tests write when
// WDMD_TIMELINE_DIR is set (lines "io N", "last_renewal T", "expire T",
// "host_dead T", "renewal T", "device T KIND", "wdmd T warning|failed").
// docs/wdmd.md's picture was made with:
//
//	WDMD_TIMELINE_DIR=/tmp/tl go test -count=1 -run 'TestTimelineIO10$' ./wdmd
//	go run ./wdmd/internal/timelinesvg < /tmp/tl/timeline-io10-early.txt > docs/wdmd-timeline-io10.svg
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type timeline struct {
	io, last, expire, hostDead uint64
	renewals                   []uint64
	pings, closes, fires       []uint64
	warnings, failures         []uint64
}

func read(r io.Reader) (*timeline, error) {
	tl := &timeline{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
		}
		switch f[0] {
		case "io":
			tl.io = v
		case "last_renewal":
			tl.last = v
		case "expire":
			tl.expire = v
		case "host_dead":
			tl.hostDead = v
		case "renewal":
			tl.renewals = append(tl.renewals, v)
		case "device":
			switch f[2] {
			case "open", "ping", "set":
				tl.pings = append(tl.pings, v)
			case "close-unclean":
				tl.closes = append(tl.closes, v)
			case "fire":
				tl.fires = append(tl.fires, v)
			}
		case "wdmd":
			if f[2] == "warning" {
				tl.warnings = append(tl.warnings, v)
			} else {
				tl.failures = append(tl.failures, v)
			}
		}
	}
	return tl, sc.Err()
}

func main() {
	tl, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	draw(os.Stdout, tl)
}

func draw(w io.Writer, tl *timeline) {
	L := tl.last
	from := L - 30
	to := tl.hostDead + 10
	const left, right, width = 150.0, 20.0, 1100.0
	scale := (width - left - right) / float64(to-from)
	x := func(t uint64) float64 { return left + float64(int64(t)-int64(from))*scale }
	rows := map[string]float64{"sanlock": 70, "wdmd": 120, "device": 170}
	height := 300.0
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>`)
	p(`<text x="%.0f" y="22" font-size="15">wdmd failure timeline, io_timeout %d (from a synctest run of the real test loop; seconds relative to the last renewal L)</text>`, left-130, tl.io)
	for name, y := range rows {
		p(`<text x="10" y="%.0f">%s</text>`, y+4, name)
		p(`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ccc"/>`, left, y, width-right, y)
	}
	// axis
	p(`<line x1="%.0f" y1="215" x2="%.0f" y2="215" stroke="black"/>`, left, width-right)
	for t := from - from%10; t <= to; t += 10 {
		if t < from {
			continue
		}
		p(`<line x1="%.1f" y1="212" x2="%.1f" y2="218" stroke="black"/>`, x(t), x(t))
		p(`<text x="%.1f" y="232" text-anchor="middle" font-size="10">%+d</text>`, x(t), int64(t)-int64(L))
	}
	mark := func(t uint64, label, color string, y float64) {
		p(`<line x1="%.1f" y1="40" x2="%.1f" y2="245" stroke="%s" stroke-dasharray="4,3"/>`, x(t), x(t), color)
		p(`<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11" fill="%s">%s</text>`, x(t), y, color, label)
	}
	mark(L, "L", "#555", 260)
	mark(L+6*tl.io, "warn (sanlock)", "#b80", 272)
	mark(tl.expire, "expire L+8·io", "#c00", 260)
	mark(L+8*tl.io+40, "SIGKILL (grace 40)", "#800", 284)
	mark(tl.hostDead, "host_dead_seconds", "#00c", 272)
	for _, t := range tl.renewals {
		if t >= from {
			p(`<circle cx="%.1f" cy="%.0f" r="4" fill="#2a2"/>`, x(t), rows["sanlock"])
		}
	}
	for _, t := range tl.pings {
		if t >= from {
			p(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#2a2" stroke-width="2"/>`, x(t), rows["device"]-10, x(t), rows["device"]+10)
			p(`<circle cx="%.1f" cy="%.0f" r="3" fill="#2a2"/>`, x(t), rows["wdmd"])
		}
	}
	for _, t := range tl.warnings {
		p(`<circle cx="%.1f" cy="%.0f" r="3" fill="#e90"/>`, x(t), rows["wdmd"])
	}
	for _, t := range tl.failures {
		if t <= to {
			p(`<circle cx="%.1f" cy="%.0f" r="3" fill="#d00"/>`, x(t), rows["wdmd"])
		}
	}
	for _, t := range tl.closes {
		p(`<rect x="%.1f" y="%.0f" width="8" height="20" fill="#e90"/>`, x(t)-4, rows["device"]-10)
		p(`<text x="%.1f" y="%.0f" font-size="11">last ping: unclean close (L%+d)</text>`, x(t)+8, rows["device"]-14, int64(t)-int64(L))
	}
	for _, t := range tl.fires {
		p(`<text x="%.1f" y="%.0f" text-anchor="middle" font-size="20" fill="#d00">✕</text>`, x(t), rows["device"]+7)
		p(`<text x="%.1f" y="%.0f" font-size="11" fill="#d00">fire (L%+d)</text>`, x(t)+10, rows["device"]+22, int64(t)-int64(L))
	}
	p(`<text x="%.0f" y="296" font-size="11">green: renewal / passing test and ping · orange: test warning · red: test failed</text>`, left)
	p(`</svg>`)
}
