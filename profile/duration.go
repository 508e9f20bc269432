package profile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration that reads and writes as "1.5s" in YAML.
type Duration time.Duration

// D converts a time.Duration.
func D(d time.Duration) Duration { return Duration(d) }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String is the duration as people write it (FormatDuration).
func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// FormatDuration writes d as people write a duration, in a form
// time.ParseDuration reads back: "500ms", "90s", "10m", "60m", "1h30m", "2h"
// rather than Go's "1m30s", "1h0m0s". Up to 90 seconds it counts seconds, up
// to an hour whole minutes; beyond, hours and minutes, dropping zero units.
// It is for text a person reads; JSON carries milliseconds.
func FormatDuration(d time.Duration) string {
	switch {
	case d < 0 && d != math.MinInt64:
		return "-" + FormatDuration(-d)
	case d == 0:
		return "0s"
	case d%time.Second != 0 || d < 0: // a fraction of a second: Go's form ("1.5s", "250ms", "2m0.5s")
		return strings.Replace(d.String(), "h0m", "h", 1)
	case d <= 90*time.Second:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Minute == 0 && d <= time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.unit)
			d -= n * u.d
		}
	}
	return b.String()
}

// UnmarshalYAML accepts Go duration strings ("250ms", "1m30s").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: duration must be a string like \"1.5s\"", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as people write it ("90s", "60m").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }
