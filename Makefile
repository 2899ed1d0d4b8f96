# Gantry — build, run and test. See README.md.
GO       ?= go
ARCH     ?=
FUZZTIME ?= 30s
PKGS     := ./...
# The version stamped into the binary (gantry -version, /info) and the image name.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X gantry/appliance.Version=$(VERSION)

GOARCH_arm64 := arm64
GOARCH_armv7 := arm
GOARCH_amd64 := amd64

.PHONY: build run test cross test32 lint fuzz bench bench-cluster clean boot-smoke console-check console-editor console-screenshots chaos
.PHONY: image bundle image-test

ARCHS    := arm64 armv7 amd64
# Packages whose tests also run as a 32-bit (386) build: pure code where an
# int that assumes 64 bits overflows.
PKGS32   := ./broker/packet/... ./broker/topic/... ./broker/auth/ ./broker/store/... \
            ./lot/... ./cluster/partition/... ./cluster/raftstore/ ./cluster/signing/ ./appliance/config/

build:
ifeq ($(ARCH),)
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gantry ./appliance/cmd/gantry
else
	@test -n "$(GOARCH_$(ARCH))" || { echo "ARCH=$(ARCH): want arm64, armv7 or amd64"; exit 2; }
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_$(ARCH)) GOARM=$(if $(filter armv7,$(ARCH)),7,) \
		$(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o bin/gantry-$(ARCH) ./appliance/cmd/gantry
endif

# One node on the embedded development defaults: data in ./data,
# anonymous clients allowed from loopback only.
run: build
	./bin/gantry -dev

# Everything under the race detector, then the tests that count
# allocations or write calls, or depend on how goroutines are scheduled,
# again without it (the race detector makes sync.Pool drop items and
# changes how goroutines interleave).
test: build cross test32 boot-smoke console-check
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -run 'Alloc|IdleConnectionMemory|FewWrites|ArrivalOrder' ./broker/...

# Every shipped architecture builds, and vet passes for the 32-bit ones
# (armv7 and 386 share int's 32 bits): a 32-bit break fails make test.
cross:
	@set -e; for a in $(ARCHS); do $(MAKE) --no-print-directory build ARCH=$$a; done
	GOOS=linux GOARCH=arm GOARM=7 $(GO) vet $(PKGS)
	GOOS=linux GOARCH=386 $(GO) vet $(PKGS)

# The appliance's per-commit boot checks (build/boot, about a minute on 2
# cores): the cross-built binaries answer under qemu-user, and each arch
# boots a tiny kernel + initramfs under qemu-system, checked from the host
# over MQTT and /health. Needs the qemu, mmdebstrap and curl that .ci/run installs.
boot-smoke: cross
	GANTRY_BOOT=tiny GANTRY_BIN=$(CURDIR)/bin GANTRY_VERSION=$(VERSION) \
		$(GO) test -count=1 -timeout 6m -run 'TestQemuUser|TestTinyBoot' ./build/boot/

# The appliance image (docs/appliance.md): build/out/gantry-$(VERSION)-$(ARCH).img.zst
# and its .sha256. UPDATE_PUBKEY is the PEM public key the image trusts for
# update bundles; make bundle signs with SIGNING_KEY (neither in the repository).
image:
	@test -n "$(GOARCH_$(ARCH))" || { echo "ARCH=$(ARCH): want arm64, armv7 or amd64"; exit 2; }
	$(MAKE) --no-print-directory build ARCH=$(ARCH)
	build/image/image.sh $(ARCH) $(VERSION) bin/gantry-$(ARCH) $(UPDATE_PUBKEY)

bundle:
	@test -n "$(SIGNING_KEY)" || { echo "make bundle ARCH=... SIGNING_KEY=key.pem (after make image)"; exit 2; }
	build/image/mkbundle.sh $(ARCH) $(VERSION) build/_work/$(ARCH)/root.ext4 $(SIGNING_KEY) build/out/gantry-$(VERSION)-$(ARCH).bundle

# Boots the image of ARCH (amd64 by default) under its UEFI firmware (half
# an hour to an hour on 2 cores): a working broker and console, a good
# update blessed, a broken one rolled back, the watchdog restarting a frozen
# broker. IMAGE_TEST=boot: the factory boot only. Builds the image with a
# throwaway key. GANTRY_IMAGE_WORK=DIR keeps every boot's console and the
# disk in DIR/ARCH (otherwise a temporary directory the test removes).
image-test:
	build/image/image-test.sh $(VERSION) $(or $(ARCH),amd64) $(IMAGE_TEST)

# The pure packages' tests as a 32-bit program (runs natively on x86-64).
test32:
	GOARCH=386 $(GO) test -count=1 $(PKGS32)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# Short runs of every fuzz target (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for t in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t"; $(GO) test -run=NONE -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

# Go micro benchmarks, then Gantry against Mosquitto (build/bench -quick,
# about 9.5 minutes on 2 cores); rewrites the bench section of
# docs/BENCHMARKS.md and docs/benchmarks.png. Needs mosquitto.
bench: build
	$(GO) test -run=NONE -bench=. -benchmem ./broker/... ./lot/rules/ ./lot/runtime/ ./cluster/dataplane/
	$(GO) run ./build/bench -quick -gantry bin/gantry -mosquitto /usr/sbin/mosquitto -out docs/BENCHMARKS.md -chart docs/benchmarks.png

# The web console (webui/): the committed *_templ.go must be what
# templ generate writes from the .templ files, and the .templ files
# formatted. make test runs it.
TEMPL := $(GO) tool templ
console-check:
	@$(TEMPL) generate -check -path webui >/dev/null 2>&1 || { echo "webui: *_templ.go are stale: run $(TEMPL) generate -path webui and commit them"; exit 1; }
	@$(TEMPL) fmt -fail webui >/dev/null 2>&1 || { echo "webui: .templ files need formatting: run $(TEMPL) fmt webui"; exit 1; }

# Rebuilds the console's CodeMirror bundle (webui/static/lot-editor.min.js,
# committed) from webui/editor; needs npm. make test and make run do not.
console-editor:
	cd webui/editor && npm ci --no-audit --no-fund && npx esbuild src/lot-editor.js --bundle --minify \
		--format=iife --target=es2020 --outfile=../static/lot-editor.min.js

# Screenshots of every console page for docs/console.md, taken by the
# browser tests (needs chromium).
console-screenshots:
	mkdir -p docs/screenshots
	GANTRY_SCREENSHOTS=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run 'Browser' ./webui/

# The data plane's cost: the same closed-loop load against one node and
# across three clustered loopback nodes (publishers on one, subscribers on
# another), side by side. Prints a table; about 40 s.
bench-cluster: build
	$(GO) run ./build/bench/crossnode -gantry bin/gantry
	$(GO) run ./build/bench/crossnode -gantry bin/gantry -quorum

# The fault-injection suite (build/chaos, docs/cluster.md#fault-injection):
# 3 and 5 real nodes under QoS 1 and 2 load, every fault of the matrix in
# turn for CHAOS_DURATION (each size at least once), then the table. As
# root (network namespaces, a tmpfs) for the partitions and the full disk.
# make test runs one kill, one pause and one partition (TestChaos*).
CHAOS_DURATION ?= 10m
chaos: build
	CHAOS_DURATION=$(CHAOS_DURATION) $(GO) run ./build/chaos -gantry bin/gantry

clean:
	rm -rf bin

# Device connectors (drivers/): 50 tags at 100 ms on every protocol at once
# for SOAK_DURATION (10m), a device restarting every 20 s; fails when
# goroutines, file descriptors or heap grow. Needs the peers .ci/run installs.
.PHONY: soak-drivers bench-drivers
SOAK_DURATION ?= 10m
soak-drivers:
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test -tags soak -count=1 -timeout 60m -run 'TestSoak$$' -v ./drivers/engine/

# Tags per second per protocol against the local peers (100 tags, EVERY 10 ms).
bench-drivers:
	$(GO) test -tags soak -count=1 -timeout 20m -run 'TestBenchTags$$' -v ./drivers/engine/
