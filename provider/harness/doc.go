// Package harness is the adapter for agent harness CLIs such as Codex CLI:
// a node's call runs the harness as a process, its JSONL events become
// provider events, and a turn cut off by a dropped provider stream is resumed
// on the same thread instead of failing the node.
//
// A harness is described by data, a [Descriptor] (YAML): the argv that
// starts a run and the argv that resumes a thread, which event carries the
// thread id, which events are terminal success and failure, where the output
// is, which error messages are the harness's own retries and how failure
// messages classify. Codex's descriptor is built in (descriptors/codex.yaml);
// another CLI needs only a descriptor file (README.md explains the format).
//
// # Process handling
//
// The binary runs with argv only (never a shell), stdin /dev/null, in the
// request's (or the Config's) working directory, with os.Environ() plus
// Config.Env, in its own process group. When the context ends, the group
// gets SIGTERM and, 3 s later, SIGKILL. Stream and Resume return only after
// the process was reaped; what is left of the group is killed then, and so
// is every process that carries the run's [MarkerEnv] value (descendants that
// left the group, such as Codex's shell-snapshot `bash -lc`, on Linux).
//
// # Events
//
// Every stdout line is emitted as KindRaw. The thread id is emitted as
// KindRef (and a ThreadStarted diagnostic) the moment it appears, before the
// line itself, so that the executor makes it durable first. Completed items
// are KindProgress; the harness's own retries are HarnessRetrying
// diagnostics. On terminal success: KindReset, the final output as one
// KindDelta, KindDone with usage. On failure: a HarnessFailed diagnostic and
// an error classified by the descriptor (a transport class one wraps
// diagnostics.ErrDisconnected, so the executor resumes the thread).
//
// # Resume
//
// Resume runs the resume argv with the recorded thread id and the
// descriptor's continue prompt, after a ThreadResumed diagnostic. If the
// harness reports another thread (Codex silently starts a new one when a
// name matches nothing) or says the thread does not exist, the process is
// stopped and the call fails with a ThreadMismatch diagnostic and a
// deterministic error: a new thread is not a resume.
//
// A harness that would retry forever (Codex waits for the network without
// bound) is stopped after the descriptor's give_up_after notices in a row,
// with a transport class error, so that noderun's profile bounds recovery.
package harness
