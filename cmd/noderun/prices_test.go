package main

import (
	"math"
	"testing"
)

func TestParsePrices(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{"gpt-5: {input: 1.25, output: 10, reasoning: 10}\n", true},
		{"m: {input: 1}\n", true},
		{"", false},
		{"m: {input: -1}\n", false},
		{"m: {inptu: 1}\n", false},
		{"m: {input: .inf}\n", false},
		{"[1, 2]\n", false},
	}
	for _, c := range cases {
		p, err := parsePrices([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%q: %v, %v", c.in, p, err)
		}
	}
}

// FuzzParsePrices: a price table never panics, and an accepted one has
// finite, non-negative prices.
func FuzzParsePrices(f *testing.F) {
	f.Add([]byte("gpt-5: {input: 1.25, output: 10, reasoning: 10}\n"))
	f.Add([]byte("m: {input: .nan}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parsePrices(b)
		if err != nil {
			return
		}
		for m, p := range ps {
			for _, v := range []float64{p.Input, p.Output, p.Reasoning} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: accepted price %v", m, v)
				}
			}
		}
	})
}
