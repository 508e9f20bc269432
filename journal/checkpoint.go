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
		select {
		case <-j.ckpt:
		case <-j.done:
			return
		}
		if wait := checkpointEvery - time.Since(last); wait > 0 {
			select {
			case <-time.After(wait):
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

// committed tells the checkpointer that the WAL grew. It never blocks.
func (j *Journal) committed() {
	select {
	case j.ckpt <- struct{}{}:
	default:
	}
}
