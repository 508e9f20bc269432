package temporal

import "testing"

// How many nodes an activity runs: one each while a run is narrow, then
// enough to keep about PackActivities activities running, at most MaxPack;
// the run's own size (--pack) whatever the width.
func TestPackSize(t *testing.T) {
	for _, c := range []struct{ running, pack, want int }{
		{0, 0, 1},
		{1, 0, 1},
		{PackActivities, 0, 1},
		{PackActivities + 1, 0, 2},
		{200, 0, 4}, // issue 29's fleet: 50 packs of 4
		{1000, 0, 16},
		{PackActivities * MaxPack, 0, MaxPack},
		{100_000, 0, MaxPack},
		{1000, 1, 1},
		{3, 5, 5},
	} {
		if got := packSize(c.running, c.pack); got != c.want {
			t.Errorf("packSize(%d running, --pack %d) = %d, want %d", c.running, c.pack, got, c.want)
		}
	}
	if id := packID([]NodeInput{{Node: "n00017"}, {Node: "n00018"}, {Node: "n00019"}}); id != "n00017+2" {
		t.Errorf("packID = %q, want n00017+2", id)
	}
}
