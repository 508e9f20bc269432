package journal

import (
	"time"
)

// checkpointEvery bounds how often the checkpointer runs while the writer
// commits. Each run copies what the WAL gained since the last one into the
// database file and syncs it: once a second is cheap, and keeps the WAL to a
// second of writes.
const checkpointEvery = time.Second

// checkpointer moves the WAL into the database file in the background.
//
// SQLite's default is to checkpoint inside the commit that crosses 1000 WAL
// pages, with an fsync, on the writer's connection: measured here, that made
// one commit in a few take 15-25 ms, enough for a 100k events/s stream to
// fill the queue and stall. So the writer's connection has autocheckpoint off
// and this goroutine runs PASSIVE checkpoints on its own connection, which
// never block the writer (nor readers). If it falls behind, the WAL just
// grows until it catches up; after a reset, journal_size_limit trims it.
func (j *Journal) checkpointer() {
	defer close(j.ckptDone)
	var last time.Time
	for {
		now := false
		select {
		case <-j.ckpt:
		case <-j.ckptNow:
			now = true
		case <-j.done:
			return
		}
		if wait := j.ckptEvery - time.Since(last); wait > 0 && !now {
			select {
			case <-time.After(wait):
			case <-j.ckptNow:
			case <-j.done:
				return
			}
		}
		last = time.Now()
		var busy, walPages, copied int
		if err := j.cdb.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walPages, &copied); err != nil {
			j.log.Warn("journal checkpoint failed", "path", j.path, "err", err)
		}
	}
}

// ended tells the checkpointer that a run has ended, so that it checkpoints
// at once rather than within the second. What follows a run's end is
// reading its account and closing the journal, and Close's checkpoint moves
// whatever the WAL still holds while the caller waits (measured at 1,000
// trickling nodes: 60 ms, a sixth of the runner's time after its last
// stream). Done now, it runs beside those reads, on the other core, and
// Close finds the WAL nearly empty. It never blocks.
func (j *Journal) ended() {
	select {
	case j.ckptNow <- struct{}{}:
	default:
	}
}

// committed tells the checkpointer that the WAL grew. It never blocks.
func (j *Journal) committed() {
	select {
	case j.ckpt <- struct{}{}:
	default:
	}
}
