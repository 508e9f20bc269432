package diagnostics

import (
	"slices"
	"strings"
	"time"
)

// The attribute keys. A key's name is its field in the journal's payload
// ("attrs") and in the log; its type is what Of returns. One name, one type.
var (
	// What failed.
	KeyClass      = Key[Class]{"class", kindString}
	KeyError      = Key[string]{"error", kindString}
	KeyStatus     = Key[int]{"status", kindInt} // the HTTP status
	KeyRetryAfter = Key[time.Duration]{"retry_after", kindDuration}
	// KeySilent is how long a stream had been silent when it was cut.
	KeySilent = Key[time.Duration]{"silent", kindDuration}
	// The work at the provider and where the node stands in it.
	KeyRef    = Key[string]{"ref", kindString}
	KeyCursor = Key[int64]{"cursor", kindInt}
	KeySeq    = Key[int64]{"seq", kindInt}
	KeyState  = Key[string]{"state", kindString}
	// A recovery step.
	KeyDelay          = Key[time.Duration]{"delay", kindDuration}
	KeyBackoffStep    = Key[int]{"backoff_step", kindInt}
	KeyRetriesLeft    = Key[int]{"retries_left", kindInt}
	KeyReconnectsLeft = Key[int]{"reconnects_left", kindInt}
	// KeyReplays: false when no earlier attempt can have taken effect, so a
	// retry repeats nothing even for a side_effects: unsafe node.
	KeyReplays = Key[bool]{"replays", kindBool}
	// KeyAction is the step a picked-up node starts with (resume.Action).
	KeyAction = Key[string]{"action", kindString}
	// What recovery re-sent and regenerated (runner/continue.go).
	KeyContinuedFrom       = Key[int]{"continued_from", kindInt}
	KeyContinuedFromDeltas = Key[int]{"continued_from_deltas", kindInt}
	KeyResentPrefixBytes   = Key[int]{"resent_prefix_bytes", kindInt}
	KeyResentPrefixDeltas  = Key[int]{"resent_prefix_deltas", kindInt}
	KeyRegeneratedBytes    = Key[int]{"regenerated_bytes", kindInt}
	KeyRegeneratedDeltas   = Key[int]{"regenerated_deltas", kindInt}
	KeyPrefixRepeated      = Key[bool]{"prefix_repeated", kindBool}
	KeyBytesFromStatus     = Key[int]{"bytes_from_status", kindInt}
	// KeyOutputBytes is the output an attempt had delivered when it stopped.
	KeyOutputBytes = Key[int]{"output_bytes", kindInt}
	// A node that recovered, in sum.
	KeyRecoverySteps = Key[int]{"recovery_steps", kindInt}
	KeyAttempts      = Key[int]{"attempts", kindInt}
	KeyContinues     = Key[int]{"continues", kindInt}
	KeyRetries       = Key[int]{"retries", kindInt}
	KeyTried         = Key[string]{"tried", kindString}
	// Polling and the gateway's idle cut.
	KeyIdle     = Key[time.Duration]{"idle", kindDuration}
	KeyInterval = Key[time.Duration]{"interval", kindDuration}
	KeyPolls    = Key[int]{"polls", kindInt}
	KeyReason   = Key[string]{"reason", kindString}
	KeySince    = Key[time.Duration]{"since", kindDuration}
	KeyCutAfter = Key[time.Duration]{"cut_after", kindDuration}
	KeyPollFor  = Key[time.Duration]{"poll_after", kindDuration}
	// A node moved from a lost worker (Temporal).
	KeyLostAttempt = Key[int]{"lost_attempt", kindInt}
	// KeyContinuedAttempt is the earlier attempt whose partial answer a
	// failover continues (NR603): its output is kept, not thrown away.
	KeyContinuedAttempt = Key[int]{"continued_attempt", kindInt}
	KeyLostCursor       = Key[int64]{"lost_cursor", kindInt}
	// Agent harnesses.
	KeyThreadID = Key[string]{"thread_id", kindString}
	KeyWant     = Key[string]{"want", kindString}
	KeyGot      = Key[string]{"got", kindString}
	KeyExitCode = Key[int]{"exit_code", kindInt}
	KeySignal   = Key[string]{"signal", kindString}
	KeyStderr   = Key[string]{"stderr", kindString}
	KeyEffects  = Key[bool]{"effects", kindBool}
	KeyInARow   = Key[int]{"in_a_row", kindInt}
	// The run.
	KeyGraph     = Key[string]{"graph", kindString}
	KeyProfile   = Key[string]{"profile", kindString}
	KeyNodes     = Key[int]{"nodes", kindInt}
	KeyRunStatus = Key[string]{"run_status", kindString}
	KeyResumed   = Key[bool]{"resumed", kindBool}
	// Quota and failover: how long a node waited for its provider's quota,
	// the provider it waited for or moved from and to.
	KeyWaited   = Key[time.Duration]{"waited", kindDuration}
	KeyProvider = Key[string]{"provider", kindString}
	KeyFrom     = Key[string]{"from", kindString}
	KeyTo       = Key[string]{"to", kindString}
	// KeyCause is the node whose failure skipped this one.
	KeyCause = Key[string]{"cause", kindString}
	// A cache hit: where its output was first produced, and what that
	// provider call cost, which the hit does not pay again.
	KeyCacheKey        = Key[string]{"cache_key", kindString}
	KeyFromRun         = Key[string]{"from_run", kindString}
	KeyFromNode        = Key[string]{"from_node", kindString}
	KeyFromJournal     = Key[string]{"from_journal", kindString}
	KeyModel           = Key[string]{"model", kindString}
	KeySavedInput      = Key[int]{"saved_input_tokens", kindInt}
	KeySavedOutput     = Key[int]{"saved_output_tokens", kindInt}
	KeySavedReasoning  = Key[int]{"saved_reasoning_tokens", kindInt}
	KeySavedCacheRead  = Key[int]{"saved_cache_read_tokens", kindInt}
	KeySavedCacheWrite = Key[int]{"saved_cache_write_tokens", kindInt}
)

// anyKey is a key of any type.
type anyKey interface{ keyOf() (string, attrKind) }

func (k Key[T]) keyOf() (string, attrKind) { return k.name, k.kind }

// allKeys lists every key once (a test checks that names are unique).
var allKeys = []anyKey{
	KeyClass, KeyError, KeyStatus, KeyRetryAfter, KeySilent, KeyRef, KeyCursor, KeySeq, KeyState,
	KeyDelay, KeyBackoffStep, KeyRetriesLeft, KeyReconnectsLeft, KeyReplays, KeyAction,
	KeyContinuedFrom, KeyContinuedFromDeltas, KeyResentPrefixBytes, KeyResentPrefixDeltas, KeyRegeneratedBytes,
	KeyRegeneratedDeltas, KeyPrefixRepeated, KeyBytesFromStatus, KeyOutputBytes,
	KeyRecoverySteps, KeyAttempts, KeyContinues, KeyRetries, KeyTried,
	KeyIdle, KeyInterval, KeyPolls, KeyReason, KeySince, KeyCutAfter, KeyPollFor,
	KeyLostAttempt, KeyLostCursor, KeyContinuedAttempt,
	KeyThreadID, KeyWant, KeyGot, KeyExitCode, KeySignal, KeyStderr, KeyEffects, KeyInARow,
	KeyGraph, KeyProfile, KeyNodes, KeyRunStatus, KeyResumed, KeyCause,
	KeyWaited, KeyProvider, KeyFrom, KeyTo,
	KeyCacheKey, KeyFromRun, KeyFromNode, KeyFromJournal, KeyModel,
	KeySavedInput, KeySavedOutput, KeySavedReasoning, KeySavedCacheRead, KeySavedCacheWrite,
}

// keyKinds types every attribute by its name, for Decode and CheckAttrs.
var keyKinds = func() map[string]attrKind {
	m := make(map[string]attrKind, len(allKeys))
	for _, k := range allKeys {
		name, kind := k.keyOf()
		m[name] = kind
	}
	return m
}()

// KeySet is the attributes a code declares (Code.Attrs). It is a value, so
// that codes stay comparable with ==.
type KeySet string

// Keys makes a key set.
func Keys(keys ...anyKey) KeySet {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i], _ = k.keyOf()
	}
	slices.Sort(names)
	return KeySet(" " + strings.Join(slices.Compact(names), " ") + " ")
}

func (s KeySet) has(name string) bool { return strings.Contains(string(s), " "+name+" ") }

// Names lists the keys in the set, sorted.
func (s KeySet) Names() []string { return strings.Fields(string(s)) }
