package journal

import (
	"time"
)

// walRestartFrames is the size (in frames, 4 KiB pages by default: 4 MiB)
// past which the checkpointer asks the writer to let the WAL start over.
//
// SQLite writes a WAL from its start again only when a write transaction
// begins with every frame already copied into the database file. Beside a
// writer that commits without a pause (a wide run streaming) that never
// happens by itself: a PASSIVE checkpoint copies the frames there were when
// it began, and by the time it ends the writer has added more. The WAL then
// only grows, by a second of writes after a second (measured at 1,000
// trickling nodes: 33 MB of WAL for a 4.7 MB journal after 5 s, 46 MB for
// 10 MB after 20 s, until journal_size_limit's 64 MiB trims it at the next
// start-over): disk the journal holds for nothing, and paid again when the
// WAL is emptied (truncating or deleting a file of written pages costs ~1.2
// ms a MB here).
//
// So when the WAL has grown past this, the writer, between two
// transactions, checkpoints on its own connection (restartWAL): with no
// write in between, that copies everything (the few frames committed since
// the checkpointer's own pass), and its next transaction starts the WAL
// over. It is PASSIVE, so it never waits for a reader; one still reading
// an older snapshot leaves the WAL as it is until the next request. The
// 20 s run's WAL then stayed at 9 MB until its last second, where the nodes
// ending together add their own ~20-30 MB (see ended).
const walRestartFrames = 1024

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
				now = true
			case <-j.done:
				return
			}
		}
		last = time.Now()
		if j.restartWAL.Load() && !now {
			continue // the writer is about to checkpoint: two at once, one fails
		}
		var busy, walPages, copied int
		if err := j.cdb.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walPages, &copied); err != nil {
			j.log.Warn("journal checkpoint failed", "path", j.path, "err", err)
		} else if walPages >= j.walRestart {
			j.restartWAL.Store(true)
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
//
// It does not empty the WAL (TRUNCATE) there, though the nodes ending
// together at a wide run's end grow it from ~2 to ~20 MB in its last second
// and Close then spends 30-35 ms truncating it: a truncating checkpoint holds
// the writer back while it waits for the account's readers, and measured
// at 1,000 nodes the run's last commits waited for it instead (its end
// 110-130 ms → 150-200 ms).
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
