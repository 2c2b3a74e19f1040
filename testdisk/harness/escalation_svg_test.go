package harness_test

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// escalationSVG draws the measured timelines of one TestEscalation run:
// one row per scenario, seconds relative to the victim's last renewal L,
// with the spec's times (io_timeout 1, grace escGrace, fire escFire) as
// dashed lines. Written when GOSANLOCK_ESCALATION_SVG names a file.
func escalationSVG(runs []*escRun) []byte {
	const (
		width  = 1300
		left   = 200
		right  = 1270
		top    = 100
		rowH   = 124
		tMin   = -2.0
		tMax   = 42.0
		labelW = 5.6 // px per character at font-size 10
	)
	x := func(t float64) float64 { return left + (t-tMin)/(tMax-tMin)*(right-left) }
	height := top + rowH*len(runs) + 150
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="22" font-size="15">Recovery escalation measured on real processes (TestEscalation): io_timeout 1, -g %d, device fire %d s, host_dead_seconds %d</text>`+"\n", escGrace, escFire, escHostDead)
	fmt.Fprintf(&b, `<text x="20" y="40" font-size="11">seconds relative to the victim's last successful renewal L; dashed: spec times (fail 8·io, grace end 8·io+g, host_dead 8·io+fire). Markers are the measured events.</text>`+"\n")

	// Spec lines.
	bottom := top + rowH*len(runs)
	for k, s := range []struct {
		t    float64
		name string
	}{
		{escFailSecs, fmt.Sprintf("L+%d fail: kill program / SIGTERM", escFailSecs)},
		{escFailSecs + escGrace, fmt.Sprintf("L+%d grace end: SIGKILL", escFailSecs+escGrace)},
		{escHostDead, fmt.Sprintf("L+%d host_dead_seconds", escHostDead)},
	} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888" stroke-dasharray="4,3"/>`+"\n", x(s.t), top-20-14*(k%2), x(s.t), bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="#555" text-anchor="middle">%s</text>`+"\n", x(s.t), top-24-14*(k%2), html.EscapeString(s.name))
	}
	// Axis.
	ay := bottom + 10
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, ay, right, ay)
	for t := -2; t <= 42; t += 2 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x(float64(t)), ay-3, x(float64(t)), ay+3)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10">%+d</text>`+"\n", x(float64(t)), ay+16, t)
	}

	type mark struct {
		shape, color string
		label        string // "" = no label
	}
	markOf := func(e escEvent) (mark, bool) {
		switch {
		case e.Lane == "sanlock" && e.What == "last renewal L":
			return mark{"tick", "black", "L"}, true
		case e.Lane == "sanlock" && strings.HasPrefix(e.What, "storage cut"):
			return mark{"tick", "#555", "cut"}, true
		case e.Lane == "sanlock" && e.What == "check_our_lease failed":
			return mark{"diamond", "black", "check failed"}, true
		case e.Lane == "sanlock" && e.What == "kill program run":
			return mark{"triangle", "#1f6fd0", "kill program"}, true
		case e.Lane == "sanlock" && e.What == "SIGTERM":
			return mark{"bar", "#e08a00", ""}, true
		case e.Lane == "sanlock" && e.What == "SIGKILL":
			return mark{"cross", "#c00", "SIGKILL"}, true
		case e.Lane == "sanlock" && e.What == "wdmd TEST_LIVE 0 0":
			return mark{"hsquare", "#2a2", "TEST_LIVE 0 0"}, true
		case e.Lane == "holder" && strings.HasPrefix(e.What, "exited"), e.Lane == "holder" && strings.HasPrefix(e.What, "gone"):
			return mark{"circle", "#2a2", "holder gone"}, true
		case e.Lane == "device" && strings.HasPrefix(e.What, "unclean close"):
			return mark{"square", "#777", "device closed (last ping)"}, true
		case e.Lane == "device" && strings.HasPrefix(e.What, "reopen"):
			return mark{"square", "#2a2", "reopen+ping"}, true
		case e.Lane == "device" && strings.HasPrefix(e.What, "FIRE"):
			return mark{"star", "#c00", "FIRE (reset)"}, true
		case e.Lane == "other host":
			return mark{"flag", "#7030a0", "other host acquires"}, true
		}
		return mark{}, false
	}

	sorted := append([]*escRun(nil), runs...)
	order := map[string]int{}
	for i, sc := range escScenarios {
		order[sc.name] = i
	}
	sort.Slice(sorted, func(i, j int) bool { return order[sorted[i].sc.name] < order[sorted[j].sc.name] })
	for i, r := range sorted {
		y := float64(top + rowH*i + rowH/2)
		fmt.Fprintf(&b, `<text x="10" y="%.0f" font-size="12">%s</text>`+"\n", y-4, html.EscapeString(r.sc.name))
		fmt.Fprintf(&b, `<text x="10" y="%.0f" font-size="10" fill="#555">holder: %s, storage %s</text>`+"\n", y+10, html.EscapeString(r.sc.mode), faultName(r.sc.fault))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>`+"\n", left, y, right, y)
		// Labels go on levels above and below the row line, left to
		// right, on the first level where they do not overlap.
		levels := []float64{-14, 24, -27, 37, -40, 50}
		ends := make([]float64, len(levels))
		for k := range ends {
			ends[k] = -1e9
		}
		if _, fired := r.first("device", "FIRE"); !fired {
			if c, ok := r.first("device", "unclean close"); ok {
				// Where the device would have fired had wdmd not reopened it.
				px := x(c.At + escFire)
				fmt.Fprintf(&b, `<polygon points="%s" fill="none" stroke="#c00" stroke-dasharray="2,2"/>`+"\n", star(px, y, 9, 4))
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="#c00">no fire (would be %+.1f)</text>`+"\n", px, y-14, c.At+escFire)
			}
		}
		for _, e := range r.sorted() {
			m, ok := markOf(e)
			if !ok || e.At < tMin || e.At > tMax {
				continue
			}
			px := x(e.At)
			switch m.shape {
			case "tick":
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", px, y-6, px, y+6, m.color)
			case "diamond":
				fmt.Fprintf(&b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", px, y-6, px+5, y, px, y+6, px-5, y, m.color)
			case "triangle":
				fmt.Fprintf(&b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", px-5, y-6, px+5, y-6, px, y+3, m.color)
			case "bar":
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="3" height="10" fill="%s"/>`+"\n", px-1.5, y-5, m.color)
			case "cross":
				fmt.Fprintf(&b, `<path d="M%.1f,%.1f L%.1f,%.1f M%.1f,%.1f L%.1f,%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", px-5, y-5, px+5, y+5, px-5, y+5, px+5, y-5, m.color)
			case "square":
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>`+"\n", px-4, y-4, m.color)
			case "hsquare":
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="8" height="8" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", px-4, y-4, m.color)
			case "circle":
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="none" stroke="%s" stroke-width="2"/>`+"\n", px, y, m.color)
			case "star":
				fmt.Fprintf(&b, `<polygon points="%s" fill="%s"/>`+"\n", star(px, y, 9, 4), m.color)
			case "flag":
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="3" height="16" fill="%s"/>`+"\n", px-1.5, y-8, m.color)
			}
			if m.label == "" {
				continue
			}
			text := fmt.Sprintf("%s %+.1f", m.label, e.At)
			w := float64(len(text)) * labelW
			for k, dy := range levels {
				if px-w/2 > ends[k]+4 || k == len(levels)-1 {
					ends[k] = px + w/2
					fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", px, y+dy, m.color, html.EscapeString(text))
					break
				}
			}
		}
	}
	// Legend.
	ly := ay + 40
	for k, l := range []string{
		"orange bars: SIGTERM, one a second; purple bar: the other host's acquire returns; grey square: wdmd closes the device without the magic",
		"character = its last ping. With io_timeout 1 the expiry L+8 is always inside wdmd's 10-s warning margin, so that happens when the lockspace",
		fmt.Sprintf("is activated; the device fires %d s later unless wdmd reopens it first (green square, after the daemon's TEST_LIVE 0 0, hollow square).", escFire),
	} {
		fmt.Fprintf(&b, `<text x="20" y="%d" font-size="11">%s</text>`+"\n", ly+16*k, html.EscapeString(l))
	}
	ly += 16 * 3
	fmt.Fprintf(&b, `<text x="20" y="%d" font-size="11">Command: GOSANLOCK_ESCALATION_SVG=$PWD/docs/escalation-timeline.svg go test -count=1 -run TestEscalation ./testdisk/harness</text>`+"\n", ly+18)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// star is the points attribute of a star centred at (x, y).
func star(x, y, outer, inner float64) string {
	var p []string
	for i := range 10 {
		r := outer
		if i%2 == 1 {
			r = inner
		}
		a := float64(i)*36 - 90
		sx, sy := x+r*math.Cos(a*math.Pi/180), y+r*math.Sin(a*math.Pi/180)
		p = append(p, fmt.Sprintf("%.1f,%.1f", sx, sy))
	}
	return strings.Join(p, " ")
}
