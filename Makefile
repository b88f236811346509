# handoff — build, test and measure.
GO        ?= go
BIN       ?= bin/handoff
PKGS      := ./...
STATICCHECK_VERSION ?= v0.8.2

.PHONY: build cross test test-short lint fmt bench bench-quick bench-tcp bench-round7 bench-net bench-big demo torture fuzz fuzz-ci clean

build:
	$(GO) build -o $(BIN) ./cmd/handoff

# The README's test command: everything CI runs. Keep it under 10 minutes on
# 2 cores; long suites live behind torture, fuzz and bench.
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 9m $(PKGS)

# Writer hosts run handoff too (the hooks, lint, template), and many are
# Macs: the binary must keep building for macOS and FreeBSD. CI runs this
# after make test; nothing here runs the tests there.
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/handoff
	GOOS=freebsd GOARCH=amd64 $(GO) build -o /dev/null ./cmd/handoff

test-short:
	$(GO) test -short -count=1 $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./ingest/ ./ingest/ledger/ ./claim/ ./transport/ssh/

# Network benchmark (issue 6; root, network namespaces, real sshd): two
# small cells of the grid, the idle tick (F=0) and a bulk one, side by side
# (handoff, the three rsync variants, rclone).
bench-quick:
	bench/run.sh -k 2 -r 10 -f 0 -t 20 -n 3
	bench/run.sh -k 2 -r 10 -f 1 -t 20 -n 3

# The real-TCP harness (issue 49; root): the same cells with every packet
# entering a host's namespace held for the RTT (bench/cmd/nfqdelay) instead
# of a proxy, so TCP's windows and slow start see it.
bench-tcp:
	DELAY=nfq bench/run.sh -k 2 -r 10 -f 0 -t 100 -n 3 -T "handoff rsync-pruned rsync-fsync"
	DELAY=nfq bench/run.sh -k 2 -r 10 -f 1 -t 100 -n 3 -T "handoff rsync-pruned rsync-fsync"

# Round seven's cells on both harnesses (docs/BENCHMARKS.md, round seven; about an hour).
bench-round7:
	bench/round7.sh

# The full grid K x R x F x RTT as docs/BENCHMARKS-history.md reports it (3 runs a
# cell, 1 at K=32 R=100 and for rclone where one run takes minutes: about
# 80 minutes here; N=5 N_BIG=5 RCLONE_N=5 for hours more), then the ingester
# alone (10,000 handoffs vs a naive applier), then the big-workspace
# cells (bench-big, about 25 minutes more).
bench-net:
	KS="8 1 32" N=3 N_BIG=1 RCLONE_N=1 bench/grid.sh
	bench/ingest.sh
	$(MAKE) bench-big

# The big-workspace cells (issue 34): the idle tick and the bulk cell at
# K=8 R=100 RTT 100 ms, handoff from an empty workspace and from a big
# one (bench/bigws.sh: 100,000 cards, 200,000 handoffs, a year of
# receipts; built once per binary, minutes) side by side.
bench-big:
	WS="empty big" KS=8 RS=100 FS="0 10" RTTS=100 TOOLS=handoff N=5 bench/grid.sh

demo: build
	$(BIN) demo

torture:
	HANDOFF_TORTURE=1 $(GO) test -count=1 -timeout 60m -run 'Crash|Torture' ./e2e/

FUZZTIME ?= 60s
# Each target for FUZZTIME; .ci/fuzz retries a run once when Go's fuzz
# coordinator ends it with its deadline race and nothing found.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz

# The brief form CI runs after make test.
fuzz-ci:
	$(MAKE) fuzz FUZZTIME=5s

clean:
	rm -rf bin
