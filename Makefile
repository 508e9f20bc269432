# noderun: `make demo` runs the demo graph on the embedded simulator; `make test` runs every test.
GO      ?= go
BIN     ?= bin/noderun
DEMO_DB ?= demo.db
CODEX_VERSION  := 0.169.0
CLAUDE_VERSION := 2.1.328
GEMINI_VERSION := 0.61.0
ANTHROPIC_SDK_VERSION := 1.16.0
GENAI_SDK_VERSION     := 3.3.0
TEMPORAL_VERSION := v1.5.1
JAEGER_VERSION   := v1.76.0
TOOLS   := $(CURDIR)/.tools
CODEX   := $(TOOLS)/node_modules/.bin/codex
CLAUDE  := $(TOOLS)/node_modules/.bin/claude
GEMINI  := $(TOOLS)/node_modules/.bin/gemini
SDKS    := $(TOOLS)/node_modules/@anthropic-ai/sdk/package.json $(TOOLS)/node_modules/@google/genai/package.json
TEMPORAL := $(TOOLS)/bin/temporal
JAEGER   := $(TOOLS)/bin/jaeger
PROMTOOL := $(TOOLS)/bin/promtool
export NODERUN_CODEX ?= $(CODEX)
export NODERUN_CLAUDE ?= $(CLAUDE)
export NODERUN_GEMINI ?= $(GEMINI)

.PHONY: build demo test tools debs bench profile lint fuzz clean

# The version goes in by -X: --version prints it even where the go command stamps no VCS info
# (GOFLAGS=-buildvcs=false): the newest tag and the commits since, or the bare commit untagged.
COMMIT  := $(shell git describe --tags --always --dirty 2>/dev/null)

build:
	$(GO) build -ldflags "-X main.buildCommit=$(COMMIT)" -o $(BIN) ./cmd/noderun

# The demo drops streams on purpose and shows noderun recovering them: the run
# (each recovery step as it happens, then a verdict per node and the totals),
# then the figures of `noderun diagnose`. Each fact is printed once.
# (DEMO_DB and BIN let a test run it without touching the checkout.)
demo: build
	$(BIN) run --db $(DEMO_DB) testdata/graphs/demo.yaml
	@echo
	@$(BIN) diagnose last --db $(DEMO_DB) --table

# Tests run the real Codex CLI, Claude Code, Gemini CLI, a Temporal dev server, Jaeger (OTLP traces),
# promtool (metrics), nginx and xmllint (JUnit schema checks); `tools` installs what is missing.
# Where the time goes (this 2-core machine, tools installed; each package alone under -race, CPU by
# /usr/bin/time, system-wide samples by perf): runner 193 s wall / 188 s CPU; runner/temporal
# 155 / 137 (noderun worker processes 59% of it, the test binary 22%, the Temporal dev server 17%);
# cmd/noderun 117 / ~100 (at -parallel 4; 164 s at the default 2, the machine 62% idle); runner/ledger
# 64 / 63 (a simulated Codex's start 2.5 s of CPU -> 1.0 s: harness.CodexQuietArgs; 125 s before);
# server 99 / 55; building and linking the 45 test binaries 72 s / 98 s (`-run '^$'`). In make test
# the machine is busy but for the last ~3 minutes, where runner/temporal and server run on their own
# (vmstat: 19% idle over the run). Tried: -p 3, 547 s, the machine saturated (7% idle), and the chaos
# matrix's Codex node in runner/ledger missed quick's 3 s recovery deadline (6.9 s under that load);
# runner/temporal listed first at -p 2, 621 s against 615 s (613-627 s in earlier stops): no gain.
# The whole of .ci/run took 615-620 s at bbb5ca4 and after (638 s before).
# The command is built once (build) and every package's tests run it ($NODERUN_TEST_BIN), instead of
# each linking its own. Test binaries are linked without DWARF (-w): nothing reads it (race reports
# and panics are symbolized from the runtime's own tables), and each of the 45 links takes ~30% less
# CPU (runner/temporal's: 5.4 s -> 3.8 s).
test: tools build
	NODERUN_TEST_BIN=$(abspath $(BIN)) $(GO) test $(RACE) -ldflags=-w -count=1 ./...
	$(GO) test -count=1 ./internal/heapfloor # its memory check, as the command is built: without -race

# -race instruments our code, the standard library and the modules we use, all but one package: the
# SQLite C library transpiled to Go (modernc.org/sqlite/lib), whose locking is SQLite's own. Instrumented,
# it made each journal write about 3 times slower (journal BenchmarkNodeLifecycle under -race: 2.8 ms a
# node, 0.9 ms without it; make test's CPU 1,126 s → 1,040 s). modernc.org/libc stays instrumented: the
# race detector must see the synchronisation it does (left out too, it reported races in the standard
# library's own caches).
RACE := -race -gcflags=modernc.org/sqlite/lib=-race=false

# Independent of each other: `make -j4 tools` (.ci/run) downloads and installs while it compiles.
tools: $(CODEX) $(CLAUDE) $(GEMINI) $(SDKS) $(TEMPORAL) $(JAEGER) $(PROMTOOL) debs

# Debian's packages the tests need (apt-get runs one at a time: one recipe).
debs:
	@command -v nginx >/dev/null 2>&1 || ls /usr/sbin/nginx >/dev/null 2>&1 || \
		{ echo "installing nginx-light (gateway tests)"; (apt-get update -qq && apt-get install -y -qq nginx-light) >/dev/null; }
	@command -v xmllint >/dev/null 2>&1 || \
		{ echo "installing libxml2-utils (xmllint: JUnit schema checks)"; (apt-get update -qq && apt-get install -y -qq libxml2-utils) >/dev/null; }
	@command -v setpriv >/dev/null 2>&1 || \
		{ echo "installing util-linux (setpriv: unreadable-journal tests as root)"; (apt-get update -qq && apt-get install -y -qq util-linux) >/dev/null; }
	@command -v tmux >/dev/null 2>&1 || \
		{ echo "installing tmux (live view test)"; (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || \
		{ echo "installing chromium (run report test)"; (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null; }

# The agent CLIs and the official JavaScript SDKs that read the simulator (provider/sim's
# TestOfficialSDKsReadTheSimulator), pinned, in one install (npm would otherwise re-resolve the others).
# Claude Code's native binary comes as the npm package @anthropic-ai/claude-code-linux-x64.
$(CODEX) $(CLAUDE) $(GEMINI) $(SDKS) &:
	mkdir -p $(TOOLS)
	npm install --prefix $(TOOLS) --no-audit --no-fund --save-exact @openai/codex@$(CODEX_VERSION) \
		@anthropic-ai/claude-code@$(CLAUDE_VERSION) @google/gemini-cli@$(GEMINI_VERSION) \
		@anthropic-ai/sdk@$(ANTHROPIC_SDK_VERSION) @google/genai@$(GENAI_SDK_VERSION)

# The Temporal CLI (its dev server runs the runner/temporal tests), pinned, built from the Go module
# proxy (about 5 minutes on 2 cores; only when missing).
$(TEMPORAL):
	mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

# Jaeger v2 all-in-one (the OTLP receiver of runner/telemetry's trace tests), pinned. Its go.mod has
# replace directives, which `go install PKG@VERSION` refuses, so it is built as the tool of a
# throwaway module (342 s of CPU: 11.5 min on 2 cores shared with other builds, about 4 when alone; only
# when missing).
$(JAEGER):
	mkdir -p $(TOOLS)/bin
	d=$$(mktemp -d) && cd $$d && $(GO) mod init noderun-tools/jaeger >/dev/null 2>&1 && \
		$(GO) get -tool github.com/jaegertracing/jaeger/cmd/jaeger@$(JAEGER_VERSION) && \
		$(GO) build -o $(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger; rc=$$?; rm -rf $$d; exit $$rc

# promtool (`promtool check metrics` on runner/telemetry's /metrics), Debian 12's, taken out of its prometheus
# package rather than installed (no server, no service user): a 19 MB download, where building it from the Go
# module proxy took 383 s of CPU and kept a bare machine's CI over its 25 minutes. After debs, which may have
# brought apt's lists up to date (apt-get does not share them with itself).
$(PROMTOOL): | debs
	mkdir -p $(TOOLS)/bin
	d=$$(mktemp -d) && cd $$d && \
		{ apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; } && \
		dpkg-deb -x prometheus_*.deb x && cp x/usr/bin/promtool $(PROMTOOL) && $(PROMTOOL) --version | head -1; \
		rc=$$?; rm -rf $$d; exit $$rc

# Performance targets live here, not in timed tests. Each benchmark measures both sides of its
# ratio in the same run, in pairs of alternating order, and reports medians (docs/performance.md):
#   Trickle             1,000 and 10,000 chat nodes x 200 tokens at 50 tokens/s, one SSE event a
#                       token, as `noderun run` (every chunk journaled) vs a bare standard-library
#                       client reading the same streams from the same `noderun sim serve`: whole
#                       processes, cpu-ratio, wall-ratio, rss-ratio (issue 45 asks cpu <= 1.0,
#                       wall <= 1.05, peak-rss-MiB <= 1024 at 10,000); ~5 minutes
#   RunnerVsBareClient  runner + journal vs a bare go-openai loop, one 100k-token stream
#                       (ratio and cpu-ratio <= 0.90)
#   ChunkPath           the runner's own CPU per chunk, without network and decoding
#   FanOut              1,000 and 10,000 nodes x 200 tokens at once vs a bare go-openai fan-out
#                       (at 10,000: ratio and cpu-ratio <= 1.0, heap-KiB/node <= bare-heap-KiB/node,
#                       lost-bytes = 0, dial-timeouts = 0, peak-rss-MiB <= 1024; cpu-µs/node)
#   FoldedJournal       a finished run of 100 nodes x 2,000 tokens: journal bytes / output bytes,
#                       as run and after `noderun compact` (folded-ratio <= 1.5, lost-bytes = 0)
#   FoldRatio           the same journal written directly in rows of 1, 4, 16 and 64 tokens, chat and
#                       Responses rows: folded-ratio at each (issue 45 asks <= 1.3), idx-B/row; ~1 min
#   Quota               300 nodes x 300 tokens against 120 requests/min and 40,000 tokens/min: paced
#                       (wall/floor <= 1.1, 429s-late <= 2, all complete), unpaced, and split between
#                       two runners that pace alone (what two Temporal workers do); ~5 minutes
#   IngestVsRaw         journal ingest vs a raw database/sql insert of the same rows (ratio >= 0.75)
#   NodeLifecycle       what the journal writer spends on each node of a wide graph
#   TemporalVsLocal     the same 4-node graph locally and on the Temporal dev server: ms/node, ratio
#   Handover            a worker killed -9 mid-stream: handover-s, the kill to the node's next attempt
#                       starting on the other worker (wall clock, checked against the history's
#                       started event; ~11 s: the 10 s heartbeat timeout and Temporal's first retry)
#   TemporalWide        1,000 and 10,000 nodes streaming 0.2 s each, and 10 s each (300 tokens at 30
#                       tokens/s, as the fleet of issue 29), locally and on three worker processes:
#                       medians of ms/node and of temporal/local over rounds (5, 3 and 1 of the
#                       10,000 x 10 s), the largest execution's history (events, MiB), the CPU time
#                       of every process each run kept busy (local-cpu-s, temporal-cpu-s) and
#                       cpu-floor/local, the least ratio this machine's cores allow; ~13 minutes
#   LoadNodeOf          the account of one node that settled (20 and 300 chunks; and 20 in a run of
#                       3,000 nodes), as a Temporal worker and the telemetry read it when the node ends
#   Append, Stream100k  the journal's batch sizes and a 100k events/s stream
#   ServeWatchers       200 watchers following a running 1,000-node graph (100 tokens at 50 tokens/s,
#                       50 at once) through `noderun serve`, against the run unwatched, pairs in
#                       alternating order: wall-ratio (<= 1.05), p99-commit-delay-ms from an event's
#                       commit to a watcher (<= 100), server-rss-MiB (<= 256), dropped (= 0); ~5 minutes
# About twenty-seven minutes on two cores; `cat /proc/loadavg` before quoting a figure. FanOut at 10,000
# reports the median of a pair in each order (-benchtime 2x; go test first runs it once at b.N=1
# and reports only the b.N=2 run).
bench:
	@cat /proc/loadavg
	$(GO) test -run '^$$' -bench 'Trickle/nodes=1000$$' -benchtime 4x -count 1 ./internal/trickle/
	$(GO) test -run '^$$' -bench 'Trickle/sim-apart/nodes=1000$$' -benchtime 4x -count 1 ./internal/trickle/
	$(GO) test -run '^$$' -bench 'Trickle/nodes=10000$$' -benchtime 2x -count 1 -timeout 20m ./internal/trickle/
	$(GO) test -run '^$$' -bench 'RunnerVsBareClient' -benchtime 21x -count 1 ./runner/
	$(GO) test -run '^$$' -bench 'ChunkPath' -benchtime 5x -count 1 ./runner/
	$(GO) test -run '^$$' -bench 'RecoveryCost' -benchtime 5x -count 1 ./runner/
	$(GO) test -run '^$$' -bench 'FanOut/nodes=1000$$' -benchtime 3x -count 1 ./runner/
	$(GO) test -run '^$$' -bench 'FanOut/nodes=10000$$' -benchtime 2x -count 1 -timeout 20m ./runner/
	$(GO) test -run '^$$' -bench 'FoldedJournal' -benchtime 3x -count 1 ./runner/
	$(GO) test -run '^$$' -bench 'FoldRatio' -benchtime 1x -count 1 ./journal/
	$(GO) test -run '^$$' -bench '^BenchmarkQuota$$' -benchtime 1x -count 1 -timeout 20m ./runner/
	$(GO) test -run '^$$' -bench 'IngestVsRaw' -benchtime 9x -count 1 ./journal/
	$(GO) test -run '^$$' -bench '^BenchmarkOpen$$' -benchtime 50x -count 1 ./journal/
	$(GO) test -run '^$$' -bench 'NodeLifecycle' -benchtime 10000x -count 1 ./journal/
	$(GO) test -run '^$$' -bench 'TemporalVsLocal' -benchtime 10x -count 1 ./runner/temporal/
	$(GO) test -run '^$$' -bench 'Handover' -benchtime 1x -count 1 ./runner/temporal/
	$(GO) test -run '^$$' -bench 'TemporalWide/^nodes=1000$$/' -benchtime 5x -count 1 -timeout 20m ./runner/temporal/
	$(GO) test -run '^$$' -bench 'TemporalWide/^nodes=10000$$/^stream=0.2s$$' -benchtime 3x -count 1 -timeout 20m ./runner/temporal/
	$(GO) test -run '^$$' -bench 'TemporalWide/^nodes=10000$$/^stream=10s$$' -benchtime 1x -count 1 -timeout 20m ./runner/temporal/
	$(GO) test -run '^$$' -bench 'LoadNodeOf' -count 3 ./runner/ledger/
	$(GO) test -run '^$$' -bench 'Append|Stream100k' -benchtime 200000x -count 1 ./journal/
	$(GO) test -run '^$$' -bench . -benchtime 5x -count 1 ./provider/sim/
	$(GO) test -run '^$$' -bench 'ServeWatchers' -benchtime 2x -count 1 -timeout 20m ./server/
	@cat /proc/loadavg

# CPU and allocation profiles of the single-stream runner benchmark (the simulator runs in a
# process of its own, so they show the client side only), in bin/profile/, with the top entries
# of each. Explore further with `go tool pprof -http : bin/profile/runner.test bin/profile/cpu.out`.
PROFILE := bin/profile
profile:
	mkdir -p $(PROFILE)
	$(GO) test -run '^$$' -bench 'RunnerVsBareClient' -benchtime 6x -count 1 -o $(PROFILE)/runner.test \
		-cpuprofile $(PROFILE)/cpu.out -memprofile $(PROFILE)/mem.out ./runner/
	@echo "CPU of each side's passes (pprof label side; the journal writer, GC and warm-up are unlabelled):"
	@$(GO) tool pprof -tags $(PROFILE)/runner.test $(PROFILE)/cpu.out 2>/dev/null | grep -A3 '^ side:'
	$(GO) tool pprof -top -cum -nodecount 40 $(PROFILE)/runner.test $(PROFILE)/cpu.out
	$(GO) tool pprof -top -sample_index alloc_space -nodecount 25 $(PROFILE)/runner.test $(PROFILE)/mem.out
	@echo "the runner's own path (emit, coalescer, journal writer):"
	@$(GO) tool pprof -top -cum -nodecount 4000 $(PROFILE)/runner.test $(PROFILE)/cpu.out 2>/dev/null | \
		grep -E 'runner\.\(\*(nodeExec|coalescer)|journal\.|openai\.\(\*doneWatcher' || true

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# Short runs of every fuzz target (parsers of untrusted input).
FUZZTIME ?= 15s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseGraph$$' -fuzztime $(FUZZTIME) ./runner/graph/
	$(GO) test -run '^$$' -fuzz '^FuzzRender$$' -fuzztime $(FUZZTIME) ./runner/graph/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./profile/
	$(GO) test -run '^$$' -fuzz '^FuzzSSE$$' -fuzztime $(FUZZTIME) ./provider/sse/
	$(GO) test -run '^$$' -fuzz '^FuzzChatStream$$' -fuzztime $(FUZZTIME) ./provider/openai/
	$(GO) test -run '^$$' -fuzz '^FuzzLeanChunk$$' -fuzztime $(FUZZTIME) ./provider/openai/
	$(GO) test -run '^$$' -fuzz '^FuzzInteractionsStream$$' -fuzztime $(FUZZTIME) ./provider/gemini/
	$(GO) test -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME) ./internal/redact/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./diagnostics/
	$(GO) test -run '^$$' -fuzz '^FuzzScalar$$' -fuzztime $(FUZZTIME) ./diagnostics/
	$(GO) test -run '^$$' -fuzz '^FuzzAppend$$' -fuzztime $(FUZZTIME) ./internal/jsonindent/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./provider/harness/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./provider/sim/simconfig/
	$(GO) test -run '^$$' -fuzz '^FuzzChatInput$$' -fuzztime $(FUZZTIME) ./provider/sim/
	$(GO) test -run '^$$' -fuzz '^FuzzResponsesInput$$' -fuzztime $(FUZZTIME) ./provider/sim/
	$(GO) test -run '^$$' -fuzz '^FuzzMessagesInput$$' -fuzztime $(FUZZTIME) ./provider/sim/
	$(GO) test -run '^$$' -fuzz '^FuzzGeminiInput$$' -fuzztime $(FUZZTIME) ./provider/sim/
	$(GO) test -run '^$$' -fuzz '^FuzzParseMatrix$$' -fuzztime $(FUZZTIME) ./runner/chaos/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePrices$$' -fuzztime $(FUZZTIME) ./cmd/noderun/
	$(GO) test -run '^$$' -fuzz '^FuzzContinuation$$' -fuzztime $(FUZZTIME) ./provider/openai/
	$(GO) test -run '^$$' -fuzz '^FuzzUnpackFold$$' -fuzztime $(FUZZTIME) ./journal/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./provider/ratelimit/

clean:
	rm -rf bin demo.db demo.db-wal demo.db-shm
