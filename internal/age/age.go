// Package age reads how long ago something was, as a person types it on
// the command line: Go's durations ("36h", "90m", "1h30m") and, as runs
// are kept for days, days and weeks ("7d", "2w", "1d12h"). Go's
// time.ParseDuration stops at hours, which no one prunes by.
package age

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrAge is the error of a text that is not a usable age.
var ErrAge = errors.New("not an age")

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// Parse reads an age: a positive duration, in Go's units plus d (24h) and w
// (7d), which come first ("1w2d", "1d12h"). Zero and negative ages are
// refused: an age of nothing selects everything, which is never what a
// typo meant.
func Parse(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	var d time.Duration
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"w", week}, {"d", day}} {
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 || !strings.HasPrefix(rest[i:], u.suffix) {
			continue
		}
		n, err := strconv.ParseInt(rest[:i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %v", ErrAge, s, err)
		}
		d += time.Duration(n) * u.unit
		rest = rest[i+len(u.suffix):]
	}
	if rest != "" {
		v, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: give a duration such as 7d, 36h or 90m", ErrAge, s)
		}
		d += v
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: %q: must be more than zero", ErrAge, s)
	}
	return d, nil
}

// Since reads a point in time: an age before now ("7d": seven days ago), a
// date (2006-01-02, local midnight) or an RFC 3339 time.
func Since(s string, now time.Time) (time.Time, error) {
	if t, err := time.ParseInLocation(time.DateOnly, s, now.Location()); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := Parse(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q: give an age (7d, 36h), a date (2006-01-02) or an RFC 3339 time", ErrAge, s)
	}
	return now.Add(-d), nil
}
