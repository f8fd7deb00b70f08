# Everything a fresh Debian/Ubuntu machine needs is installed by these targets
# (apt packages through scripts/deps.sh, the guest kernel through guestfs/kernel/build.sh).
GO       ?= go
BIN      := bin
PREFIX   ?= /usr/local
DESTDIR  ?=
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export CGO_ENABLED ?= 0
# Go stamps the VCS revision only when .git is a directory; in a git worktree or a
# release tarball these carry it instead (crackbox --version, /health, run records).
VERSION  ?= $(shell git describe --tags --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS  := -X github.com/crackbox/crackbox/internal/buildinfo.version=$(VERSION) -X github.com/crackbox/crackbox/internal/buildinfo.revision=$(REVISION)

.PHONY: all build deps test-deps kernel debian-kernel guest-init demo install dist test test-fresh test-install test-units vet bench clean

all: build

# deps is what running crackbox needs (QEMU, the kernel build's tools, nftables);
# test-deps adds what the test suite drives (Chromium, PostgreSQL, Claude Code).
deps:
	$(SUDO) scripts/deps.sh

test-deps: deps
	$(SUDO) scripts/deps.sh test

build: guest-init
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/crackbox ./cmd/crackbox
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/arizuko ./cmd/arizuko

# guest-init is PID 1 in every guest: static, no cgo.
guest-init:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/guest-init ./guestfs/init

kernel:
	guestfs/kernel/build.sh

# The Debian cloud kernel, unpacked into the cache with its virtio modules: the
# supported fallback (crackbox run --kernel PATH), tested by make test.
debian-kernel:
	guestfs/kernel/debian.sh

# Binaries, guest-init and the built kernel under $(PREFIX)/lib/crackbox, the kernel
# build script, example configs, systemd units, completions and man pages.
install: build
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) scripts/install.sh

# A relocatable release tarball: the install tree (bin/, lib/, share/) in one directory;
# unpack it anywhere and run bin/crackbox setup. Its systemd units expect /usr/local/bin.
dist: build
	rm -rf dist/stage && mkdir -p dist/stage
	PREFIX=/crackbox-$(or $(VERSION),dev)-linux-amd64 DESTDIR=$(CURDIR)/dist/stage UNIT_BINDIR=/usr/local/bin scripts/install.sh
	tar -C dist/stage -czf dist/crackbox-$(or $(VERSION),dev)-linux-amd64.tar.gz crackbox-$(or $(VERSION),dev)-linux-amd64
	rm -rf dist/stage
	@echo dist/crackbox-$(or $(VERSION),dev)-linux-amd64.tar.gz

demo: deps kernel build
	scripts/demo.sh

vet:
	$(GO) vet ./...

# First-run paths (missing run dir base, empty cache, busy ports) in
# directories no earlier run on this machine has touched.
test-fresh: test-deps kernel guest-init
	scripts/test-fresh.sh

# Install into a temporary prefix and run crackbox and arizuko serve from it with
# no checkout, no Go toolchain on PATH and an empty HOME.
test-install: test-deps kernel build
	CRACKBOX_KERNEL=$$(guestfs/kernel/build.sh 2>/dev/null | tail -1) scripts/test-install.sh

# The systemd units load (systemd-analyze verify) and keep their sandboxing.
test-units: test-deps build
	scripts/test-units.sh

# The VM tests find the kernel and guest-init through these variables. Under
# CRACKBOX_TEST_REQUIRE=all a missing prerequisite fails its test instead of skipping it;
# testsum ends with "N passed, N failed, N skipped" and fails the run on any skip.
test: test-deps kernel debian-kernel guest-init vet test-fresh test-install test-units
	$(GO) build -o $(BIN)/testsum ./internal/testsum
	CRACKBOX_TEST_REQUIRE=all GO=$(GO) \
	CRACKBOX_KERNEL=$$(guestfs/kernel/build.sh 2>/dev/null | tail -1) \
	CRACKBOX_DEBIAN_KERNEL=$$(guestfs/kernel/debian.sh 2>/dev/null | tail -1) \
	CRACKBOX_GUEST_INIT=$(CURDIR)/$(BIN)/guest-init \
	CGO_ENABLED=1 $(BIN)/testsum -race -timeout 60m ./...

bench: deps kernel build
	scripts/bench.sh

clean:
	rm -rf $(BIN) dist
