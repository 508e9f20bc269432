//go:build race

package testkit

// Race reports whether the race detector is on (`go test -race`, as make
// test runs): it makes the runner's own work several times dearer in CPU,
// so a test may keep a CPU busy with it and mostly wait without it.
const Race = true
