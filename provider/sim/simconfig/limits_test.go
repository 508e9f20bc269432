package simconfig

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte("tokens: 5\nlimits:\n  requests_per_minute: 120\n  tokens_per_minute: 40000\n  window: 2s\n"))
	if err != nil || cfg.Limits == nil || *cfg.Limits != (Limits{RequestsPerWindow: 120, TokensPerWindow: 40000, Window: 2 * time.Second}) {
		t.Fatalf("%+v %v", cfg.Limits, err)
	}
	if cfg, err := ParseConfig([]byte("limits: {requests_per_minute: 3}\n")); err != nil || *cfg.Limits != (Limits{RequestsPerWindow: 3}) {
		t.Fatalf("%+v %v", cfg.Limits, err)
	}
	if cfg, err := ParseConfig([]byte("limits:\n")); err != nil || cfg.Limits != nil {
		t.Fatalf("null limits: %+v %v", cfg.Limits, err)
	}
	for src, want := range map[string]string{
		"limits: 5":                                       `line 1: limits: want a mapping, got "5"`,
		"limits:\n  rpm: 5":                               `line 2: unknown limits field "rpm"`,
		"limits:\n  requests_per_minute: -1":              "line 2: requests_per_minute: want a whole number >= 0, got -1",
		"limits:\n  tokens_per_minute: lots":              `line 2: tokens_per_minute: want a whole number >= 0, got "lots"`,
		"limits:\n  window: soon":                         `line 2: window: want a duration`,
		"limits:\n  window: 48h":                          "line 2: limits: window must be at most 24h",
		"limits:\n  window: 1us":                          "window must be at least 1ms",
		"limits:\n  tokens_per_minute: 10000000000000000": "must be at most",
		"limits: {window: 1s}\nlimits: {window: 2s}":      `line 2: duplicate field "limits"`,
	} {
		_, err := ParseConfig([]byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", src, err, want)
		}
	}
	if err := (Limits{Window: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "window must not be negative") {
		t.Fatalf("negative window: %v", err)
	}
}
