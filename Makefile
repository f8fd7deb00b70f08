# Everything a fresh Debian/Ubuntu machine needs is installed by these targets
# (apt packages through scripts/deps.sh, the guest kernel through guestfs/kernel/build.sh).
GO       ?= go
BIN      := bin
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export CGO_ENABLED ?= 0
# Go stamps the VCS revision only when .git is a directory; in a git worktree or a
# release tarball these carry it instead (crackbox --version, /health, run records).
VERSION  ?= $(shell git describe --tags --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS  := -X github.com/crackbox/crackbox/pkg/buildinfo.version=$(VERSION) -X github.com/crackbox/crackbox/pkg/buildinfo.revision=$(REVISION)

.PHONY: all build deps kernel debian-kernel guest-init demo test test-fresh vet bench clean

all: build

deps:
	$(SUDO) scripts/deps.sh

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

demo: deps kernel build
	scripts/demo.sh

vet:
	$(GO) vet ./...

# First-run paths (missing run dir base, empty cache, busy ports) in
# directories no earlier run on this machine has touched.
test-fresh: deps kernel guest-init
	scripts/test-fresh.sh

# The VM tests find the kernel and guest-init through these variables.
test: deps kernel debian-kernel guest-init vet test-fresh
	CRACKBOX_KERNEL=$$(guestfs/kernel/build.sh 2>/dev/null | tail -1) \
	CRACKBOX_DEBIAN_KERNEL=$$(guestfs/kernel/debian.sh 2>/dev/null | tail -1) \
	CRACKBOX_GUEST_INIT=$(CURDIR)/$(BIN)/guest-init \
	CGO_ENABLED=1 $(GO) test -race -timeout 60m ./...

bench: deps kernel build
	scripts/bench.sh

clean:
	rm -rf $(BIN)
