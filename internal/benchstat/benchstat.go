// Package benchstat holds what noderun's benchmarks share to report their
// figures: the median of pairwise ratios and the process's CPU time (see
// docs/performance.md for the method).
package benchstat

import "slices"

// Median is the median of xs (0 for none); xs is left as it is.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
