# gosanlock build, test and demo targets. See README.md.
GO       ?= go
BIN      := bin
PKGS     := ./...
FUZZTIME ?= 3s

.PHONY: all build deps trees test test-compute test-wait test-reexec-watchdog test-watchdog-packages unit race fuzz-short lint demo bench gobench soak soak-sim soak-cluster clean realclients cross install uninstall install-check faults docrefs docrefs-check

all: build

# sanlock is built without cgo (docs/performance.md "Build without cgo"):
# libc costs an idle daemon 1.7 MB of RSS, and cgo served only os/user
# and the net resolver. User and group names (-U, -G, the "sanlock" user)
# are then read from /etc/passwd and /etc/group, not through NSS.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/sanlock ./cmd/sanlock
	$(GO) build -o $(BIN)/wdmd ./cmd/wdmd

# The README's test command: format, vet and doc-citation checks, cross
# builds, the install check, the race-enabled unit and interop suites, the
# real-process harness, the short fault battery, the multi-host simulator,
# a short run of every fuzz target, the real clients and the packages. Interop, harness,
# fault and real-client tests need root and /usr/sbin/sanlock (.ci/run
# installs them). docs/testing.md ("make test") has the reasons and the
# timings of this layout; in short:
#
#  1. three groups at once (make -j3 -O: each group's output is printed
#     when it ends): the steps that only compute (cross builds, install
#     check, fuzz), the real clients
#     (libvirt + QEMU, sanlk-reset: they mostly wait on daemons and
#     timeouts) followed by the simulator (one CPU, simulated time), and
#     TestReexecWatchdog (one daemon and wdmd, mostly 45 s of waiting for
#     renewals) followed by the package test (make package-test: the .deb
#     and .rpm built and checked, the .deb installed over Debian's sanlock
#     in a Debian 13 root and upgraded while a lease is held);
#  2. the race-enabled suites, the longest packages first so that they do
#     not start last, and ./cmd/sanlock beside them without -race (its
#     tests only exec a binary they build without it, and mostly wait on
#     disk and processes);
#  3. alone, one package at a time and without the race detector, the rest
#     of the real-process harness (mixed C/Go cluster, 3.8.5/3.9.5/5.1.1/Go
#     mixed-version clusters on the Debian trees, escalation) and the
#     short fault battery: they measure holdings per second and timelines,
#     which two loaded cores beside other test binaries starve
#     (TestMixedCluster: 26 holdings/s alone, 8 beside them).
#
# The simulator runs once, at full size (100,000 simulated lease
# operations), with the simbugs tag (the broken paxos variants its
# self-test must catch exist only in that build; paxos's own test of one
# runs with it too) and without -race: a race run of 10 seeds costs 17-19 s
# of CPU and would only cover the simulator's own code, whose tests run on
# one P; paxos and delta have their own race runs. The tests that need our sanlock binary take
# the bin/sanlock built here ($GOSANLOCK_TEST_SANLOCK) instead of linking
# their own (in the race step: handover/serving/proctest, the reexec tests
# with real daemon processes).
TEST_ENV  = GOSANLOCK_TEST_SANLOCK=$(CURDIR)/$(BIN)/sanlock
# Packages run outside the race step.
NORACE    = -e /realclients -e /testdisk/faults -e /testdisk/harness -e /testdisk/sim -e /cmd/sanlock$$
# The race step's longest packages (docs/testing.md), listed first.
RACEFIRST = daemon/interop daemon/newerinterop handover/serving/proctest cmd/internal/cli lease diskfmt daemon internal/bench cmd/internal/wdmdcli
test: deps build lint-fast trees
	$(MAKE) --no-print-directory -j3 -O test-compute test-wait test-watchdog-packages
	$(GO) test -count=1 -timeout 20m ./cmd/sanlock & p=$$!; \
	  m=$$($(GO) list -m); first=$$(for d in $(RACEFIRST); do echo $$m/$$d; done); \
	  rest=$$($(GO) list $(PKGS) | grep -v $(NORACE) | grep -v -x -F "$$first"); \
	  $(TEST_ENV) $(GO) test -race -count=1 -timeout 20m $$first $$rest; r=$$?; \
	  wait $$p; c=$$?; [ $$r -eq 0 ] && [ $$c -eq 0 ]
	$(TEST_ENV) $(GO) test -count=1 -p 1 -timeout 20m -skip '^TestReexecWatchdog$$' ./testdisk/harness ./testdisk/faults

# The Debian packages the tests need (scripts/test-deps.sh): installed
# when missing and run as root; otherwise the script names the command.
deps:
	./scripts/test-deps.sh

# The Debian root trees with the newer sanlock releases (trixie: 3.9.5,
# sid: 5.1.1) that internal/debtree runs beside ours (docs/testing.md
# "Newer sanlock releases"). Built once into $(TREES) (about a minute
# each, ~650 MB each; needs root, debootstrap and the Debian mirror),
# then cached: the script returns at once when both are there.
TREES ?= $(or $(GOSANLOCK_TREES),/var/cache/gosanlock/trees)
trees:
	./scripts/debian-trees.sh $(TREES)

# The three groups of step 1 of make test (they expect bin/sanlock built).
test-compute:
	$(MAKE) --no-print-directory cross install-check
	./scripts/fuzz-short.sh $(FUZZTIME)

test-wait:
	$(TEST_ENV) $(GO) test -count=1 -timeout 20m -v ./realclients/...
	$(GO) test -count=1 -timeout 20m -tags simbugs ./testdisk/sim ./paxos

test-reexec-watchdog:
	$(TEST_ENV) $(GO) test -count=1 -timeout 20m -run '^TestReexecWatchdog$$' ./testdisk/harness

# The third group: the watchdog re-exec test, then the packages built,
# checked and installed over Debian's sanlock (package-test).
test-watchdog-packages:
	$(MAKE) --no-print-directory test-reexec-watchdog
	$(MAKE) --no-print-directory package-test

# Real programs that link libsanlock and that we did not write (libvirt's
# sanlock lock plugin with QEMU guests, sanlk-reset), each run against our
# daemon and against sanlock 3.8.5. Needs root and the Debian packages that
# .ci/run installs.
realclients: build
	$(TEST_ENV) $(GO) test -count=1 -timeout 20m -v ./realclients/...

# Cross builds: every package (and, through vet, every test file) must
# compile for the other architectures sanlock runs on. The watchdog ioctl
# numbers, for one, differ on ppc64le.
CROSS_ARCHES ?= arm64 ppc64le
cross:
	@for a in $(CROSS_ARCHES); do \
	  echo "GOARCH=$$a go build + vet"; \
	  GOOS=linux GOARCH=$$a $(GO) build ./... || exit 1; \
	  GOOS=linux GOARCH=$$a $(GO) vet ./... || exit 1; \
	done

# The fault battery (docs/reliability.md): storage hang/EIO/slow on one of
# two hosts, descriptors, idle and stalled connections, kill -9 during
# ballots, wire fuzz on a live daemon; ours beside sanlock 3.8.5 where it
# can run the same case. `make test` runs the short version (the default of
# the package: every case, smaller); this runs the full one (11-12 min on 2
# shared cores). Needs root (FUSE) and /usr/sbin/sanlock.
faults: build
	GOSANLOCK_FAULTS=full $(GO) test -count=1 -timeout 30m -v ./testdisk/faults

# Doc comments cite docs/*.md, not the reference spec outside the repository:
# docrefs rewrites citations with scripts/docrefs.map, docrefs-check fails on
# any left (run docrefs after merging code that still cites the spec).
docrefs:
	./scripts/docrefs.sh

docrefs-check:
	@./scripts/docrefs.sh --check || { echo "spec citations left: run make docrefs (scripts/docrefs.map)"; exit 1; }

lint-fast: docrefs-check
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags wdmd_testdev ./cmd/internal/wdmdcli
	$(GO) vet -tags simbugs ./paxos ./testdisk/sim

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

# Install: binaries, systemd units, man pages, shell completion and the
# default configuration (never overwriting a configuration file that is
# already there). PREFIX=/usr gives Debian's layout; DESTDIR stages the
# tree for a package. See docs/systemd.md.
PREFIX         ?= /usr/local
DESTDIR        ?=
SYSCONFDIR     ?= /etc
SBINDIR        ?= $(PREFIX)/sbin
LIBEXECDIR     ?= $(PREFIX)/libexec
MANDIR         ?= $(PREFIX)/share/man
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR    ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR     ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR    ?= $(PREFIX)/share/fish/vendor_completions.d
SUBST = sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'

install: build
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBEXECDIR)/gosanlock $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) \
	  $(DESTDIR)$(SYSCONFDIR)/sanlock $(DESTDIR)$(SYSCONFDIR)/default
	install -m 0755 $(BIN)/sanlock $(BIN)/wdmd $(DESTDIR)$(SBINDIR)/
	install -m 0755 contrib/systemd/wdmd-watchdog-check $(DESTDIR)$(LIBEXECDIR)/gosanlock/
	install -m 0644 docs/man/sanlock.8 docs/man/wdmd.8 $(DESTDIR)$(MANDIR)/man8/
	for u in sanlock wdmd; do \
	  $(SUBST) contrib/systemd/$$u.service.in > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service || exit 1; \
	  chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service; \
	done
	$(BIN)/sanlock completion bash > $(DESTDIR)$(BASHCOMPDIR)/sanlock
	$(BIN)/sanlock completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_sanlock
	$(BIN)/sanlock completion fish > $(DESTDIR)$(FISHCOMPDIR)/sanlock.fish
	@for f in sanlock/sanlock.conf:contrib/sanlock.conf default/sanlock:contrib/default/sanlock \
	  default/wdmd:contrib/default/wdmd; do \
	  dst=$(DESTDIR)$(SYSCONFDIR)/$${f%%:*}; \
	  if [ -e $$dst ]; then echo "keeping $$dst"; else install -m 0644 $${f#*:} $$dst || exit 1; fi; \
	done

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/sanlock $(DESTDIR)$(SBINDIR)/wdmd \
	  $(DESTDIR)$(LIBEXECDIR)/gosanlock/wdmd-watchdog-check \
	  $(DESTDIR)$(MANDIR)/man8/sanlock.8 $(DESTDIR)$(MANDIR)/man8/wdmd.8 \
	  $(DESTDIR)$(SYSTEMDUNITDIR)/sanlock.service $(DESTDIR)$(SYSTEMDUNITDIR)/wdmd.service \
	  $(DESTDIR)$(BASHCOMPDIR)/sanlock $(DESTDIR)$(ZSHCOMPDIR)/_sanlock $(DESTDIR)$(FISHCOMPDIR)/sanlock.fish
	-rmdir $(DESTDIR)$(LIBEXECDIR)/gosanlock

# make install into a temporary tree, then check what it installed:
# systemd-analyze verify on the units, man -l on the pages, the bash
# completion loads, the configuration files are not overwritten.
install-check: build
	./scripts/check-install.sh

clean:
	rm -rf $(BIN) var

# Packages (docs/install.md): gosanlock .deb and .rpm, which replace the
# distribution's sanlock package in place, built with nfpm
# (docs/dependencies.md "Packages: nfpm") into $(DIST). VERSION=V sets
# the version (default: from git, scripts/pkg-version.sh). release adds
# the static binaries of $(RELEASE_ARCHES) and SHA256SUMS. package-test
# checks the packages (lintian, rpm -qp, rpmlint) and installs them in a
# Debian 13 root over Debian's sanlock (scripts/pkg-test.sh; needs root,
# the trixie tree of make trees and the Debian mirror).
.PHONY: deb rpm release package-check package-test
DIST           ?= dist
VERSION        ?=
RELEASE_ARCHES ?= amd64 arm64
PKGENV          = VERSION="$(VERSION)" DIST="$(DIST)" GO="$(GO)" RELEASE_ARCHES="$(RELEASE_ARCHES)"

deb:
	$(PKGENV) ./scripts/pkg-build.sh deb

rpm:
	$(PKGENV) ./scripts/pkg-build.sh rpm

release:
	$(PKGENV) ./scripts/pkg-release.sh

# Both packages from one build of the binaries.
package-check:
	$(PKGENV) ./scripts/pkg-build.sh deb rpm
	$(PKGENV) ./scripts/pkg-check.sh

package-test: package-check trees
	$(PKGENV) ./scripts/pkg-test.sh

# The QEMU lab (docs/lab.md): guests (two, or three) with Debian's kernel, an i6300esb
# watchdog and one shared disk hung per guest through QEMU's block layer,
# running our daemon and C sanlock 3.8.5 (bookworm tree) and 5.1.1 (sid
# tree). Prints "lab: SCENARIO DAEMON PASS|FAIL detail" lines, then
# "N passed, N failed"; results under var/lab. Needs root, qemu-system-x86
# and the Debian mirror for the first run (kernel, busybox and trees are
# then cached). LABFLAGS selects, e.g. LABFLAGS='-run reset -daemons ours'.
.PHONY: lab lab-short lab-prep
LABFLAGS ?=
LABCACHE ?= $(or $(GOSANLOCK_LAB_CACHE),/var/cache/gosanlock/lab)
LABRUN = ./$(BIN)/lab -repo . -trees $(TREES) -cache $(LABCACHE)
lab: lab-prep
	./scripts/lab-caw.sh $(LABCACHE) $(TREES)
	$(LABRUN) $(LABFLAGS)

# What every lab run needs: the bookworm tree (3.8.5), Debian's kernel and
# the lab's initramfs, and the lab's binaries (lab-sanlock-next: our
# sanlock built as the packages build it, the build the reexec scenarios
# upgrade to). caw-iscsi's modules and its
# sid-iscsi tree (scripts/lab-caw.sh) are made by make lab only.
lab-prep: deps build trees
	./scripts/lab-trees.sh $(TREES)
	./scripts/lab-kernel.sh $(LABCACHE)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/lab-agent ./lab/agent
	CGO_ENABLED=0 $(GO) build -o $(BIN)/lab-holder ./lab/holder
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/lab-sanlock-next ./cmd/sanlock
	$(GO) build -o $(BIN)/lab ./lab

# The lab's short form (5.5 minutes once cached), which CI runs after
# make test: the watchdog reset of a host whose holder hangs in the kernel,
# and lvmlockd, both on our daemon.
lab-short: lab-prep
	$(LABRUN) -run =reset-hung-holder,=lvmlockd -daemons ours
