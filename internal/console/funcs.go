package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	"bytes": humanBytes,
	"rate":  func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"chart": chart,
	"ids": func(ids []int32) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(int(id))
		}
		return strings.Join(s, ",")
	},
	"ms":    func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") },
	"add":   func(a, b int) int { return a + b },
	"withq": withParam,
	"list":  func(s ...string) []string { return s },
	"pages": func(p any) pager {
		switch p := p.(type) {
		case Page[TopicRow]:
			return pager{p.Page, p.Size, p.Total}
		case Page[GroupRow]:
			return pager{p.Page, p.Size, p.Total}
		case Page[PartitionRow]:
			return pager{p.Page, p.Size, p.Total}
		}
		return pager{}
	},
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"isnil":       func(s *string) bool { return s == nil },
	"isResetPlan": func(v any) bool { _, ok := v.([]ResetRow); return ok },
	"isHeaders":   func(v any) bool { _, ok := v.([]Header); return ok },
	"pathescape":  url.PathEscape,
}

// pager is what the pager template needs.
type pager struct{ Page, Size, Total int }

func (p pager) Prev() int     { return p.Page - 1 }
func (p pager) Next() int     { return p.Page + 1 }
func (p pager) HasNext() bool { return (p.Page+1)*p.Size < p.Total }
func (p pager) First() int    { return min(p.Page*p.Size+1, p.Total) }
func (p pager) Last() int     { return min((p.Page+1)*p.Size, p.Total) }

// withParam returns path?q with k set to v.
func withParam(path string, q url.Values, k string, v any) string {
	n := url.Values{}
	for key, vs := range q {
		if key != "msg" {
			n[key] = vs
		}
	}
	n.Set(k, fmt.Sprint(v))
	return path + "?" + n.Encode()
}

func humanBytes(n int64) string {
	if n < 0 {
		return "?"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// chart draws the A (and with two, B) series of pts as an inline SVG of
// polylines scaled to their maximum, labelled with it.
func chart(pts []point, label string, two bool) template.HTML {
	const w, h = 360.0, 80.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h+14, template.HTMLEscapeString(label))
	if len(pts) < 2 {
		fmt.Fprintf(&b, `<text x="4" y="40" class="muted">collecting samples (every 10 s)…</text></svg>`)
		return template.HTML(b.String())
	}
	var top float64
	for _, p := range pts {
		top = max(top, p.A)
		if two {
			top = max(top, p.B)
		}
	}
	if top == 0 {
		top = 1
	}
	span := pts[len(pts)-1].T.Sub(pts[0].T).Seconds()
	line := func(f func(point) float64, class string) {
		fmt.Fprintf(&b, `<polyline class="%s" fill="none" points="`, class)
		for _, p := range pts {
			x := 0.0
			if span > 0 {
				x = p.T.Sub(pts[0].T).Seconds() / span * w
			}
			fmt.Fprintf(&b, "%.1f,%.1f ", x, h-f(p)/top*(h-4))
		}
		b.WriteString(`"/>`)
	}
	line(func(p point) float64 { return p.A }, "a")
	if two {
		line(func(p point) float64 { return p.B }, "b")
	}
	fmt.Fprintf(&b, `<text x="2" y="10" class="muted">max %s</text><text x="2" y="%g" class="muted">last %s</text></svg>`,
		strconv.FormatFloat(top, 'f', 0, 64), h+12, time.Duration(span*float64(time.Second)).Round(time.Second))
	return template.HTML(b.String())
}
