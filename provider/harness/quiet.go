package harness

// CodexQuietArgs are the Codex settings (0.169.0 measured) for a Codex
// whose model is a simulator, as in a simulated run (`run --sim`, chaos)
// and the tests: they keep it to the stream under test, off the network
// and cheap to start.
//   - No shell snapshot: at each start Codex runs the user's login shell to
//     capture its environment for the commands the model asks for, and a
//     simulated model asks for none. Behind an rc file that does work
//     (pyenv's, on the machines we test on) it was 60% of a start's CPU
//     (2.5 s against 1.0 s), and what the rc starts in the background
//     outlives Codex.
//   - No plugins: each start runs `git ls-remote` on GitHub to sync them.
//   - No analytics: each start resolves and calls OpenAI's.
//
// Codex ignores feature names it does not know: a version without one of
// these runs as before. Each call returns a new slice.
func CodexQuietArgs() []string {
	return []string{"-c", "features.shell_snapshot=false", "-c", "features.plugins=false", "-c", "analytics.enabled=false"}
}
