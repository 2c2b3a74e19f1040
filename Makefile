# gosanlock build, test and demo targets. See README.md.
GO       ?= go
BIN      := bin
PKGS     := ./...
FUZZTIME ?= 3s

.PHONY: all build test unit race fuzz-short lint demo bench clean

all: build

build:
	$(GO) build -o $(BIN)/sanlock ./cmd/sanlock

# The README's test command: format and vet checks, the race-enabled unit
# and interop suites (interop tests need root and /usr/sbin/sanlock, which
# .ci/run installs), then a short run of every fuzz target.
test: build lint-fast
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	./scripts/fuzz-short.sh $(FUZZTIME)

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

clean:
	rm -rf $(BIN) var
