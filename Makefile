# m2ho: the targets a newcomer needs. Everything runs as root on Linux for
# the real-kernel tests (TUN devices, network namespaces, iperf3); without
# root those tests skip and say why.

GO       ?= go
BIN      := bin/m2ho
PKGS     := ./...
FUZZTIME ?= 20s

# RACE_PKGS are the pure packages (deps_test.go's allow-list), run again
# with the race detector; they are quick. RACE_SKIP: tests that only
# replay long virtual time on one goroutine, or compare two decoders on
# many thousand lines (nothing to race, minutes under -race).
RACE_PKGS := ./m2ho/... ./proxy/packet ./signaling ./bench/emu
RACE_SKIP := ^(TestEveryPacketReturnsOnce|TestDecoderAgreesOnMutations|TestDecoderTimesAgree|TestInFlightBoundFromPeers)$$

.PHONY: all build deps check test test-short test-race bench fuzz demo replay-demo netbench vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/m2ho

# deps installs what the real-kernel tests and the bench need (Debian).
deps:
	@if ! command -v iperf3 >/dev/null || ! command -v ip >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iproute2 >/dev/null; \
		else \
			echo "need iperf3 and iproute2: run as root on Debian/Ubuntu, or install them" >&2; \
		fi; \
	fi

# test is the one command CI runs (.ci/run): formatting and go.mod checks,
# vet, then every test, the real-kernel ones included when run as root,
# then the pure packages under the race detector.
test: deps check
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 20m $(PKGS)
	$(MAKE) --no-print-directory test-race

# check fails on files gofmt would change and on a go.mod/go.sum that
# go mod tidy would change.
check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l: not formatted:" >&2; echo "$$out" >&2; exit 1; fi
	$(GO) mod tidy -diff

test-race:
	$(GO) test -count=1 -race -skip '$(RACE_SKIP)' $(RACE_PKGS)

test-short:
	$(GO) test -count=1 -short $(PKGS)

# bench: per-packet path and controller micro-benchmarks (ns/op, allocs).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# demo: the README's first command: install, build, and run the A/B bench
# (pass vs m2ho, iperf3 CUBIC) on the bundled mixed drive for a minute per
# variant, at the paper's rates (DEMO_SCALE 1.0; a run the emulator could
# not keep up with is marked invalid and said so), on the drive's seed 2,
# whose first minute crosses between sub-6 and mmWave both ways (seed 1's
# stays on sub-6). Needs root on Linux.
DEMO_OUT ?= bench-out/demo
DEMO_SCALE ?= 1.0
demo: deps build
	@[ "$$(id -u)" = 0 ] || { echo "make demo needs root (network namespaces, TUN devices)" >&2; exit 1; }
	@./$(BIN) bench --scenario mixed-drive --scale $(DEMO_SCALE) --duration 60s --seed 2 --out $(DEMO_OUT); rc=$$?; \
	if [ $$rc = 3 ]; then \
		echo; echo "make demo: the emulator could not keep up on this machine (a run is marked invalid above): the figures are not a result. A busy or virtual machine does this; try again when it is idle, or a smaller --scale."; \
	elif [ $$rc != 0 ]; then exit $$rc; fi
	@echo; cat $(DEMO_OUT)/summary.md | sed -n '1,30p'
	@echo; echo "plots: $(DEMO_OUT)/throughput.png $(DEMO_OUT)/convergence_cdf.png $(DEMO_OUT)/goodput_by_type.png"

# replay-demo scores the handover predictor on the bundled signalling trace
# (no root needed).
replay-demo: build
	./$(BIN) replay configs/example-drive.jsonl

# netbench: iperf3 CUBIC download through one netns chain, in the same run:
# kernel forwarding, the no-op TUN forwarder on water and on the offload
# device, `m2ho run` in pass and m2ho modes on the offload device; writes
# bench-out/netbench.json and prints a table with ratios and CPU per Gbit/s
# (needs root, iperf3, ip).
netbench: deps
	M2HO_NETBENCH=1 $(GO) test -count=1 -run '^TestNetBench$$' -timeout 10m -v ./cmd/m2ho

vet:
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
