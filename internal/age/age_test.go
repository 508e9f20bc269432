package age

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute, "2w": 14 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "1w2d": 9 * 24 * time.Hour, "1h30m": 90 * time.Minute, " 3d ": 72 * time.Hour,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0d", "0s", "-1h", "-7d", "7", "d", "7x", "seven days", "1h2d", "99999999999d"} {
		if got, err := Parse(in); !errors.Is(err, ErrAge) {
			t.Errorf("Parse(%q) = %v, %v; want ErrAge", in, got, err)
		}
	}
}

func TestSince(t *testing.T) {
	now := time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"36h":                  now.Add(-36 * time.Hour),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01T10:00:00Z": time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	} {
		if got, err := Since(in, now); err != nil || !got.Equal(want) {
			t.Errorf("Since(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "0h", "-2d", "2026-13-01"} {
		if _, err := Since(in, now); !errors.Is(err, ErrAge) {
			t.Errorf("Since(%q): %v, want ErrAge", in, err)
		}
	}
}
