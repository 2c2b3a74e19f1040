# gosanlock build, test and demo targets. See README.md.
GO       ?= go
BIN      := bin
PKGS     := ./...
FUZZTIME ?= 3s

.PHONY: all build test unit race fuzz-short lint demo bench soak soak-sim soak-cluster clean realclients faults

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

# The fault battery (docs/reliability.md): storage hang/EIO/slow on one of
# two hosts, descriptors, idle and stalled connections, kill -9 during
# ballots, wire fuzz on a live daemon; ours beside sanlock 3.8.5 where it
# can run the same case. `make test` runs the short version (the default of
# the package); this runs the full one (about 10 min on 2 cores). Needs
# root (FUSE) and /usr/sbin/sanlock.
faults: build
	GOSANLOCK_FAULTS=full $(GO) test -count=1 -timeout 20m -v ./testdisk/faults

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

bench:
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
