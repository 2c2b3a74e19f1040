# gosanlock build, test and demo targets. See README.md.
GO       ?= go
BIN      := bin
PKGS     := ./...
FUZZTIME ?= 3s

.PHONY: all build test unit race fuzz-short lint demo bench gobench soak soak-sim soak-cluster clean realclients

all: build

build:
	$(GO) build -o $(BIN)/sanlock ./cmd/sanlock
	$(GO) build -o $(BIN)/wdmd ./cmd/wdmd

# The README's test command: format and vet checks, the race-enabled unit
# and interop suites (interop tests need root and /usr/sbin/sanlock, which
# .ci/run installs), the multi-host simulator at full size without the race
# detector (100,000 simulated lease operations), then a short run of every
# fuzz target.
test: build lint-fast
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -timeout 10m ./testdisk/sim
	./scripts/fuzz-short.sh $(FUZZTIME)
	$(MAKE) realclients

# Real programs that link libsanlock and that we did not write (libvirt's
# sanlock lock plugin with QEMU guests, sanlk-reset), each run against our
# daemon and against sanlock 3.8.5. Needs root and the Debian packages that
# .ci/run installs.
realclients: build
	$(GO) test -count=1 -timeout 20m -v ./realclients/...

lint-fast:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

lint: lint-fast
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

fuzz-short:
	./scripts/fuzz-short.sh $(FUZZTIME)

demo: build
	./scripts/demo.sh

# The side-by-side benchmark (cmd/slbench): the bare I/O floor, sanlock
# 3.8.5 (when /usr/sbin/sanlock is installed) and gosanlock on the storage
# under /var/tmp, median of 3 runs per figure; needs root. Pass flags with
# BENCHFLAGS, e.g. make bench BENCHFLAGS='-cases serial,parallel -dir /mnt/x'
# or BENCHFLAGS=-quick; ./bin/slbench -h lists them.
BENCHFLAGS ?=
bench: build
	$(GO) build -o $(BIN)/slbench ./cmd/slbench
	./$(BIN)/slbench -ours $(BIN)/sanlock $(BENCHFLAGS)

# The go test micro-benchmarks of every package.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Soaks run until stopped, or for SOAKTIME: the simulator (many seeds,
# random faults, mutual-exclusion checker) and the real mixed C/Go cluster
# (FUSE fault layer, exclusion checker). Both print ops/s, faults and
# violations (must be 0). `make soak` runs both side by side.
SOAKTIME ?= 10m
soak:
	$(MAKE) -j2 soak-sim soak-cluster

soak-sim:
	$(GO) run ./cmd/simsoak -duration $(SOAKTIME) -procs 2

soak-cluster:
	./scripts/soak.sh -duration $(SOAKTIME)

clean:
	rm -rf $(BIN) var
