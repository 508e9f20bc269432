package runner

import "testing"

// soak skips t with -short (`go test -short ./...`, the edit loop): t is a
// long soak, or one more row of a matrix, whose behaviour the faster test
// named in covered already checks. `make test` (no -short) runs it.
func soak(t *testing.T, covered string) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short, the edit loop's quick pass; `make test` and CI run it; until then " + covered + " checks the same behaviour")
	}
}
