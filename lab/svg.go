package main

import (
	"fmt"
	"html"
	"os"
	"strings"
)

// writeSVG draws the timeline as an SVG: one lane per guest, each event a
// tick on the host's clock with its text beside it. Repeated QMP RESET
// events (one per reset device) and the boot-time events are left out.
func (t *timeline) writeSVG(path, title string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) == 0 {
		return nil
	}
	var evs []event
	seen := map[string]bool{}
	for _, e := range t.events {
		if strings.HasPrefix(e.What, "qmp RESET") || strings.HasPrefix(e.What, "qmp SHUTDOWN") {
			key := e.Guest + e.What[:9] + fmt.Sprint(int(e.At.Sub(t.start).Seconds()))
			if seen[key] || strings.HasPrefix(e.What, "qmp SHUTDOWN") {
				continue
			}
			seen[key] = true
		}
		evs = append(evs, e)
	}
	end := evs[len(evs)-1].At.Sub(t.start).Seconds()
	const left, width, rowH, top = 60.0, 900.0, 18.0, 40.0
	x := func(s float64) float64 { return left + s/end*width }
	lanes := map[string]float64{"A": 0, "B": 1, "C": 2}
	height := top + float64(len(evs))*rowH + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n",
		left+width+320, height)
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13">%s</text>`+"\n", left, html.EscapeString(title))
	for s := 0.0; s <= end; s += 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x(s), top-10, x(s), height-30)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#666">%.0f s</text>`+"\n", x(s), height-16, s)
	}
	for i, e := range evs {
		y := top + float64(i)*rowH
		s := e.At.Sub(t.start).Seconds()
		color := "#246"
		switch lanes[e.Guest] {
		case 1:
			color = "#a50"
		case 2:
			color = "#272"
		}
		if strings.Contains(e.What, "WATCHDOG") || strings.Contains(e.What, "RESET") {
			color = "#c00"
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, x(s), y, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s +%.1f s: %s</text>`+"\n", x(s)+7, y+4, color,
			e.Guest, s, html.EscapeString(shorten(e.What, 70)))
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// shorten cuts s to n characters.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
