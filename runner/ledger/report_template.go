package ledger

// reportTemplate is the whole page: inline style, inline SVG, and a few
// lines of script that are not needed to read it (they count the attempts
// in the legend, open a node's details when its link is followed, and
// record page errors in the DOM for a headless browser test); no network,
// no server. html/template escapes what the journal holds (outputs, errors).
const reportTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>noderun run {{.Run.ID}} ({{.Run.Graph}}): {{.Figures.Status}}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2330; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; } h3 { font-size: 15px; margin: 0 0 6px; }
h4 { font-size: 13px; margin: 14px 0 4px; color: #3a4252; }
a { color: #1f5fbf; text-decoration: none; } a:hover { text-decoration: underline; }
.meta, small, .note { color: #5b6474; }
.status { font-size: 13px; padding: 2px 8px; border-radius: 10px; vertical-align: 3px; background: #eceff4; }
.status-completed { background: #d7f2dc; } .status-failed { background: #f8d7d7; } .status-interrupted, .status-running { background: #fbeccb; }
#figures { display: flex; flex-wrap: wrap; gap: 8px 28px; margin: 14px 0 4px; }
#figures div { min-width: 120px; } #figures dt { color: #5b6474; font-size: 12px; } #figures dd { margin: 0; font-size: 18px; font-weight: 600; }
#summary { margin: 8px 0; padding-left: 18px; color: #3a4252; }
#attention { margin: 18px 0; }
.problem { border: 1px solid #e3b4b4; border-left: 6px solid #c62828; background: #fff8f8; border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
.problem.state-canceled, .problem.state-running { border-color: #e6cf9a; border-left-color: #b7791f; background: #fffbf2; }
.problem.state-attention { border-color: #e6cf9a; border-left-color: #d97706; background: #fffbf2; }
.problem dl { display: grid; grid-template-columns: max-content 1fr; gap: 3px 12px; margin: 6px 0; }
.problem dt { color: #5b6474; } .problem dd { margin: 0; }
.problem .error { font-family: ui-monospace, monospace; font-size: 12.5px; white-space: pre-wrap; word-break: break-word; }
.command { margin: 8px 0; }
code.cmd { display: inline-block; font: 13px ui-monospace, monospace; background: #1d2330; color: #f3f5f9; padding: 3px 8px; border-radius: 4px; user-select: all; word-break: break-all; }
#all-well { background: #eef8f0; border: 1px solid #b9dfc2; border-radius: 6px; padding: 8px 12px; }
table { border-collapse: collapse; } th, td { padding: 4px 10px; border-bottom: 1px solid #e3e6ec; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.verdict, th.verdict, td.text, th.text { text-align: left; }
svg text { font: 12px system-ui, sans-serif; }
.box rect { stroke: #2b3445; rx: 6; } .box text { fill: #1d2330; }
.state-completed rect { fill: #d7f2dc; } .state-failed rect, .state-attention rect { fill: #f8d7d7; }
.state-running rect, .state-pending rect { fill: #eceff4; } .state-skipped rect { fill: #f3ecd2; } .state-canceled rect { fill: #fbeccb; }
.edge { stroke: #8a93a5; stroke-width: 1.5; marker-end: url(#arrow); }
.attempt.ok .seg.run { fill: #4caf6e; } .attempt.error .seg.run { fill: #e06666; } .attempt.running .seg.run { fill: #9aa3b5; }
.attempt.interrupted .seg.run { fill: #b7791f; }
.seg.wait { fill: url(#waitfill); stroke: #c49000; stroke-width: 1; }
.seg.detached { fill: none; stroke: #6b7385; stroke-width: 1.5; stroke-dasharray: 4 3; }
.attempt-label { fill: #fff; font-size: 11px; pointer-events: none; }
.gap-band { fill: url(#hatch); } .gap-label { font-size: 11px; font-weight: 600; fill: #3a4252; }
.mark line { stroke-width: 2; } .mark.fault line { stroke: #b00020; } .mark.reattach line { stroke: #1f5fbf; }
.mark.poll line { stroke: #c49000; } .mark.reconnect line { stroke: #6a3fb5; } .mark.retry line { stroke: #e07a00; } .mark.continue line { stroke: #1b8a5a; }
.mark.failure line { stroke: #000; } .mark.cancel line { stroke: #7a5230; }
.mark.interrupted line, .mark.resumed line { stroke: #6b7385; stroke-dasharray: 2 2; }
.grid { stroke: #e3e6ec; } .legend span { display: inline-block; margin-right: 14px; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.legend svg { vertical-align: -2px; margin-right: 4px; }
details.node { border: 1px solid #e3e6ec; border-radius: 6px; margin: 6px 0; padding: 4px 12px; }
details.node[open] { padding-bottom: 10px; }
details.node summary { cursor: pointer; padding: 4px 0; }
details.node table { font-size: 12.5px; }
td.attrs, td.msg { font-family: ui-monospace, monospace; font-size: 12px; text-align: left; word-break: break-word; }
pre.output { background: #f6f7f9; border: 1px solid #e3e6ec; border-radius: 4px; padding: 8px 10px; white-space: pre-wrap; word-break: break-word; max-height: 480px; overflow: auto; font-size: 12.5px; }
.cut { color: #8a4b00; }
</style>
</head>
<body>
<h1>Run {{.Run.ID}} <span class="status status-{{.Run.Status}}" id="run-status">{{.Figures.Status}}</span></h1>
<div class="meta">graph <b>{{.Run.Graph}}</b> ({{.Run.GraphPath}}) · profile {{.Run.Profile}} · report generated {{.Generated}}</div>

<dl id="figures">
<div><dt>started</dt><dd id="started">{{.Figures.Started}}</dd></div>
<div><dt>took (start to end)</dt><dd id="took" data-ms="{{.Figures.TookMS}}">{{.Figures.Took}}</dd></div>
<div><dt>runners ran it</dt><dd id="ran" data-ms="{{.Figures.RanMS}}" data-sessions="{{.Figures.Sessions}}">{{.Figures.Ran}}</dd><small>in {{.Figures.Sessions}} session{{if ne .Figures.Sessions 1}}s{{end}}</small></div>
{{with .Figures.Gaps}}<div><dt>no runner between sessions</dt><dd id="gaps" data-ms="{{$.Figures.GapMS}}">{{.}}</dd></div>{{end}}
</dl>
<ul id="summary">{{range .D.Summary}}<li>{{.}}</li>{{end}}{{range .D.Warnings}}<li class="note">{{.}}</li>{{end}}</ul>

<section id="attention">
{{if or .Problems .RunCommands}}<h2>Needs attention</h2>{{end}}
{{with .AllWell}}<p id="all-well">{{.}}</p>{{end}}
{{range .RunCommands}}<p class="command" data-what="{{.What}}">{{.Why}}: <code class="cmd" data-what="{{.What}}">{{.Line}}</code></p>
{{end}}
{{range .Problems}}{{$p := .}}<div class="problem state-{{.State}}" data-node="{{.Node}}">
<h3><a href="#node-{{.Node}}">{{.Node}}</a> <span class="state">{{.State}}</span></h3>
<dl>
<dt>verdict</dt><dd class="verdict" data-node="{{.Node}}">{{.Verdict}}</dd>
{{if .Class}}<dt>class</dt><dd class="class" data-node="{{.Node}}">{{.Class}}</dd>{{end}}
{{if .Error}}<dt>error</dt><dd class="error" data-node="{{.Node}}">{{.Error}}{{if .ErrorTruncated}} …{{end}}</dd>{{end}}
{{if .Reason}}<dt>reason</dt><dd class="reason" data-node="{{.Node}}">{{.Reason}}</dd>{{end}}
{{if .Skipped}}<dt>skipped with it</dt><dd class="skipped" data-node="{{.Node}}">{{join .Skipped}}</dd>{{end}}
</dl>
{{range .Commands}}<p class="command" data-node="{{$p.Node}}" data-what="{{.What}}">{{.Why}}: <code class="cmd" data-node="{{$p.Node}}" data-what="{{.What}}">{{.Line}}</code></p>
{{end}}</div>
{{end}}
</section>

<h2>Timeline</h2>
<div class="legend"><span><i style="background:#4caf6e"></i>attempt ok</span><span><i style="background:#e06666"></i>attempt failed</span><span><i style="background:#b7791f"></i>interrupted</span><span><i style="background:#9aa3b5"></i>never ended</span>
<span><svg width="22" height="12"><rect x="1" y="1" width="20" height="10" fill="#fff4d6" stroke="#c49000"/></svg>backoff wait</span>
<span><svg width="22" height="12"><rect x="1" y="1" width="20" height="10" fill="none" stroke="#6b7385" stroke-dasharray="4 3"/></svg>no runner (picked up after the gap)</span>
<span><svg width="22" height="12"><rect width="22" height="12" fill="#dde0e7"/><path d="M0 12 L12 0 M10 12 L22 0" stroke="#a9b0bd" stroke-width="2"/></svg>gap between sessions</span>
<span><i style="background:#b00020"></i>fault</span><span><i style="background:#6a3fb5"></i>reconnect</span><span><i style="background:#1f5fbf"></i>re-attach</span>
<span><i style="background:#c49000"></i>poll / status</span><span><i style="background:#1b8a5a"></i>continue</span><span><i style="background:#e07a00"></i>retry</span><span><i style="background:#7a5230"></i>cancel</span><span><i style="background:#000"></i>failure</span>
<span id="attempt-count"></span></div>
<svg id="timeline" width="{{.Timeline.W}}" height="{{.Timeline.H}}" role="img" aria-label="every attempt of every node over time ({{.Timeline.Took}})">
<defs>
<pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="8" height="8" fill="#eef0f4"/><line x1="0" y1="0" x2="0" y2="8" stroke="#c3c8d2" stroke-width="4"/></pattern>
<pattern id="waitfill" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#fff4d6"/><circle cx="2" cy="2" r="0.9" fill="#c49000"/></pattern>
</defs>
{{range .Timeline.Gaps}}<g class="gap" data-from="{{.FromISO}}" data-to="{{.ToISO}}" data-ms="{{.MS}}" data-why="{{.Why}}"><title>{{.Label}}: no runner ran the run</title><rect class="gap-band" x="{{.X}}" y="16" width="{{.W}}" height="{{plus $.Timeline.H -16}}"/><text class="gap-label" x="{{.Mid}}" y="31" text-anchor="middle">{{.Label}}</text></g>
{{end}}
{{range .Timeline.Ticks}}<line class="grid" x1="{{.X}}" y1="16" x2="{{.X}}" y2="{{$.Timeline.H}}"/><text x="{{.X}}" y="12" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .Timeline.Rows}}<g class="row" data-node="{{.Node}}">
<a href="#node-{{.Node}}"><text x="6" y="{{plus .Y 15}}">{{.Node}}</text></a>
{{$row := .}}{{range .Attempts}}<g class="attempt {{.Look}}" data-node="{{$row.Node}}" data-attempt="{{.N}}" data-mode="{{.Mode}}" data-outcome="{{.Outcome}}" data-class="{{.ErrClass}}" data-ref="{{.Ref}}" data-start="{{.StartISO}}" data-end="{{.EndISO}}"><title>{{.Title}}</title>
{{range .Segs}}{{if eq .Kind "wait"}}<rect class="seg wait" data-from="{{.FromISO}}" data-to="{{.ToISO}}" data-code="{{.Code}}" data-seq="{{.Seq}}" data-delay-ms="{{.DelayMS}}" x="{{.X}}" y="{{plus $row.Y 6}}" width="{{.W}}" height="10"><title>{{.Title}}</title></rect>{{else if eq .Kind "detached"}}<rect class="seg detached" data-from="{{.FromISO}}" data-to="{{.ToISO}}" x="{{.X}}" y="{{plus $row.Y 3}}" width="{{.W}}" height="16"><title>{{.Title}}</title></rect>{{else}}<rect class="seg run" data-from="{{.FromISO}}" data-to="{{.ToISO}}" x="{{.X}}" y="{{plus $row.Y 2}}" width="{{.W}}" height="18"/>{{end}}{{end}}{{if .ShowLabel}}<text class="attempt-label" x="{{.LabelX}}" y="{{plus $row.Y 15}}">#{{.N}}</text>{{end}}</g>
{{end}}{{range .Marks}}<g class="mark {{.Kind}}" data-node="{{$row.Node}}" data-code="{{.Code}}" data-kind="{{.Kind}}"><title>{{.Title}}</title><line x1="{{.X}}" y1="{{$row.Y}}" x2="{{.X}}" y2="{{plus $row.Y 22}}"/></g>
{{end}}</g>
{{end}}</svg>

<h2>What recovery did (noderun diagnose)</h2>
<table id="diagnose">
<thead><tr><th>node</th><th>state</th><th>attempts</th><th>time lost</th><th>quota wait</th><th>generated</th><th>regenerated</th><th>preserved</th><th>cost</th><th class="verdict">verdict</th></tr></thead>
<tbody>{{range .D.Nodes}}<tr data-node="{{.ID}}"><td><a href="#node-{{.ID}}">{{.ID}}</a></td><td>{{.State}}</td><td>{{.Attempts}}</td><td>{{seconds .TimeLostMS}}</td><td>{{seconds .QuotaWaitMS}}</td>
<td>{{thousands .Tokens.Generated}}</td><td>{{thousands .Tokens.Regenerated}}</td><td>{{thousands .Tokens.Preserved}}</td><td>{{usd .CostUSD}}</td>
<td class="verdict">{{.Verdict}}{{with steps .RecoverySteps}}<br><small>{{.}}</small>{{end}}</td></tr>{{end}}</tbody>
</table>

{{if .Handovers}}<h2>Hand-overs between workers (Temporal {{.Temporal}})</h2>
<table id="handovers">
<thead><tr><th class="text">node</th><th class="text">worker lost</th><th class="text">failure</th><th>last heartbeat</th><th class="text">taken over by</th><th>resumed</th><th>took</th><th class="text">recovery</th><th>generated</th><th>regenerated</th><th>preserved</th></tr></thead>
<tbody>{{range .Handovers}}<tr data-node="{{.Node}}" data-lost="{{.LostWorker}}" data-worker="{{.Worker}}" data-ms="{{.TookMS}}"><td class="text"><a href="#node-{{.Node}}">{{.Node}}</a></td><td class="text">{{.LostWorker}}</td><td class="msg">{{.Failure}}</td><td>{{.LastHeartbeat}}</td><td class="text">{{.Worker}}</td><td>{{.Resumed}}</td><td>{{.Took}}</td><td class="text">{{.Recovery}}</td><td>{{thousands .Generated}}</td><td>{{thousands .Regenerated}}</td><td>{{thousands .Preserved}}</td></tr>
{{end}}</tbody></table>
{{end}}
<h2>Nodes: attempts, diagnostics, output</h2>
{{range .Nodes}}<details class="node" id="node-{{.ID}}" data-node="{{.ID}}" data-state="{{.State}}"{{if .Open}} open{{end}}>
<summary><b>{{.ID}}</b> · {{.State}} · <span class="verdict">{{.Verdict}}</span></summary>
<h4>Attempts</h4>
{{if .Attempts}}<table class="attempts" data-node="{{.ID}}"><thead><tr><th>#</th><th class="text">mode</th><th class="text">provider</th><th class="text">response / thread</th><th>started</th><th>lasted</th><th class="text">outcome</th><th class="text">class</th><th>tokens</th><th class="text">error</th></tr></thead>
<tbody>{{range .Attempts}}<tr data-attempt="{{.N}}"><td>{{.N}}</td><td class="text">{{.Mode}}</td><td class="text">{{.Provider}}</td><td class="text">{{.Ref}}</td><td>{{.At}}</td><td>{{.Lasted}}</td><td class="text">{{.Outcome}}</td><td class="text">{{.Class}}</td><td>{{.Tokens}}</td><td class="msg">{{.Error}}</td></tr>
{{end}}</tbody></table>{{else}}<p class="note">none: the node did not run</p>{{end}}
<h4>Diagnostics</h4>
{{if .Events}}<table class="events" data-node="{{.ID}}"><thead><tr><th>at</th><th>attempt</th><th class="text">code</th><th class="text">role</th><th class="text">message</th><th class="text">attributes</th></tr></thead>
<tbody>{{range .Events}}<tr data-seq="{{.Seq}}" data-code="{{.Code}}"><td>{{.At}}</td><td>{{.Attempt}}</td><td class="text">{{.Code}} {{.Name}}</td><td class="text">{{.Role}}</td><td class="msg">{{.Message}}</td><td class="attrs">{{.Attrs}}</td></tr>
{{end}}</tbody></table>{{else}}<p class="note">none</p>{{end}}
{{if .MoreEvents}}<p class="cut">… and {{.MoreEvents}} more; all of them: <code class="cmd">{{.EventsCmd}}</code></p>{{end}}
<h4>{{.OutputWhat}}{{if .OutputBytes}} <small>({{thousands .OutputBytes}} bytes)</small>{{end}}</h4>
{{if .Output}}<pre class="output" data-node="{{.ID}}" data-bytes="{{.OutputBytes}}" data-shown="{{.Shown}}">
{{.Output}}</pre>{{end}}
{{if .Cut}}<p class="cut" data-node="{{.ID}}">Cut at {{thousands .Shown}} of {{thousands .OutputBytes}} bytes; all of it: <code class="cmd" data-node="{{.ID}}" data-what="show">{{.ShowCmd}}</code></p>{{end}}
{{if .Thinking}}<h4>Thinking <small>({{thousands .ThinkingBytes}} bytes; journaled apart, never in the output)</small></h4>
<pre class="output thinking" data-node="{{.ID}}" data-bytes="{{.ThinkingBytes}}">
{{.Thinking}}</pre>
{{if .ThinkingCut}}<p class="cut" data-node="{{.ID}}">Cut; all of it: <code class="cmd" data-node="{{.ID}}" data-what="thinking">{{.ThinkingCmd}}</code></p>{{end}}{{end}}
</details>
{{end}}

<h2>Graph</h2>
<svg id="graph" width="{{.Graph.W}}" height="{{.Graph.H}}" role="img" aria-label="the goal graph">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#8a93a5"/></marker></defs>
{{range .Graph.Edges}}<line class="edge" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/>{{end}}
{{range .Graph.Boxes}}<a href="#node-{{.ID}}"><g class="box state-{{.State}}" data-node="{{.ID}}"><title>{{.ID}}: {{.State}}</title><rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/><text x="{{plus .X 10}}" y="{{plus .Y 21}}">{{.ID}}</text></g></a>{{end}}
</svg>
<pre id="page-errors" hidden></pre>
<script>
(function () {
  var out = document.getElementById("page-errors");
  window.addEventListener("error", function (e) { out.hidden = false; out.textContent += (e.message || "error") + "\n"; });
  var n = document.querySelectorAll("#timeline g.attempt").length;
  document.getElementById("attempt-count").textContent = n + (n === 1 ? " attempt" : " attempts");
  function openTarget() {
    var el = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (el && el.tagName === "DETAILS") { el.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
`
