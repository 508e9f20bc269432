package profile

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"
)

// Size is a byte count that reads as 4096 or "32MiB" in YAML and writes as
// people write it.
type Size int64

// String is the size as people write it: "32MiB", "1.5KiB", "100B".
func (s Size) String() string { return strings.ReplaceAll(humanize.IBytes(uint64(max(s, 0))), " ", "") }

// ParseSize reads a size: a whole number of bytes, or a number with a unit
// (KiB, MiB, GiB; kB, MB, GB).
func ParseSize(v string) (Size, error) {
	n, err := humanize.ParseBytes(v)
	if err != nil || n > 1<<50 {
		return 0, fmt.Errorf("%q is not a size like 32MiB, 64KiB or 4096", v)
	}
	return Size(n), nil
}

// UnmarshalYAML accepts a whole number of bytes or a size string.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a size must be a number of bytes or a string like \"32MiB\"", n.Line)
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = v
	return nil
}

// MarshalYAML writes the size as people write it.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }
