package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/noderun/noderun/journal"
	"github.com/noderun/noderun/runner/ledger"
)

// compactCommand folds the streamed rows of finished nodes (journal.Fold)
// and gives the freed pages back to the file system (journal.Vacuum). It is
// a command, not something every run does at each node's completion: a
// run's hot path pays nothing for it, and a journal shrinks on disk only
// when VACUUM rewrites the file, which a live run's writer must not wait for
// (docs/performance.md, "A compact journal").
func compactCommand() *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "fold finished nodes' streamed rows: a journal about its outputs' size",
		Description: "Folds the delta and reasoning rows of every ended attempt of every completed node into one row per\n" +
			"attempt, whose text is found in the node's output instead of being stored twice, then rewrites the\n" +
			"file (VACUUM) to give the freed space back. Nothing is lost: events, show, diagnose, report and\n" +
			"resume read a compacted run exactly as before (every event with its seq, time and text). A running\n" +
			"run is skipped (and named); the file is rewritten only when no other process has it open for writing,\n" +
			"and a run that starts meanwhile waits for the rewrite, naming this process.\n\n" +
			"Examples:\n  noderun compact            # every run in the journal\n  noderun compact last       # the last run",
		ArgsUsage: "[RUN|last]",
		Flags:     []cli.Flag{dbFlag(), &cli.BoolFlag{Name: "no-vacuum", Usage: "fold only; leave the file's size as it is"}},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 0, 1, "give a run id (or last), or nothing for every run"); err != nil {
				return err
			}
			j, _, err := openLogged(c)
			if err != nil {
				return err
			}
			defer j.Close()
			var runs []journal.Run
			if c.NArg() == 1 {
				r, err := findRun(c.Context, j, c.Args().First())
				if err != nil {
					return err
				}
				runs = []journal.Run{r}
			} else if runs, err = j.Runs(c.Context, 0); err != nil {
				return err
			}
			before := journal.DiskSize(j.Path())
			for _, r := range runs {
				if r.Status == journal.RunRunning && !j.Abandoned(r) {
					// Its runner writes it now; folding its finished nodes
					// would take SQLite's write lock from under it.
					fmt.Fprintf(c.App.Writer, "run %s: skipped: it is running (%s); compact it when it has finished\n", r.ID, r.Owner)
					continue
				}
				st, err := j.Fold(c.Context, r.ID)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "run %s: %d rows of %d nodes folded (%s, %s of it found in the outputs)\n",
					r.ID, st.Rows, st.Nodes, ledger.Size(st.Bytes), ledger.Size(st.Shared))
			}
			if c.Bool("no-vacuum") {
				return nil
			}
			// VACUUM holds the file's write lock while it rewrites it, so
			// it runs only when no other process has the journal open for
			// writing, and one that opens meanwhile waits for it
			// (journal.Vacuum).
			if err := j.Vacuum(c.Context); errors.Is(err, journal.ErrInUse) {
				fmt.Fprintf(c.App.Writer, "journal %s: not vacuumed: another process (a run, a worker or serve) has it open for writing; folded rows' pages are reused meanwhile, and compact again when it has finished\n", j.Path())
				return nil
			} else if err != nil {
				return err
			}
			if err := j.Close(); err != nil { // and its WAL with it
				return err
			}
			fmt.Fprintf(c.App.Writer, "journal %s: %s before, %s after\n", j.Path(), ledger.Size(before), ledger.Size(journal.DiskSize(j.Path())))
			return nil
		},
	}
}
