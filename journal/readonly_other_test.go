//go:build !linux

package journal

import "testing"

func mountTmpfs(t *testing.T, dir string) bool { return false }

func remountReadOnly(t *testing.T, dir string) {}
