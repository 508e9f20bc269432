package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// The maintenance lock keeps VACUUM and live writers apart. VACUUM holds
// SQLite's write lock for as long as it takes to rewrite the file (seconds
// on a large journal); a writer of another process that meets it waits its
// busy timeout (5 s) and then fails its run with "database is locked",
// naming nobody. So every writable Journal holds a shared flock on the file
// beside the journal (path + LockSuffix) from Open to Close, and Vacuum
// rewrites the file only under the exclusive lock, which it takes without
// waiting: a live writer means no vacuum. A writer that opens while a vacuum
// runs waits for it (as long as it takes; its context ends the wait) and
// says which process it waits for: the vacuum's holder writes its pid, host
// and start time into the lock file.
//
// The lock file stays beside the journal: removing a lock file races with a
// process that has just opened it. Read-only opens take no lock: a VACUUM
// in WAL mode leaves readers their snapshot.

// LockSuffix names the maintenance lock file beside a journal.
const LockSuffix = "-lock"

// lockPoll is how often a writer waiting for a vacuum tries the lock again.
const lockPoll = 50 * time.Millisecond

// ErrInUse: the journal is open for writing in another process, so it
// cannot be rewritten now (Vacuum).
var ErrInUse = errors.New("journal in use by another writer")

// Holder says who holds a journal's maintenance lock.
type Holder struct {
	PID   int
	Host  string
	Since time.Time
	What  string // what it does: "vacuum"
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "another process"
	}
	s := fmt.Sprintf("pid %d on host %s (%s", h.PID, h.Host, h.What)
	if !h.Since.IsZero() {
		s += fmt.Sprintf(" for %s", time.Since(h.Since).Round(time.Second))
	}
	return s + ")"
}

// text is the holder as the lock file stores it: one line of fields.
func (h Holder) text() string {
	return fmt.Sprintf("pid=%d host=%s since=%d what=%s\n", h.PID, h.Host, h.Since.UnixNano(), h.What)
}

// readHolder reads who holds a journal's maintenance lock; a zero Holder
// when the file says nobody (or cannot be read).
func readHolder(path string) Holder {
	b, err := os.ReadFile(path + LockSuffix)
	if err != nil {
		return Holder{}
	}
	var h Holder
	for f := range strings.FieldsSeq(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "pid":
			h.PID, _ = strconv.Atoi(v)
		case "host":
			h.Host = v
		case "since":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				h.Since = time.Unix(0, n)
			}
		case "what":
			h.What = v
		}
	}
	return h
}

// shareLock takes the shared maintenance lock for a writable Journal,
// waiting (and saying so) while another process vacuums.
func (j *Journal) shareLock(ctx context.Context) error {
	j.lock = flock.New(j.path+LockSuffix, flock.SetPermissions(0o600))
	ok, err := j.lock.TryRLock()
	if err != nil {
		return j.errorf("open: maintenance lock %s: %w", j.lock.Path(), err)
	}
	if ok {
		return nil
	}
	h := readHolder(j.path)
	j.log.Warn("journal is being rewritten by another process; waiting for it to finish", "path", j.path, "holder", h.String())
	start := time.Now()
	if ok, err = j.lock.TryRLockContext(ctx, lockPoll); !ok {
		if err == nil {
			err = ctx.Err()
		}
		return j.errorf("open: waiting for %s to finish rewriting the journal: %w", h, err)
	}
	j.log.Info("journal rewrite finished; going on", "path", j.path, "waited", time.Since(start).Round(time.Millisecond))
	return nil
}

// exclusive runs f holding the exclusive maintenance lock, which it takes
// only if no other process has the journal open for writing (ErrInUse). It
// gives the shared lock back afterwards, waiting for it if need be.
func (j *Journal) exclusive(ctx context.Context, what string, f func() error) error {
	// A shared lock is converted by dropping it first (flock(2)), and a
	// failed conversion may leave it dropped: so drop it, try, and take
	// the shared lock back whatever happened.
	if err := j.lock.Unlock(); err != nil {
		return j.errorf("%s: maintenance lock: %w", what, err)
	}
	defer func() {
		if _, err := j.lock.TryRLockContext(context.WithoutCancel(ctx), lockPoll); err != nil {
			j.log.Warn("could not take the maintenance lock back", "path", j.path, "err", err)
		}
	}()
	ok, err := j.lock.TryLock()
	if err != nil {
		return j.errorf("%s: maintenance lock: %w", what, err)
	}
	if !ok {
		return j.errorf("%s: %w: a run, worker or serve of another process has it open; try again when it has finished", what, ErrInUse)
	}
	defer j.lock.Unlock()
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, Since: time.Now(), What: what}
	if err := os.WriteFile(j.lock.Path(), []byte(h.text()), 0o600); err != nil {
		return j.errorf("%s: maintenance lock: %w", what, err)
	}
	defer os.WriteFile(j.lock.Path(), nil, 0o600) // nobody holds it now
	return f()
}
