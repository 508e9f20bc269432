package simconfig

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const faultsDir = "../../../testdata/faults"

func TestLoadConfigErrors(t *testing.T) {
	for file, want := range map[string]string{
		"unknown-field.yaml": `unknown-field.yaml:6: unknown fault field "after_event"`,
		"bad-duration.yaml":  `bad-duration.yaml:1: silence: want a duration`,
		"bad-kind.yaml":      `bad-kind.yaml:2: kind: want one of close, reset, cut, silence, status, queued, refuse, outage, error_event, got "explode"`,
		"syntax.yaml":        `syntax.yaml:2: did not find expected`,
	} {
		_, err := LoadConfig(filepath.Join(faultsDir, "bad", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", file, err, want)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Line == 0 {
			t.Errorf("%s: not a *ConfigError with a line: %v", file, err)
		}
	}
	if _, err := LoadConfig(filepath.Join(faultsDir, "nope.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestParseConfigValidation(t *testing.T) {
	for src, want := range map[string]string{
		"":                                      "",
		"tokens: -1":                            "line 1: tokens: want a whole number >= 0, got -1",
		"tokens: many":                          `line 1: tokens: want a whole number >= 0, got "many"`,
		"seed: 1\nseed: 2":                      `line 2: duplicate field "seed"`,
		"faults: {kind: close}":                 "line 1: faults: want a list of faults, got a mapping",
		"faults: [{kind: status, status: 200}]": "line 1: status: want an HTTP status in 400-599 for kind status, got 200",
		"faults: [{kind: silence}]":             "silence needs a duration",
		"faults: [{kind: refuse, endpoint: chat}]":        "refuse acts on connections",
		"faults: [{kind: queued, endpoint: chat}]":        "queued applies to responses.create only",
		"faults: [{kind: close, endpoint: nope}]":         `endpoint: want one of chat, responses.create`,
		"faults: [{kind: close, requests: [0]}]":          "1-based",
		"faults: [{kind: close, requests: 3}]":            "",
		"faults: [{kind: close, duration: 1s}]":           "duration is for kinds silence and outage only",
		"- 1\n- 2":                                        "line 1: sim config: want a mapping, got a list",
		"faults:\n  - kind: close\n    after_events: [1]": "line 3: after_events: want a whole number >= 0, got a list",
	} {
		_, err := ParseConfig([]byte(src))
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: err = %v, want %q", src, err, want)
		}
	}
}

// TestDecodeConfigNode: a graph file embeds the same schema under `sim:`.
func TestDecodeConfigNode(t *testing.T) {
	src := "name: demo\nsim:\n  seed: 3\n  silence: 1s\n  faults:\n    - {endpoint: chat, kind: reset, after_events: 2, times: 1}\n    - {kind: bogus}\n"
	var doc struct {
		Sim yaml.Node `yaml:"sim"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	_, err := DecodeConfig(&doc.Sim)
	if err == nil || !strings.HasPrefix(err.Error(), "line 7: ") {
		t.Fatalf("err = %v, want one at line 7 of the graph file", err)
	}
	src = strings.Replace(src, "    - {kind: bogus}\n", "", 1)
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	cfg, err := DecodeConfig(&doc.Sim)
	if err != nil || cfg.Seed != 3 || cfg.Silence != time.Second || len(cfg.Faults) != 1 || cfg.Faults[0].Kind != FaultReset {
		t.Fatalf("%+v %v", cfg, err)
	}
	if cfg, err := DecodeConfig(nil); err != nil || cfg.Seed != 0 {
		t.Fatal("nil node")
	}
}

func TestFaultJSONRoundTrip(t *testing.T) {
	f := Fault{Endpoint: EndpointChat, Requests: []int{2}, Kind: FaultSilence, Duration: 1500 * time.Millisecond, AfterEvents: 3}
	b, err := f.MarshalJSON()
	if err != nil || !strings.Contains(string(b), `"duration":"1.5s"`) {
		t.Fatalf("%s %v", b, err)
	}
	var g Fault
	if err := g.UnmarshalJSON(b); err != nil || g.Duration != f.Duration || g.Requests[0] != 2 {
		t.Fatalf("%+v %v", g, err)
	}
}

// FuzzParseConfig: the faults YAML is untrusted input (a user's file, a
// graph's sim block); it must never panic, and whatever it accepts is valid.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("seed: 1\ntokens: 5\nsilence: 1s\nfaults:\n  - {kind: close, after_events: 2, requests: [1, 2]}\n"))
	f.Add([]byte("faults:\n  - kind: status\n    status: 429\n    retry_after: 5\n"))
	f.Add([]byte("keepalive: 500ms\nburst_tokens: 3\ntokens_per_second: 2.5\n"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Add([]byte("limits:\n  requests_per_minute: 120\n  tokens_per_minute: 40000\n  window: 2s\n"))
	f.Add([]byte("tokens: 300\nlimits: {requests_per_minute: 0, window: 1m}\nfaults: [{kind: status, status: 429}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		for _, fl := range cfg.Faults {
			if err := fl.Validate(); err != nil {
				t.Fatalf("accepted an invalid fault: %v", err)
			}
		}
		if cfg.Limits != nil {
			if err := cfg.Limits.Validate(); err != nil {
				t.Fatalf("accepted invalid limits: %v", err)
			}
		}
		if cfg.Tokens < 0 || cfg.BurstTokens < 0 || cfg.TokensPerSecond < 0 || cfg.Silence < 0 || cfg.Keepalive < 0 {
			t.Fatalf("accepted negative values: %+v", cfg)
		}
	})
}

// A Config set in code writes the YAML form DecodeConfig reads back: it is
// how graph.Build puts it in a graph's source.
func TestConfigYAMLRoundTrip(t *testing.T) {
	for _, c := range []Config{
		{},
		{Seed: -7, Tokens: 300, TokensPerSecond: 12.5, Silence: 1500 * time.Millisecond, BurstTokens: 20, Keepalive: 15 * time.Second,
			Continuation: []string{FormPrefix}, ContinuationEcho: true, Limits: &Limits{RequestsPerWindow: 60, Window: 2 * time.Second},
			Faults: []Fault{
				{Endpoint: EndpointChat, Node: "plan", Requests: []int{1, 3}, Kind: FaultReset, AfterEvents: 25, Times: 2},
				{Kind: FaultStatus, Status: 503, RetryAfter: "2", ResponseID: "resp_1"},
				{Kind: FaultSilence, Duration: 90 * time.Second},
			}},
		{Continuation: []string{}, Limits: &Limits{}},
	} {
		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip of\n%+v\nthrough\n%s\ngave\n%+v", c, b, got)
		}
	}
}
