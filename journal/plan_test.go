package journal

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// tableScan is a plan's walk of a whole table (SQLite names tables as
// written, lower case here; not "SCAN CONSTANT ROW", or a subquery's rows).
var tableScan = regexp.MustCompile(`SCAN [a-z]`)

// TestQueryPlans pins the indexes the hot and the polled queries use, so a
// schema change cannot silently turn them into scans of a run's whole log.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	j := openTest(t, "")
	createRun(t, j, "r")
	byRun, byRunArgs := eventsQuery("r", EventFilter{AfterSeq: 0, Limit: 10})
	byNode, byNodeArgs := eventsQuery("r", EventFilter{Node: "a", Kinds: []string{KindDelta}, Limit: 10})
	records, recordsArgs := eventsQuery("r", EventFilter{AfterSeq: -1, Kinds: []string{KindDiagnostic, KindUsage}, NoText: true})
	withData, withDataArgs := eventsQuery("r", EventFilter{AfterSeq: -1, Kinds: []string{KindDiagnostic, KindDelta}})
	// A sort of the few rows an index found is no scan: a key's cache
	// candidates, newest first.
	sorts := map[string]bool{"cache lookup": true}
	for _, c := range []struct {
		name, query, want string
		args              []any
	}{
		{"events after seq", byRun, "SEARCH events USING PRIMARY KEY (run=? AND seq>?)", byRunArgs},
		// An account, and each run's result, read a run's records, not its chunks.
		{"records of a run", records, "SEARCH events USING INDEX events_records (run=? AND seq>?)", recordsArgs},
		{"records and chunks of a run", withData, "SEARCH events USING PRIMARY KEY (run=? AND seq>?)", withDataArgs},
		{"events of a node", byNode, "SEARCH events USING INDEX events_by_node (run=? AND node=? AND seq>?)", byNodeArgs},
		{"rebuild output", rebuildQuery, "SEARCH events USING INDEX events_by_node (run=? AND node=?)", []any{"r", "a", 1, 2, KindDelta}},
		{"last mark", lastMarkQuery, "SEARCH events USING INDEX events_by_node (run=? AND node=?)", []any{"r", "a", 1, 2}},
		{"max provider seq", maxProviderSeqQuery, "SEARCH provider_seq_tops USING PRIMARY KEY (run=? AND node=? AND attempt>? AND attempt<?)", []any{"r", "a", 1, 2}},
		{"chain start", chainStartQuery, "SEARCH attempts USING PRIMARY KEY (run=? AND node=? AND n<?)", []any{"r", "a", 2}},
		{"writer: chain top", chainTopQuery, "SEARCH provider_seq_tops USING PRIMARY KEY (run=? AND node=? AND attempt>? AND attempt<?)", []any{1, "a", 1, 2}},
		{"writer: duplicate check", providerSeqExistsQuery, "SEARCH events USING INDEX events_by_node (run=? AND node=? AND seq>?)", []any{1, "a", 10, 1, 2, 5}},
		{"writer: last seq", lastSeqQuery, "SEARCH events", []any{1}},
		// One lookup for each node a run starts, in a journal of every run.
		{"cache lookup", lookupCacheQuery, "SEARCH nodes USING INDEX nodes_by_cache_key (cache_key=?)", []any{"k", "r", 16}},
		// A worker on Temporal accounts for each node as it ends.
		{"a node's attempts", nodeAttemptsQuery, "SEARCH a USING PRIMARY KEY (run=? AND node=?)", []any{"r", "a"}},
	} {
		rows, err := j.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+c.query, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "; "); !strings.Contains(p, c.want) || tableScan.MatchString(p) ||
			strings.Contains(p, "TEMP B-TREE") && !sorts[c.name] {
			t.Errorf("%s: plan %q, want it to use %q", c.name, p, c.want)
		}
	}
}
