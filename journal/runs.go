package journal

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/internal/textfit"
)

// RunStatus is where a run stands.
type RunStatus string

// Run statuses. A run left "running" by a dead owner is an interrupted run
// that nobody has recorded as such yet (see Run.Owner and AcquireRun).
const (
	RunRunning     RunStatus = "running"
	RunCompleted   RunStatus = "completed"
	RunFailed      RunStatus = "failed"
	RunInterrupted RunStatus = "interrupted"
)

// NodeState is where a node stands.
type NodeState string

// Node states. Every state but pending and running is final for the run
// (a resume may still move an attention node on).
const (
	NodePending   NodeState = "pending"
	NodeRunning   NodeState = "running"
	NodeCompleted NodeState = "completed"
	NodeFailed    NodeState = "failed"
	NodeSkipped   NodeState = "skipped"
	NodeAttention NodeState = "attention"
	NodeCanceled  NodeState = "canceled"
)

// AttemptMode says how an attempt began.
type AttemptMode string

// Attempt modes.
const (
	ModeStart  AttemptMode = "start"  // the node's first request
	ModeRetry  AttemptMode = "retry"  // a new request after a failed attempt
	ModeResume AttemptMode = "resume" // continues a harness thread by id
	// ModeReattach re-attaches to the previous attempt's response by id and
	// cursor: its output and provider sequence numbers continue that
	// attempt's, and RebuildOutput, MaxProviderSeq and duplicate detection
	// span both.
	ModeReattach AttemptMode = "reattach"
)

// Outcome is how an attempt ended.
type Outcome string

// Attempt outcomes.
const (
	OutcomeRunning Outcome = "running" // not ended (or its process died)
	OutcomeOK      Outcome = "ok"
	OutcomeError   Outcome = "error"
)

// Run is one execution of a graph.
type Run struct {
	ID        string
	Graph     string // the graph's name
	GraphPath string
	GraphText []byte // the graph file as run; Runs leaves it nil
	GraphHash string // hex SHA-256 of GraphText; CreateRun computes it if empty
	// Inputs are the values of the graph's inputs the run was started with
	// (file inputs hold the file's content), which a resume reuses; nil when none.
	Inputs    map[string]string
	Profile   string
	Status    RunStatus
	Started   time.Time
	Finished  time.Time // zero while running
	Owner     Owner     // zero when nobody holds the run lock
	Heartbeat time.Time // the owner's last sign of life
}

// Node is one node of a run.
type Node struct {
	RunID    string
	ID       string
	State    NodeState
	Output   string // the final output, set by CompleteNode
	ErrClass diagnostics.Class
	Error    string
	Reason   string // why it was skipped or needs attention
	Attempts int
	Started  time.Time
	Finished time.Time
}

// Attempt is one request (or re-attachment) made for a node.
type Attempt struct {
	RunID    string
	NodeID   string
	N        int // 1-based, per node
	Mode     AttemptMode
	Provider string
	Ref      string // response id or thread id, once known
	Cursor   int64  // last provider sequence number acknowledged; -1 none
	Outcome  Outcome
	ErrClass diagnostics.Class
	Error    string
	Started  time.Time
	Ended    time.Time
}

func (s RunStatus) valid() bool {
	switch s {
	case RunRunning, RunCompleted, RunFailed, RunInterrupted:
		return true
	}
	return false
}

func (s NodeState) valid() bool {
	switch s {
	case NodePending, NodeRunning, NodeCompleted, NodeFailed, NodeSkipped, NodeAttention, NodeCanceled:
		return true
	}
	return false
}

func (s NodeState) final() bool { return s != NodePending && s != NodeRunning }

func (m AttemptMode) valid() bool {
	switch m {
	case ModeStart, ModeRetry, ModeResume, ModeReattach:
		return true
	}
	return false
}

// change runs fn in the writer, wrapping its error with what and the path.
func (j *Journal) change(ctx context.Context, what string, fn func(ctx context.Context, tx stmtTx) error) error {
	if err := j.submit(ctx, op{kind: opFunc, fn: fn}); err != nil {
		return j.errorf("%s: %w", what, err)
	}
	return nil
}

// mustAffect turns an UPDATE that touched no row into ErrNotFound.
func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// CreateRun records a new run with status running. r.ID must be new; Started
// defaults to now and GraphHash to the SHA-256 of GraphText. If r.Owner is
// set (a runner should set it: r.Owner = NewOwner()), the run is created
// locked by it, heartbeat included, as if by AcquireRun; a running run with no
// owner looks Abandoned.
func (j *Journal) CreateRun(ctx context.Context, r Run) error {
	what := fmt.Sprintf("create run %q", r.ID)
	if r.ID == "" {
		return j.errorf("%s: %w: empty run id", what, ErrInvalid)
	}
	if r.GraphHash == "" {
		sum := sha256.Sum256(r.GraphText)
		r.GraphHash = hex.EncodeToString(sum[:])
	}
	now := time.Now()
	if r.Started.IsZero() {
		r.Started = now
	}
	var hb int64
	if r.Owner != (Owner{}) {
		hb = now.UnixNano()
	}
	graphText := r.GraphText
	if graphText == nil {
		graphText = []byte{}
	}
	inputs := ""
	if len(r.Inputs) > 0 {
		b, err := json.Marshal(r.Inputs)
		if err != nil {
			return j.errorf("%s: inputs: %w", what, err)
		}
		inputs = string(b)
	}
	err := j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (id, graph, graph_path, graph_text, graph_sha256, profile,
			status, started, owner_pid, owner_host, owner_token, heartbeat, inputs) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Graph, r.GraphPath, graphText, r.GraphHash, r.Profile, r.Started.UnixNano(),
			r.Owner.PID, r.Owner.Host, r.Owner.Token, hb, inputs)
		return err
	})
	if err == nil && r.Owner != (Owner{}) {
		j.startHeartbeat(r.ID, r.Owner)
	}
	return err
}

// SetRunStatus records a run's status. A final status sets Finished; running
// (a resume) clears it.
func (j *Journal) SetRunStatus(ctx context.Context, runID string, s RunStatus) error {
	what := fmt.Sprintf("set run %q status %q", runID, s)
	if !s.valid() {
		return j.errorf("%s: %w: unknown status", what, ErrInvalid)
	}
	var finished int64
	if s != RunRunning {
		finished = time.Now().UnixNano()
	}
	err := j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE runs SET status = ?, finished = ? WHERE id = ?`, s, finished, runID))
	})
	if err == nil && s != RunRunning {
		j.ended()
	}
	return err
}

// upsertNode creates the node in state s if it does not exist, then moves it
// to s: running sets Started once; pending, running and completed clear an
// earlier error; a final state sets Finished, any other clears it.
func upsertNode(ctx context.Context, tx stmtTx, runID, nodeID string, s NodeState, now int64) error {
	_, err := tx.ExecContext(ctx, upsertNodeQuery, nodeStateArgs(runID, nodeID, s, now)...)
	return err
}

const upsertNodeQuery = `INSERT INTO nodes (run, id, state, started, finished) VALUES (?1, ?2, ?3, ?4, ?5)
	ON CONFLICT (run, id) DO UPDATE SET ` + nodeStateSet

// nodeStateSet moves a node to state ?3 (see upsertNode); ?4 is when it
// started, ?5 when it finished, ?6 whether its error is cleared.
const nodeStateSet = `state = ?3,
	started = CASE WHEN started = 0 THEN ?4 ELSE started END,
	finished = ?5,
	err_class = CASE WHEN ?6 THEN '' ELSE err_class END,
	error = CASE WHEN ?6 THEN '' ELSE error END`

func nodeStateArgs(runID, nodeID string, s NodeState, now int64, more ...any) []any {
	var finished int64
	if s.final() {
		finished = now
	}
	var started int64 // only work starts a node: a skipped node never started
	if s == NodeRunning {
		started = now
	}
	clearErr := s == NodePending || s == NodeRunning || s == NodeCompleted
	return append([]any{runID, nodeID, s, started, finished, clearErr}, more...)
}

// The state changes of a node's work, each one UPDATE of the node (see
// updateNode): its further columns take arguments from ?7.
var (
	setNodeStateQuery = updateNodeQuery(`, reason = ?7`, "")
	startNodeQuery    = updateNodeQuery(`, reason = '', cache_key = ?7`, "")
	completeNodeQuery = updateNodeQuery(`, output = ?7, reason = ''`, "")
	beginAttemptQuery = updateNodeQuery(`, attempts = attempts + 1, reason = ''`, " RETURNING attempts")
)

func updateNodeQuery(set, returning string) string {
	return `UPDATE nodes SET ` + nodeStateSet + set + ` WHERE run = ?1 AND id = ?2` + returning
}

// updateNode moves a node to state s as upsertNode does, and sets more
// columns, by query (one of the ...NodeQuery above); if the query returns a
// value, it is scanned into *into. A node is registered (pending) before it
// starts, so this is one UPDATE, and an INSERT only for a node not known
// yet: an INSERT that meets the existing node and turns into an update,
// three times a node, was a third of the writer's CPU in a wide fan-out
// (BenchmarkNodeLifecycle).
func updateNode(ctx context.Context, tx stmtTx, query string, into *int, runID, nodeID string, s NodeState, now int64, more ...any) error {
	args := nodeStateArgs(runID, nodeID, s, now, more...)
	run := func() error {
		if into != nil {
			return tx.QueryRowContext(ctx, query, args...).Scan(into)
		}
		return mustAffect(tx.ExecContext(ctx, query, args...))
	}
	err := run()
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err := upsertNode(ctx, tx, runID, nodeID, s, now); err != nil {
		return err
	}
	return run()
}

// SetNodeState moves a node to state s with a reason (why it was skipped or
// needs attention; "" clears it), creating the node if needed. Use it with
// NodePending to register a graph's nodes, in the order Nodes should list them.
func (j *Journal) SetNodeState(ctx context.Context, runID, nodeID string, s NodeState, reason string) error {
	what := fmt.Sprintf("set node %s/%s state %q", runID, nodeID, s)
	if runID == "" || nodeID == "" || !s.valid() {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return updateNode(ctx, tx, setNodeStateQuery, nil, runID, nodeID, s, now, reason)
	})
}

// SetNodesPending is SetNodeState(ctx, runID, id, NodePending, "") for
// every id, in one state change: a graph of 10,000 nodes is registered in
// one commit, not 10,000 in a row.
func (j *Journal) SetNodesPending(ctx context.Context, runID string, nodeIDs []string) error {
	what := fmt.Sprintf("set %s of %s pending", textfit.Count(len(nodeIDs), "node"), runID)
	if runID == "" || slices.Contains(nodeIDs, "") {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		args := make([]any, 0, 2+pendingRows)
		for ids := range slices.Chunk(nodeIDs, pendingRows) {
			args = append(args[:0], runID, NodePending)
			for _, id := range ids {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, pendingQuery(len(ids)), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// pendingRows is how many nodes one statement of SetNodesPending registers.
// A statement a node cost 18 µs each at 1,000 nodes (18 ms before a run's
// first request, with the statement prepared once); most of it was the
// statement's own round, not the row.
const pendingRows = 64

// pendingQuery registers n nodes as pending, as upsertNodeQuery does for
// one (with a reason cleared): ?1 is the run, ?2 the pending state, ?3… the
// ids. A node already there keeps its row (and its place in Nodes' order)
// and its start.
func pendingQuery(n int) string {
	if n == pendingRows {
		return fullPendingQuery
	}
	return buildPendingQuery(n)
}

var fullPendingQuery = buildPendingQuery(pendingRows)

func buildPendingQuery(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO nodes (run, id, state, started, finished) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(?1, ?%d, ?2, 0, 0)", i+3)
	}
	b.WriteString(` ON CONFLICT (run, id) DO UPDATE SET state = excluded.state, finished = 0, err_class = '', error = '', reason = ''`)
	return b.String()
}

// CompleteNode marks a node completed and stores its final output.
func (j *Journal) CompleteNode(ctx context.Context, runID, nodeID, output string) error {
	what := fmt.Sprintf("complete node %s/%s", runID, nodeID)
	if runID == "" || nodeID == "" {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		if _, err := tx.ExecContext(ctx, unshareQuery, runID, nodeID); err != nil {
			return err
		}
		return updateNode(ctx, tx, completeNodeQuery, nil, runID, nodeID, NodeCompleted, now, output)
	})
}

// FailNode marks a node failed with its error class and message.
func (j *Journal) FailNode(ctx context.Context, runID, nodeID string, errClass diagnostics.Class, msg string) error {
	what := fmt.Sprintf("fail node %s/%s", runID, nodeID)
	if runID == "" || nodeID == "" {
		return j.errorf("%s: %w", what, ErrInvalid)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		if err := upsertNode(ctx, tx, runID, nodeID, NodeFailed, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE nodes SET err_class = ?, error = ? WHERE run = ? AND id = ?`,
			errClass, msg, runID, nodeID)
		return err
	})
}

// BeginAttempt records a new attempt for a node and returns its number
// (1-based). The node is created if needed and moved to running, and its
// attempt count goes up. The attempt starts with outcome running and no
// cursor (-1).
func (j *Journal) BeginAttempt(ctx context.Context, runID, nodeID string, mode AttemptMode, provider string) (int, error) {
	what := fmt.Sprintf("begin attempt of %s/%s", runID, nodeID)
	if runID == "" || nodeID == "" || !mode.valid() {
		return 0, j.errorf("%s: %w", what, ErrInvalid)
	}
	now := time.Now().UnixNano()
	var n int
	err := j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		if err := updateNode(ctx, tx, beginAttemptQuery, &n, runID, nodeID, NodeRunning, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO attempts (run, node, n, mode, provider, outcome, started)
			VALUES (?, ?, ?, ?, ?, 'running', ?)`, runID, nodeID, n, mode, provider, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SetAttemptRef records the response or thread id an attempt works on. Call
// it as soon as the provider names it: it is what a resume needs first.
func (j *Journal) SetAttemptRef(ctx context.Context, runID, nodeID string, n int, ref string) error {
	what := fmt.Sprintf("set ref of attempt %s/%s#%d", runID, nodeID, n)
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE attempts SET ref = ? WHERE run = ? AND node = ? AND n = ?`,
			ref, runID, nodeID, n))
	})
}

// SetAttemptCursor records the provider sequence number an attempt has
// journaled up to. It waits for a commit, so call it at checkpoints, not per
// event: the event log's provider_seq (MaxProviderSeq) is the per-event truth.
func (j *Journal) SetAttemptCursor(ctx context.Context, runID, nodeID string, n int, cursor int64) error {
	what := fmt.Sprintf("set cursor of attempt %s/%s#%d", runID, nodeID, n)
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE attempts SET cursor = ? WHERE run = ? AND node = ? AND n = ?`,
			cursor, runID, nodeID, n))
	})
}

// AttemptEnd is how an attempt ended: its outcome, the error class and
// message of an OutcomeError (empty for OutcomeOK), and its cursor (the last
// provider sequence number it saw; NoProviderSeq for none).
type AttemptEnd struct {
	Outcome  Outcome
	ErrClass diagnostics.Class
	Error    string
	Cursor   int64
}

// EndAttempt records how an attempt ended, its cursor included: one
// statement, where a separate SetAttemptCursor would be another state change
// for the caller to wait on.
func (j *Journal) EndAttempt(ctx context.Context, runID, nodeID string, n int, end AttemptEnd) error {
	what := fmt.Sprintf("end attempt %s/%s#%d", runID, nodeID, n)
	if end.Outcome != OutcomeOK && end.Outcome != OutcomeError {
		return j.errorf("%s: %w: outcome %q", what, ErrInvalid, end.Outcome)
	}
	now := time.Now().UnixNano()
	return j.change(ctx, what, func(ctx context.Context, tx stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE attempts SET outcome = ?, err_class = ?, error = ?, ended = ?, cursor = ?
			WHERE run = ? AND node = ? AND n = ?`, end.Outcome, end.ErrClass, end.Error, now, end.Cursor, runID, nodeID, n))
	})
}

// Reads.

const runColumns = `id, graph, graph_path, graph_sha256, profile, status, started, finished,
	owner_pid, owner_host, owner_token, heartbeat`

func scanRun(sc interface{ Scan(...any) error }, extra ...any) (Run, error) {
	var r Run
	var started, finished, hb int64
	err := sc.Scan(append([]any{&r.ID, &r.Graph, &r.GraphPath, &r.GraphHash, &r.Profile, &r.Status,
		&started, &finished, &r.Owner.PID, &r.Owner.Host, &r.Owner.Token, &hb}, extra...)...)
	r.Started, r.Finished, r.Heartbeat = fromNanos(started), fromNanos(finished), fromNanos(hb)
	return r, err
}

// Runs lists runs, newest first, at most limit of them (all if limit <= 0).
// GraphText is left out; Run has it.
func (j *Journal) Runs(ctx context.Context, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := j.query(ctx, `SELECT `+runColumns+` FROM runs ORDER BY started DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, j.errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, j.errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("list runs: %w", err)
	}
	return out, nil
}

// Run returns one run, graph text and inputs included.
func (j *Journal) Run(ctx context.Context, runID string) (Run, error) {
	var text []byte
	var inputs string
	r, err := scanRun(j.queryRow(ctx, `SELECT `+runColumns+`, graph_text, inputs FROM runs WHERE id = ?`, runID), &text, &inputs)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Run{}, j.errorf("run %q: %w", runID, err)
	}
	r.GraphText = text
	if inputs != "" {
		if err := json.Unmarshal([]byte(inputs), &r.Inputs); err != nil {
			return Run{}, j.errorf("run %q: inputs: %w", runID, err)
		}
	}
	return r, nil
}

// HasRun reports whether the journal has run runID. It reads no column
// but the id: the columns after the graph's text (which may be megabytes)
// are reached through its overflow pages, and a Temporal worker asks once
// per node.
func (j *Journal) HasRun(ctx context.Context, runID string) (bool, error) {
	var one int
	err := j.queryRow(ctx, `SELECT 1 FROM runs WHERE id = ?`, runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, j.errorf("run %q: %w", runID, err)
	}
	return true, nil
}

const nodeColumns = `run, id, state, output, err_class, error, reason, attempts, started, finished`

// nodeStateColumns are nodeColumns with an empty output (NodeStates).
const nodeStateColumns = `run, id, state, '', err_class, error, reason, attempts, started, finished`

func scanNode(sc interface{ Scan(...any) error }) (Node, error) {
	var n Node
	var started, finished int64
	err := sc.Scan(&n.RunID, &n.ID, &n.State, &n.Output, &n.ErrClass, &n.Error, &n.Reason, &n.Attempts,
		&started, &finished)
	n.Started, n.Finished = fromNanos(started), fromNanos(finished)
	return n, err
}

// Nodes lists a run's nodes in the order they were first recorded.
func (j *Journal) Nodes(ctx context.Context, runID string) ([]Node, error) {
	return j.nodes(ctx, runID, nodeColumns)
}

// nodes reads a run's nodes, columns as in nodeColumns.
func (j *Journal) nodes(ctx context.Context, runID, columns string) ([]Node, error) {
	rows, err := j.query(ctx, `SELECT `+columns+` FROM nodes WHERE run = ? ORDER BY rowid`, runID)
	if err != nil {
		return nil, j.errorf("nodes of run %q: %w", runID, err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, j.errorf("nodes of run %q: %w", runID, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("nodes of run %q: %w", runID, err)
	}
	return out, nil
}

// NodeStates is Nodes without their outputs (Output empty): what a reader
// of states and figures needs, such as an account, which at 1,000 nodes of
// 1 KiB read 1 MB of outputs to drop them (three quarters of the read).
func (j *Journal) NodeStates(ctx context.Context, runID string) ([]Node, error) {
	return j.nodes(ctx, runID, nodeStateColumns)
}

// Node returns one node of a run.
func (j *Journal) Node(ctx context.Context, runID, nodeID string) (Node, error) {
	n, err := scanNode(j.queryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE run = ? AND id = ?`, runID, nodeID))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Node{}, j.errorf("node %s/%s: %w", runID, nodeID, err)
	}
	return n, nil
}

// The attempts of a run, and of one of its nodes: two statements. One
// whose WHERE let an empty ?2 mean every node is planned before SQLite
// knows ?2, so a node's attempts were found by walking every attempt of its
// run (250 µs a node of a 3,000-node run, and a worker that accounts for
// each node as it ends went quadratic).
const (
	attemptsColumns = `SELECT a.run, a.node, a.n, a.mode, a.provider, a.ref, a.cursor, a.outcome,
		a.err_class, a.error, a.started, a.ended
	FROM attempts a JOIN nodes n ON n.run = a.run AND n.id = a.node`
	runAttemptsQuery  = attemptsColumns + ` WHERE a.run = ? ORDER BY n.rowid, a.n`
	nodeAttemptsQuery = attemptsColumns + ` WHERE a.run = ? AND a.node = ? ORDER BY a.n`
)

// Attempts lists the attempts of one node of a run, or of all its nodes if
// nodeID is "", ordered by node creation, then attempt number.
func (j *Journal) Attempts(ctx context.Context, runID, nodeID string) ([]Attempt, error) {
	q, args := runAttemptsQuery, []any{runID}
	if nodeID != "" {
		q, args = nodeAttemptsQuery, []any{runID, nodeID}
	}
	rows, err := j.query(ctx, q, args...)
	if err != nil {
		return nil, j.errorf("attempts of %s/%s: %w", runID, nodeID, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var started, ended int64
		if err := rows.Scan(&a.RunID, &a.NodeID, &a.N, &a.Mode, &a.Provider, &a.Ref, &a.Cursor, &a.Outcome,
			&a.ErrClass, &a.Error, &started, &ended); err != nil {
			return nil, j.errorf("attempts of %s/%s: %w", runID, nodeID, err)
		}
		a.Started, a.Ended = fromNanos(started), fromNanos(ended)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, j.errorf("attempts of %s/%s: %w", runID, nodeID, err)
	}
	return out, nil
}
