package view

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noderun/noderun/profile"
)

// A graph file checked: valid with its nodes, invalid with a line a
// problem, valid but refused on this machine with the reason as warnings;
// a read that ctx ended checks nothing.
func TestCheckGraph(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	valid := write("valid.yaml", "name: v\nproviders:\n  local: {kind: sim}\nnodes:\n  - {id: a, prompt: A}\n  - {id: b, needs: [a], prompt: B}\n")
	cycle := write("cycle.yaml", "name: c\nproviders:\n  local: {kind: sim}\nnodes:\n  - {id: a, needs: [b], prompt: A}\n  - {id: b, needs: [a], prompt: B}\n")
	keyless := write("keyless.yaml", "name: k\nproviders:\n  api: {kind: openai, base_url: 'http://127.0.0.1:1/v1', model: m, api_key_env: NODERUN_VIEW_TEST_NO_SUCH_KEY}\n"+
		"nodes:\n  - {id: a, prompt: A}\n")
	for _, c := range []struct {
		path          string
		ok            bool
		nodes         int
		errors, warns bool
	}{
		{valid, true, 2, false, false},
		{cycle, false, 0, true, false},
		{filepath.Join(dir, "missing.yaml"), false, 0, true, false},
		{keyless, true, 1, false, true},
	} {
		res, err := CheckGraph(context.Background(), c.path)
		if err != nil {
			t.Fatal(err)
		}
		if res.Path != c.path || res.OK != c.ok || res.Nodes != c.nodes || (len(res.Errors) > 0) != c.errors || (res.Err != nil) != c.errors ||
			(len(res.Warnings) > 0) != c.warns || (res.Env != nil) != c.warns {
			t.Errorf("%s: %+v", filepath.Base(c.path), res)
		}
		for _, l := range append(res.Errors, res.Warnings...) {
			if strings.TrimSpace(l) == "" {
				t.Errorf("%s: a blank line: %q", filepath.Base(c.path), res.Errors)
			}
		}
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), "null") || strings.Contains(string(b), `"Err"`) {
			t.Errorf("%s: JSON %s", filepath.Base(c.path), b)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CheckGraph(ctx, valid); err == nil {
		t.Error("a check whose context ended is not an error")
	}
}

// Every profile with its values, durations in milliseconds.
func TestProfilesOf(t *testing.T) {
	set := profile.Set(profile.Builtins())
	doc := ProfilesOf(set)
	if len(doc.Profiles) != len(set.Names()) {
		t.Fatalf("%d profiles of %d", len(doc.Profiles), len(set.Names()))
	}
	for i, name := range set.Names() {
		p, v := set[name], doc.Profiles[i]
		if v.Name != name || v.Retries != p.Retries || v.IdleTimeoutMS != p.IdleTimeout.D().Milliseconds() ||
			v.BackoffCapMS != p.Backoff.Cap.D().Milliseconds() || v.MaxOutputBytes != int64(p.OutputBound()) || v.MaxEvents != p.EventBound() {
			t.Errorf("%s: %+v", name, v)
		}
	}
	if b, _ := json.Marshal(ProfilesOf(profile.Set{})); string(b) != `{"profiles":[]}` {
		t.Errorf("no profiles: %s", b)
	}
}

// `noderun validate` on a graph whose profiles file has several problems
// lists every one, each naming the profiles file and the line of its field.
func TestCheckGraphListsEveryProfileProblem(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "profiles.yaml")
	if err := os.WriteFile(prof, []byte("ci:\n  retries: many\n  idle_timeout: 0s\nslow:\n  deadline: 0s\n  backof: {base: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(g, []byte("name: g\nprofile: ci\nprofiles: profiles.yaml\nproviders:\n  s: {kind: sim}\nnodes:\n  - {id: a, prompt: A}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := CheckGraph(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		prof + `:2: profile "ci": retries: want a whole number >= 0, got "many"`,
		prof + `:3: profile "ci": idle_timeout: want a duration > 0, got 0s`,
		prof + `:5: profile "slow": deadline: want a duration > 0, got 0s`,
		prof + `:6: profile "slow": unknown field "backof" (did you mean "backoff"?)`,
	}
	if res.OK || len(res.Errors) != len(want) {
		t.Fatalf("%+v", res.Errors)
	}
	for i, w := range want {
		if !strings.HasPrefix(res.Errors[i], w) {
			t.Errorf("error %d = %q, want %q", i, res.Errors[i], w)
		}
	}
	if !errors.Is(res.Err, profile.ErrUnknownField) || !errors.Is(res.Err, profile.ErrInvalidValue) {
		t.Errorf("sentinels lost: %v", res.Err)
	}
}
