package ledger

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/journal"
)

// reportPage is what the template draws. Coordinates are computed here, so
// the page needs no script to show anything.
type reportPage struct {
	Run       journal.Run
	Generated string
	D         *Account
	Graph     svgGraph
	Timeline  svgTimeline
}

type svgGraph struct {
	W, H  int
	Boxes []svgBox
	Edges []svgEdge
}

type svgBox struct {
	X, Y, W, H int
	ID, State  string
}

type svgEdge struct{ X1, Y1, X2, Y2 int }

type svgTimeline struct {
	W, H, Left int
	Span       string
	Ticks      []svgTick
	Rows       []svgRow
}

type svgTick struct {
	X     int
	Label string
}

type svgRow struct {
	Node     string
	Y        int
	Attempts []svgAttempt
	Marks    []svgMark
}

type svgAttempt struct {
	N                int
	X, W             int
	Mode, Outcome    string
	Title            string
	LabelX, LabelY   int
	ShowLabel        bool
	ErrClass, Ref    string
	StartISO, EndISO string
}

type svgMark struct {
	X          int
	Code, Kind string
	Title      string
}

// markKind groups the records drawn on the timeline, by what their codes
// declare: faults, each means of recovery, and failures.
func markKind(c diagnostics.Code) string {
	switch {
	case c.Role == diagnostics.RoleFault:
		return "disconnect"
	case c.Role == diagnostics.RoleOutcome && c != diagnostics.Recovered && c != diagnostics.NodeSkipped:
		return "failure"
	case c.Role != diagnostics.RoleStep:
		return ""
	}
	switch c.Means {
	case diagnostics.ByReattach:
		return "reattach"
	case diagnostics.ByCheck, diagnostics.ByStatus:
		return "poll"
	case diagnostics.ByReconnect:
		return "reconnect"
	case diagnostics.ByRetry:
		return "retry"
	case diagnostics.ByContinue:
		return "continue"
	}
	return ""
}

// WriteReport writes a run as one self-contained HTML page: the graph, a
// timeline of every attempt with its recovery steps marked, and acct (the
// diagnose table). It loads nothing from the network.
func WriteReport(w io.Writer, run *Run, acct *Account) error {
	page := &reportPage{Run: run.Run, Generated: time.Now().UTC().Format(time.RFC3339), D: acct}
	page.Graph = layoutGraph(run)
	page.Timeline = layoutTimeline(run)
	return renderReport(w, page)
}

// layoutGraph places the nodes in columns by depth (longest path from a
// node that needs nothing), edges from each need.
func layoutGraph(run *Run) svgGraph {
	needs := map[string][]string{}
	if run.Graph != nil {
		for _, n := range run.Graph.Nodes {
			needs[n.ID] = n.Needs
		}
	}
	nodes := run.Nodes
	depth := map[string]int{}
	var depthOf func(id string, seen map[string]bool) int
	depthOf = func(id string, seen map[string]bool) int {
		if d, ok := depth[id]; ok {
			return d
		}
		if seen[id] {
			return 0
		}
		seen[id] = true
		d := 0
		for _, n := range needs[id] {
			d = max(d, depthOf(n, seen)+1)
		}
		depth[id] = d
		return d
	}
	const bw, bh, gx, gy, pad = 140, 34, 60, 18, 10
	rows := map[int]int{}
	pos := map[string]svgBox{}
	var g svgGraph
	for _, n := range nodes {
		d := depthOf(n.ID, map[string]bool{})
		b := svgBox{X: pad + d*(bw+gx), Y: pad + rows[d]*(bh+gy), W: bw, H: bh, ID: n.ID, State: string(n.State)}
		rows[d]++
		pos[n.ID] = b
		g.Boxes = append(g.Boxes, b)
		g.W = max(g.W, b.X+bw+pad)
		g.H = max(g.H, b.Y+bh+pad)
	}
	for _, n := range nodes {
		to := pos[n.ID]
		for _, need := range needs[n.ID] {
			from, ok := pos[need]
			if !ok {
				continue
			}
			g.Edges = append(g.Edges, svgEdge{from.X + from.W, from.Y + from.H/2, to.X, to.Y + to.H/2})
		}
	}
	return g
}

// layoutTimeline draws one row per node: its attempts as bars, and the
// recovery diagnostics as marks on them.
func layoutTimeline(run *Run) svgTimeline {
	const left, width, rowH, top = 150, 900, 30, 24
	nodes := run.Nodes
	start, end := run.Started, run.Finished
	for _, nd := range nodes {
		for _, a := range nd.Attempts {
			end = later(end, a.Ended, a.Started)
		}
		for _, r := range nd.Records {
			end = later(end, r.Time)
		}
	}
	if !end.After(start) {
		end = start.Add(time.Second)
	}
	span := end.Sub(start)
	x := func(t time.Time) int {
		if t.IsZero() {
			t = end
		}
		return left + int(float64(width)*float64(t.Sub(start))/float64(span))
	}
	tl := svgTimeline{W: left + width + 20, Left: left, Span: span.Round(time.Millisecond).String()}
	for i := 0; i <= 5; i++ {
		t := start.Add(span * time.Duration(i) / 5)
		tl.Ticks = append(tl.Ticks, svgTick{X: x(t), Label: fmt.Sprintf("%.1fs", t.Sub(start).Seconds())})
	}
	row := map[string]*svgRow{}
	for i, n := range nodes {
		tl.Rows = append(tl.Rows, svgRow{Node: n.ID, Y: top + i*rowH})
	}
	for i := range tl.Rows {
		row[tl.Rows[i].Node] = &tl.Rows[i]
	}
	for _, nd := range nodes {
		rw := row[nd.ID]
		for _, a := range nd.Attempts {
			rw.Attempts = append(rw.Attempts, attemptBar(a, rw.Y, x))
		}
		for _, r := range nd.Records {
			kind := markKind(r.Code)
			if kind == "" {
				continue
			}
			title := fmt.Sprintf("%s at %.3fs: %s", r.Code, r.Time.Sub(start).Seconds(), r.Message)
			rw.Marks = append(rw.Marks, svgMark{X: x(r.Time), Code: r.Code.ID, Kind: kind, Title: oneLine(title, 300)})
		}
	}
	tl.H = top + len(nodes)*rowH + 10
	return tl
}

// attemptBar draws an attempt on its node's row.
func attemptBar(a Attempt, y int, x func(time.Time) int) svgAttempt {
	{
		x1, x2 := x(a.Started), x(a.Ended)
		title := fmt.Sprintf("%s attempt %d (%s via %s): %s, %s", a.NodeID, a.N, a.Mode, a.Provider, a.Outcome,
			a.Ended.Sub(a.Started).Round(time.Millisecond))
		if a.Ended.IsZero() {
			title = fmt.Sprintf("%s attempt %d (%s via %s): never ended", a.NodeID, a.N, a.Mode, a.Provider)
		}
		if a.Error != "" {
			title += " — " + oneLine(a.Error, 200)
		}
		return svgAttempt{N: a.N, X: x1, W: max(x2-x1, 2), Mode: string(a.Mode), Outcome: string(a.Outcome),
			Title: title, LabelX: x1 + 3, LabelY: y + 15, ShowLabel: x2-x1 > 24, ErrClass: a.ErrClass, Ref: a.Ref,
			StartISO: isoTime(a.Started), EndISO: isoTime(a.Ended)}
	}
}

// isoTime is t in RFC 3339 UTC, "" for zero.
func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// oneLine folds whitespace and cuts s to n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func renderReport(w io.Writer, page *reportPage) error {
	funcs := template.FuncMap{
		"thousands": Thousands, "seconds": Seconds,
		"steps": func(m map[string]int) string {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
			}
			return strings.Join(parts, ", ")
		},
		"usd": func(p *float64) string {
			if p == nil {
				return "–"
			}
			return fmt.Sprintf("$%.4f", *p)
		},
		"plus": func(a, b int) int { return a + b },
	}
	t, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, page)
}

// reportTemplate is the whole page: inline style, inline SVG, and a few lines
// of script that only add a legend count and record page errors in the DOM
// (for a headless browser test); no network, no server.
const reportTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>noderun run {{.Run.ID}} ({{.Run.Graph}})</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.meta { color: #5b6474; }
table { border-collapse: collapse; } th, td { padding: 4px 10px; border-bottom: 1px solid #e3e6ec; text-align: right; }
th:first-child, td:first-child, td.verdict, th.verdict { text-align: left; }
svg text { font: 12px system-ui, sans-serif; }
.box rect { stroke: #2b3445; rx: 6; } .box text { fill: #1d2330; }
.state-completed rect { fill: #d7f2dc; } .state-failed rect, .state-attention rect { fill: #f8d7d7; }
.state-running rect, .state-pending rect { fill: #eceff4; } .state-skipped rect, .state-canceled rect { fill: #f3ecd2; }
.edge { stroke: #8a93a5; stroke-width: 1.5; marker-end: url(#arrow); }
.attempt.ok { fill: #4caf6e; } .attempt.error { fill: #e06666; } .attempt.running { fill: #9aa3b5; }
.attempt-label { fill: #fff; font-size: 11px; pointer-events: none; }
.mark line { stroke-width: 2; } .mark.disconnect line { stroke: #b00020; } .mark.reattach line { stroke: #1f5fbf; }
.mark.poll line { stroke: #c49000; } .mark.reconnect line { stroke: #6a3fb5; } .mark.retry line { stroke: #e07a00; } .mark.continue line { stroke: #1b8a5a; }
.mark.failure line { stroke: #000; }
.grid { stroke: #e3e6ec; } .legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
</style>
</head>
<body>
<h1>Run {{.Run.ID}}</h1>
<div class="meta">graph <b>{{.Run.Graph}}</b> ({{.Run.GraphPath}}) · status <b id="run-status">{{.Run.Status}}</b> · profile {{.Run.Profile}} ·
started {{.Run.Started.UTC.Format "2006-01-02 15:04:05Z"}} · report generated {{.Generated}}</div>

<h2>Summary</h2>
<ul id="summary">{{range .D.Summary}}<li>{{.}}</li>{{end}}</ul>

<h2>Graph</h2>
<svg id="graph" width="{{.Graph.W}}" height="{{.Graph.H}}" role="img" aria-label="the goal graph">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#8a93a5"/></marker></defs>
{{range .Graph.Edges}}<line class="edge" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/>{{end}}
{{range .Graph.Boxes}}<g class="box state-{{.State}}" data-node="{{.ID}}"><title>{{.ID}}: {{.State}}</title><rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/><text x="{{plus .X 10}}" y="{{plus .Y 21}}">{{.ID}}</text></g>{{end}}
</svg>

<h2>Timeline</h2>
<div class="legend"><span><i style="background:#4caf6e"></i>attempt ok</span><span><i style="background:#e06666"></i>attempt failed</span>
<span><i style="background:#b00020"></i>disconnect</span><span><i style="background:#6a3fb5"></i>reconnect</span><span><i style="background:#1f5fbf"></i>re-attach</span>
<span><i style="background:#c49000"></i>poll / status</span><span><i style="background:#1b8a5a"></i>continue</span><span><i style="background:#e07a00"></i>retry</span><span><i style="background:#000"></i>failure</span>
<span id="attempt-count"></span></div>
<svg id="timeline" width="{{.Timeline.W}}" height="{{.Timeline.H}}" role="img" aria-label="every attempt of every node over time ({{.Timeline.Span}})">
{{range .Timeline.Ticks}}<line class="grid" x1="{{.X}}" y1="14" x2="{{.X}}" y2="{{$.Timeline.H}}"/><text x="{{.X}}" y="11" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .Timeline.Rows}}<g class="row" data-node="{{.Node}}">
<text x="6" y="{{plus .Y 15}}">{{.Node}}</text>
{{$row := .}}{{range .Attempts}}<rect class="attempt {{.Outcome}}" data-node="{{$row.Node}}" data-attempt="{{.N}}" data-mode="{{.Mode}}" data-outcome="{{.Outcome}}" data-class="{{.ErrClass}}" data-start="{{.StartISO}}" data-end="{{.EndISO}}" x="{{.X}}" y="{{plus $row.Y 2}}" width="{{.W}}" height="18"><title>{{.Title}}</title></rect>{{if .ShowLabel}}<text class="attempt-label" x="{{.LabelX}}" y="{{.LabelY}}">#{{.N}}</text>{{end}}
{{end}}{{range .Marks}}<g class="mark {{.Kind}}" data-node="{{$row.Node}}" data-code="{{.Code}}" data-kind="{{.Kind}}"><title>{{.Title}}</title><line x1="{{.X}}" y1="{{$row.Y}}" x2="{{.X}}" y2="{{plus $row.Y 22}}"/></g>
{{end}}</g>
{{end}}</svg>

<h2>What recovery did (noderun diagnose)</h2>
<table id="diagnose">
<thead><tr><th>node</th><th>state</th><th>attempts</th><th>time lost</th><th>generated</th><th>regenerated</th><th>preserved</th><th>cost</th><th class="verdict">verdict</th></tr></thead>
<tbody>{{range .D.Nodes}}<tr data-node="{{.ID}}"><td>{{.ID}}</td><td>{{.State}}</td><td>{{.Attempts}}</td><td>{{seconds .TimeLostMS}}</td>
<td>{{thousands .Tokens.Generated}}</td><td>{{thousands .Tokens.Regenerated}}</td><td>{{thousands .Tokens.Preserved}}</td><td>{{usd .CostUSD}}</td>
<td class="verdict">{{.Verdict}}{{with steps .RecoverySteps}}<br><small>{{.}}</small>{{end}}</td></tr>{{end}}</tbody>
</table>
<pre id="page-errors" hidden></pre>
<script>
(function () {
  var out = document.getElementById("page-errors");
  window.addEventListener("error", function (e) { out.hidden = false; out.textContent += (e.message || "error") + "\n"; });
  var n = document.querySelectorAll("#timeline rect.attempt").length;
  document.getElementById("attempt-count").textContent = n + " attempts";
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
`
