# shardfeed — build, test and tooling. `make help` lists the targets.
#
# Every tool comes from `make tools` (hack/tools.sh) into the git-ignored bin/,
# linked to a per-user cache (~/.cache/shardfeed), so nothing is installed by
# hand and a second clone on the same machine reuses the cache.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN := $(ROOT)/bin
VENV := $(BIN)/venv
PYTHON := $(VENV)/bin/python

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/shardfeed/shardfeed/internal/version.version=$(VERSION) \
	-X github.com/shardfeed/shardfeed/internal/version.commit=$(COMMIT)
# GO_TAGS name what CGO_ENABLED=0 already means (Go's own resolver and user
# lookup), so the libjpeg (cgo) builds compile again only the few packages
# with C in them: 18 s after a portable build on 2 cores, not 58 s. A
# command's -tags replace GOFLAGS's, so each names GO_TAGS first.
GO_TAGS := netgo,osusergo
GO_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)'
# The video decoding's cgo build: FFmpeg's static libraries, LGPL and
# decode-only, that make tools builds (hack/ffmpeg.sh, bin/ffmpeg-lgpl).
FFMPEG_ENV := PKG_CONFIG_PATH=$(BIN)/ffmpeg-lgpl/lib/pkgconfig CGO_ENABLED=1
VIDEO_BUILD := $(FFMPEG_ENV) go build -trimpath -tags $(GO_TAGS),libjpeg,ffmpeg \
	-ldflags '$(LDFLAGS) -linkmode external -extldflags -static'

# The sidecar with libjpeg-turbo linked in (cgo, static, Debian's
# libjpeg62-turbo-dev): spec.decode's JPEGs decode about twice as fast.
LIBJPEG_BUILD := CGO_ENABLED=1 go build -trimpath -tags $(GO_TAGS),libjpeg \
	-ldflags '$(LDFLAGS) -linkmode external -extldflags -static'

# One build configuration for the Go tests, go vet, the binaries, the
# images and the release's amd64 build: static (no cgo) with trimmed paths.
# A cold run then compiles the dependencies once for all of them rather than
# once for each (the race and libjpeg passes turn cgo on where they need it).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip -trimpath -tags=$(GO_TAGS) $(filter-out -trimpath -tags=%,$(GOFLAGS)))

# The Go tests find etcd, kube-apiserver, kubectl and minio in bin/.
export KUBEBUILDER_ASSETS := $(BIN)
export SHARDFEED_BIN := $(BIN)
# Every JSON index a test writes is also encoded compact and read back,
# and must be the same index (internal/index.WriteForm).
export SHARDFEED_CHECK_COMPACT_INDEX := 1
export PATH := $(BIN):$(PATH)
# Helm keeps its cache and settings in the clone, not in the home directory.
export HELM_CACHE_HOME := $(ROOT)/.cache/helm
export HELM_CONFIG_HOME := $(ROOT)/.cache/helm/config
export HELM_DATA_HOME := $(ROOT)/.cache/helm/data

# Go test flags; e.g. `make test-go GOTEST_FLAGS='-run TestX -v'`.
GOTEST_FLAGS ?=
GO_TEST_TIMEOUT ?= 20m
# KEEP=1 leaves the demo's cluster running.
KEEP ?= 0

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: tools-go ## Generate the CRDs (config/crd, charts/shardfeed/templates/crds), the job kinds' markers and chart list (hack/jobkinds), RBAC and webhook configurations from the markers, and the references (docs/reference, the chart's README).
	go run ./hack/jobkinds
	$(BIN)/controller-gen rbac:roleName=manager crd webhook paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	hack/chart-crds.sh
	go run ./hack/crdref config/crd/bases/data.shardfeed.io_trainingdatasets.yaml > docs/reference/trainingdataset.md
	go run ./hack/chartdoc charts/shardfeed > charts/shardfeed/README.md

.PHONY: generate
generate: tools-go ## Generate the DeepCopy methods of the API types.
	$(BIN)/controller-gen object paths=./api/...

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w -s $$(git ls-files '*.go')

.PHONY: vet
vet: tools-video ## Run go vet, with the integration tests (and the cgo builds' libjpeg and FFmpeg files).
	go vet -tags $(GO_TAGS),integration,e2e,chaos ./...
	cd clients/go && go vet ./...
	CGO_ENABLED=1 go vet -tags $(GO_TAGS),integration,libjpeg ./sidecar/images/
	$(FFMPEG_ENV) go vet -tags $(GO_TAGS),ffmpeg ./sidecar/video/ ./sidecar/format/lerobot/

.PHONY: lint
lint: tools-go tools-python tools-debian tools-video ## Run golangci-lint (see .golangci.yml), gofmt, mypy --strict on the Python client, shellcheck on the scripts, helm lint, promtool on the chart's alert rules, check that no tracked file is over 1 MiB, and that the README's measured figures are its benchmark tables'.
	hack/check-file-sizes.sh
	python3 hack/bench/readme_figures.py --check
	shellcheck -x -S warning .ci/run $$(git ls-files '*.sh')
	cd clients/python && $(BIN)/venv-lint/bin/mypy --python-executable $(PYTHON) --cache-dir $(BIN)/mypy-cache src
	@out=$$(gofmt -l -s $$(git ls-files '*.go')); if [ -n "$$out" ]; then \
		echo "gofmt: these files need formatting (run make fmt):"; echo "$$out"; exit 1; fi
	$(BIN)/golangci-lint run ./...
	@# The libjpeg build's files (import "C") again with cgo on: the run above
	@# shares the tests' build configuration (no cgo), so its compiled packages.
	CGO_ENABLED=1 $(BIN)/golangci-lint run ./sidecar/images/
	$(FFMPEG_ENV) $(BIN)/golangci-lint run --build-tags ffmpeg ./sidecar/video/ ./sidecar/format/lerobot/
	cd clients/go && $(BIN)/golangci-lint run --config $(ROOT)/.golangci.yml ./...
	$(BIN)/helm lint --strict charts/shardfeed
	$(BIN)/promtool check rules charts/shardfeed/files/alerts.yaml

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated files differ from the committed ones.
	@git diff --exit-code -- config api charts docs/reference controllers/zz_generated.jobkinds.go || { echo "generated files are stale: run make manifests generate and commit"; exit 1; }

##@ Build

.PHONY: build
build: ## Build the shardfeed CLI, the kubectl plugin (kubectl-shardfeed) and the manager into bin/.
	$(GO_BUILD) -o $(BIN)/shardfeed ./cmd/shardfeed
	$(GO_BUILD) -o $(BIN)/kubectl-shardfeed ./cmd/kubectl-shardfeed
	$(GO_BUILD) -o $(BIN)/manager ./cmd/manager

.PHONY: build-video
build-video: tools-debian tools-video ## Build bin/shardfeed-video: the CLI and sidecar, static, with libjpeg-turbo and FFmpeg's decoders (H.264, HEVC, AV1 through dav1d; LGPL, hack/ffmpeg.sh) for a lerobot stream's cameras (cgo).
	$(VIDEO_BUILD) -o $(BIN)/shardfeed-video ./cmd/shardfeed

.PHONY: build-libjpeg
build-libjpeg: tools-debian ## Build bin/shardfeed-libjpeg: the CLI and sidecar, static, with libjpeg-turbo for decoding images (cgo; the image's /shardfeed).
	$(LIBJPEG_BUILD) -o $(BIN)/shardfeed-libjpeg ./cmd/shardfeed

# The platform wheel of the Python client with the static shardfeed binary
# inside (as ruff and uv ship theirs), built from a staging copy so the
# source tree never holds a binary.
WHEEL_DIR := $(BIN)/wheel

# It needs Go and python3 (3.9+) only: the build backend goes into a small
# venv of this clone (bin/venv-build, hack/requirements-build.txt), never
# the tests' venvs or the shared tools cache and its lock.
BUILD_VENV := $(BIN)/venv-build

$(BUILD_VENV)/.complete: hack/requirements-build.txt
	@command -v go >/dev/null || { echo "make wheel needs Go $$(sed -n 's/^go //p' go.mod) or later on PATH (https://go.dev/dl/)"; exit 1; }
	@command -v python3 >/dev/null || { echo "make wheel needs python3 (3.9 or later)"; exit 1; }
	@echo "creating the build venv $(BUILD_VENV) (setuptools and wheel only)"
	@rm -rf $(BUILD_VENV) && python3 -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r hack/requirements-build.txt
	@touch $@

# The wheel's binary is the image's sidecar's build (hack/build-sidecar.sh):
# libjpeg-turbo linked in where this machine can (a C compiler and Debian's
# libjpeg62-turbo-dev), FFmpeg's decoders where make tools-video built them;
# what it cannot link is left out with a line saying so (SHARDFEED_JPEG=go
# and SHARDFEED_VIDEO=none leave them out: the portable binary).
.PHONY: wheel
wheel: $(BUILD_VENV)/.complete ## Build the Python client's platform wheel, bundling the static shardfeed binary (with libjpeg-turbo and FFmpeg where gcc, libjpeg62-turbo-dev and make tools-video's FFmpeg are here), into bin/wheel/ (needs Go and python3 only).
	@rm -rf $(BIN)/wheel-build $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	@echo "make wheel: 1/2 the static shardfeed binary: Go compiles its dependencies first (an empty Go cache: 4 to 5 minutes on 2 idle cores; after make build or the tests: about 20 s; cached: seconds)"
	cp -r clients/python $(BIN)/wheel-build
	rm -rf $(BIN)/wheel-build/build $(BIN)/wheel-build/src/*.egg-info
	LDFLAGS='$(LDFLAGS)' hack/build-sidecar.sh --best-effort --licenses $(BIN)/wheel-build/src/shardfeed/_bin/licenses \
		$(BIN)/wheel-build/src/shardfeed/_bin/shardfeed
	@echo "make wheel: 2/2 the wheel around it (pip, a few seconds)"
	SHARDFEED_VERSION=$(VERSION) $(BUILD_VENV)/bin/python -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w $(WHEEL_DIR) $(BIN)/wheel-build
	@rm -rf $(BIN)/wheel-build
	@ls $(WHEEL_DIR)/*.whl

.PHONY: dist test-dist
# test-dist signs make dist's build with a key made for the run, outside
# the repository, and checks with its public half (a release's key never
# touches the tree). It shares the one build with test-e2e: both depend on
# dist, which make runs once.
test-dist: tools-python dist ## Sign the release (make dist) with a throwaway key and check it as its users would: checksums and their signature, the provenance, a tampered file refused, one version everywhere, the wheel in a fresh venv, the kubectl plugin and its krew manifest, the image index and the chart's digest, the SBOM (hack/check_dist.py); then the arm64 sidecar's video decoding (make test-arm64).
	@key=$$(mktemp -d) && trap 'rm -rf "$$key"' EXIT && \
	openssl genpkey -algorithm ed25519 -out "$$key/release.pem" 2>/dev/null && openssl pkey -in "$$key/release.pem" -pubout -out "$$key/release.pub" && \
	SHARDFEED_SIGNING_KEY="$$key/release.pem" hack/sign-dist.sh dist/latest && \
	SHARDFEED_VERIFY_KEY="$$key/release.pub" $(PYTHON) hack/check_dist.py dist/latest
	hack/test-arm64.sh

.PHONY: test-arm64
test-arm64: tools-debian tools-video tools-lerobot ## Build the video decoding's and the LeRobot reader's tests for arm64 as the arm64 sidecar is built (Debian's cross compiler, FFmpeg cross-built by make tools-video) and run them under qemu-user (part of test-dist; hack/test-arm64.sh).
	hack/test-arm64.sh
dist: tools-go tools-debian tools-video $(BUILD_VENV)/.complete ## Build a release into dist/<version>/: the wheels (x86_64, aarch64), the kubectl plugin (amd64, arm64) and its krew manifest, the image as OCI archives (amd64, arm64, and their index), the chart pinned to it, the SBOM, the provenance, SHA256SUMS, signed with SHARDFEED_SIGNING_KEY if set (docs/releasing.md; DIST_VERSION=1.2.3 names it).
	hack/dist.sh

##@ Test

# Seconds make test may take after the tools are built (hack/timed.sh fails
# past it by more than its noise; docs/development.md, "Test time"): 25
# minutes, the project's budget (issue #88). Warm runs in clean clones took
# 1452 and 1489 s on 2026-12-03; a feature that adds minutes pays for them
# or raises this with the reason, in the same commit. Raised to 1560 on
# 2026-12-05: the end-to-end test's LeRobot story (a video stream through
# a killed sidecar and a rescale, issue #92's acceptance: about 25 s on the
# stories' path, which bounds the side-by-side group) and the video
# decoding's cgo passes; a clean-clone run took 1662 s. To be paid back.
# Raised to 1620 on 2026-12-06: issue #93's oracle tests (pylance's blob
# tables, LeRobot's Lance layout converted by lerobot-lancedb and read by
# its LanceDBDataset, about 40 s of the Go tests' CPU); two clean-clone runs
# took 1685 and 1755 s, the end-to-end stories alone 349 and 406 s. To be
# paid back with #92's. Raised to 1700 on 2026-12-06 (session 76): #94's
# tests of the hand-over in a dataset of the user's in workers and of the
# node agent's fills (about 30 s) were not paid for; clean-clone runs took
# 1702 s and, with no test changed since, 1868 s (test-go 651 → 683 s,
# the Python tests and stories 1001 → 1124 s: this host's hour). To be paid
# back with #92's; the target stays under 1500 (25 minutes).
TEST_BUDGET ?= 1700
.PHONY: test
# The Python tests, the release's check and the end-to-end stories run side
# by side (one quoted group): the stories mostly wait on the cluster's pods
# and pytest on its subprocesses, and each set starts servers of its own on
# free ports; one after another they took 1240 s, side by side 772 s.
test: ## Run every test (the CI entry point): tools, lint, generated files, Go and Python tests, the end-to-end test and the short chaos run.
	@hack/check-clean.sh snapshot
	TEST_BUDGET=$(TEST_BUDGET) hack/timed.sh tools lint vet verify-generated test-golden test-go "test-python test-dist test-e2e"
	@hack/check-clean.sh verify

# The recorded oracles (sidecar/tokenizer/testdata, tables.go, each
# format's testdata/golden): what the pinned tokenizers, transformers and
# each format's own project do, read by the unit tests without Python.
.PHONY: golden test-golden
golden: tools-python tools-lerobot ## Re-record the oracles the unit tests read: the tokenizer's Unicode tables, its conformance matrix, the chat templates' record and each format's testdata/golden (pinned writers and readers; hack/golden.sh).
	hack/golden.sh record
test-golden: tools-python tools-lerobot ## Fail when the pinned oracles no longer give what the unit tests read: re-record into a temporary folder, compare, and run the golden tests on the fresh inputs (hack/golden.sh; a few minutes the first time).
	hack/golden.sh check

.PHONY: test-mutants
test-mutants: ## Prove the parsers' unit tests bite: break one decoding step of each parser at a time and fail unless its package's unit tests fail (hack/mutants; Go only, about a minute).
	go run ./hack/mutants

.PHONY: test-unit
test-unit: ## Run the Go unit tests (no servers).
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) $(GOTEST_FLAGS) ./...
	cd clients/go && CGO_ENABLED=1 go test -count=1 -race $(GOTEST_FLAGS) ./...

.PHONY: test-integration
test-integration: tools-go tools-kube tools-minio tools-debian ## Run the Go integration tests (real kube-apiserver, etcd, MinIO).
	go test -count=1 -tags $(GO_TAGS),integration -timeout $(GO_TEST_TIMEOUT) -run Integration $(GOTEST_FLAGS) ./...

# test-go runs the unit and the integration tests in one pass.
.PHONY: test-go
test-go: tools-go tools-kube tools-minio tools-debian tools-video tools-lerobot
	go test -count=1 -tags $(GO_TAGS),integration -timeout $(GO_TEST_TIMEOUT) $(GOTEST_FLAGS) ./...
	@echo "test-go: the Go client, a module of its own (clients/go)"
	cd clients/go && CGO_ENABLED=1 go test -count=1 -race $(GOTEST_FLAGS) ./...
	@echo "test-go: the data plane, the stores and the job's progress again, under the race detector (their unit tests)"
	@# The heap bounds (TestHostileBodiesStayBounded) were measured in the pass above: the race
	@# detector's instrumentation changes what a heap holds (sync.Pool keeps nothing under it).
	@# TestIndexingReadsAnObjectsTailOnce counts one goroutine's reads of 5000 row groups:
	@# 1 s in the pass above, 70 s under the detector, with no concurrency to check.
	@# The parsers' recorded matrices decode on one goroutine a file (their concurrent use has tests of
	@# its own, TestOne*FromManyGoroutines) and the linear-time checks measure time: 70 s under the
	@# detector, nothing to find there.
	CGO_ENABLED=1 go test -count=1 -race -skip 'TestHostileBodiesStayBounded|TestIndexingReadsAnObjectsTailOnce|TestConformanceMatrix|TestChatConformance|TestPylanceFilesMutated|TestPylanceTableFilesMutated|IsLinearIn' $(GOTEST_FLAGS) ./sidecar/... ./internal/store/... ./internal/progress/...
	@echo "test-go: the image decoding again, with libjpeg-turbo (the cgo build)"
	@# The flags of the libjpeg build (LIBJPEG_BUILD), whose compiled packages it shares.
	CGO_ENABLED=1 go test -count=1 -tags $(GO_TAGS),integration,libjpeg $(GOTEST_FLAGS) ./sidecar/images/ ./sidecar/pipeline/
	@echo "test-go: the video decoding, with FFmpeg linked in (the cgo build; hack/ffmpeg.sh)"
	$(FFMPEG_ENV) go test -count=1 -tags $(GO_TAGS),ffmpeg $(GOTEST_FLAGS) ./sidecar/video/ ./sidecar/format/lerobot/
	$(FFMPEG_ENV) go test -count=1 -tags $(GO_TAGS),ffmpeg -run 'TestADamagedVideoIsACorruptShard|TestLeRobotFrames' $(GOTEST_FLAGS) ./sidecar/daemon/

.PHONY: test-python
test-python: tools build ## Run the Python tests with pytest (real MinIO, kube-apiserver, pyarrow, torch).
	$(PYTHON) -m pytest -q --durations=15 test/python

# The scale harness's full scenario (test/scale): 1000 KWOK nodes, 100
# datasets in 20 namespaces, 17 536 pods in waves, 20 000 unrelated
# ConfigMaps and 2 000 unrelated Jobs; its figures go to bin/scale.md
# (docs/benchmarks.md, "Control plane at a cluster's scale"), and a
# 1024-pod job's data plane to bin/scale-dataplane.md ("The data plane at a
# cluster's scale"). `make test` runs the short ones.
.PHONY: test-scale
test-scale: tools-go tools-kube tools-minio tools-debian ## Run the control plane at a GPU cluster's scale on KWOK's simulated nodes and size a 1024-pod job's data plane with shardfeed simulate over 1e7 shards, and start its sidecars over that index on MinIO (about 16 min); figures in bin/scale.md, bin/scale-dataplane.md and bin/scale-sidecar.md.
	SHARDFEED_SCALE=full SCALE_REPORT=$(BIN)/scale.md SCALE_DATAPLANE_REPORT=$(BIN)/scale-dataplane.md SCALE_SIDECAR_REPORT=$(BIN)/scale-sidecar.md \
		go test -count=1 -tags $(GO_TAGS),integration -timeout 60m -run 'TestIntegrationScale$$|TestIntegrationDataPlane$$|TestIntegrationSidecarStartsFromAnIndexInParts$$' -v ./test/scale/ 2>&1 | \
		grep --line-buffered -v '^[IWE][0-9]\{4\} ' | grep --line-buffered -v '"level":"info"'
	@echo "test-scale: figures in $(BIN)/scale.md, $(BIN)/scale-dataplane.md and $(BIN)/scale-sidecar.md"

.PHONY: test-listing
test-listing: tools-go tools-kube tools-minio tools-debian ## Index a stream of a million Parquet objects on MinIO by listing it and from an inventory, then 1e4 objects through the latency proxy (30 ms a request) at --concurrency 1 to 256 and in parts (about 40 min; most of it writing the objects); SHARDFEED_LATENCY_OBJECTS=1000000 SHARDFEED_LATENCY_CONCURRENCY=64,256 SHARDFEED_LATENCY_PARTS=4x64 for the 1e6 rows of docs/benchmarks.md (about 70 min more); figures in bin/scale-listing.md.
	rm -f $(BIN)/scale-listing.md
	SHARDFEED_LISTING=full SCALE_LISTING_REPORT=$(BIN)/scale-listing.md \
		go test -count=1 -tags $(GO_TAGS),integration -timeout 180m -run 'TestIntegrationIndexesAStreamOfManyObjects$$|TestIntegrationIndexesThroughAStoresLatency$$' -v ./test/scale/ 2>&1 | \
		grep --line-buffered -v '^[IWE][0-9]\{4\} ' | grep --line-buffered -v '"level":"info"'
	@echo "test-listing: figures in $(BIN)/scale-listing.md"

# Runs of each benchmark (docs/benchmarks.md reports their median and
# min–max), the size of the loaders' data sets (1: about 1 GB each; full: 4)
# and the seconds a loader measurement reads after its first batch, at most
# (a peer's: long enough for its steady rate).
BENCH_RUNS ?= 3
BENCH_SCALE ?= 1
BENCH_TIME_BOX ?= 3
BENCH_PEER_TIME_BOX ?= 8
BENCH_OUT := $(BIN)/bench
# The packages with a benchmark: go test ./... linked all hundred test
# binaries to run a dozen's benchmarks (9 of the step's 19 minutes).
BENCH_GO_PKGS = $(shell git grep -l '^func Benchmark' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')

.PHONY: bench
bench: tools-go tools-kube tools-minio tools-debian tools-python tools-lerobot build build-libjpeg build-video ## Run every benchmark and the peers side by side; rewrite docs/benchmarks.md, its plots and the README's figures (72–79 minutes on 2 cores with the data sets written, the loaders 42–47 of them; the first run also writes the data sets).
	@mkdir -p $(BENCH_OUT)
	@echo "bench: Go benchmarks ($(BENCH_RUNS) runs each) → $(BENCH_OUT)/go.txt"
	go test -tags $(GO_TAGS),integration -run '^$$' -bench . -benchmem -count $(BENCH_RUNS) -timeout 30m $(BENCH_GO_PKGS) | tee $(BENCH_OUT)/go.txt
	CGO_ENABLED=1 go test -tags $(GO_TAGS),libjpeg -run '^$$' -bench DecodeResizeCrop -benchmem -count $(BENCH_RUNS) ./sidecar/images/ | \
		sed 's/^BenchmarkDecodeResizeCrop/BenchmarkDecodeResizeCropLibjpeg/' | tee -a $(BENCH_OUT)/go.txt
	@echo "bench: loaders into PyTorch, shardfeed and its peers → $(BENCH_OUT)/loaders.json"
	BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE=$(BENCH_SCALE) BENCH_TIME_BOX=$(BENCH_TIME_BOX) BENCH_PEER_TIME_BOX=$(BENCH_PEER_TIME_BOX) $(PYTHON) hack/bench/loaders.py --out $(BENCH_OUT)/loaders.json
	@echo "bench: packing padding, shardfeed against Grain and LanceDB, and across shards beside best-fit decreasing → $(BENCH_OUT)/packing.json"
	$(BIN)/venv-oracle/bin/python hack/bench/packing.py --out $(BENCH_OUT)/packing.json
	@echo "bench: WebDataset and Megatron, shardfeed and the formats' own loaders → $(BENCH_OUT)/formats.json"
	BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE=$(BENCH_SCALE) BENCH_TIME_BOX=$(BENCH_TIME_BOX) $(PYTHON) hack/bench/formats.py --out $(BENCH_OUT)/formats.json
	@echo "bench: the Go tokenizer beside tokenizers → $(BENCH_OUT)/tokenize.json"
	$(BIN)/venv-tok/bin/python hack/bench/tokenizer_speed.py --out $(BENCH_OUT)/tokenize.json
	@echo "bench: raw JSON Lines to packed input_ids, the sidecar beside datasets' streaming map → $(BENCH_OUT)/rawtext.json"
	$(BIN)/venv-oracle/bin/python hack/bench/rawtext.py --runs $(BENCH_RUNS) --out $(BENCH_OUT)/rawtext.json
	@echo "bench: a LeRobot dataset's frames, the sidecar's FFmpeg build beside LeRobotDataset (pyav, torchcodec) → $(BENCH_OUT)/video.json"
	BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE=$(BENCH_SCALE) BENCH_TIME_BOX=$(BENCH_TIME_BOX) $(PYTHON) hack/bench/video.py --out $(BENCH_OUT)/video.json
	@echo "bench: egress of the peers over MinIO → $(BENCH_OUT)/egress.json"
	hack/minio.sh --bucket bench -- $(BIN)/venv-oracle/bin/python hack/bench/egress.py --out $(BENCH_OUT)/egress.json
	@echo "bench: requests and time an epoch through the latency proxy (30 ms a request), shardfeed beside mosaicml-streaming and LitData → $(BENCH_OUT)/requests.json"
	go build -o $(BIN)/latencyproxy ./hack/latencyproxy
	hack/minio.sh --bucket bench -- $(BIN)/venv-oracle/bin/python hack/bench/store_requests.py --proxy $(BIN)/latencyproxy --runs $(BENCH_RUNS) --out $(BENCH_OUT)/requests.json
	$(BIN)/venv-oracle/bin/python hack/bench/report.py --go $(BENCH_OUT)/go.txt --loaders $(BENCH_OUT)/loaders.json \
		--egress $(BENCH_OUT)/egress.json --packing $(BENCH_OUT)/packing.json --formats $(BENCH_OUT)/formats.json --tokenize $(BENCH_OUT)/tokenize.json --rawtext $(BENCH_OUT)/rawtext.json --video $(BENCH_OUT)/video.json --requests $(BENCH_OUT)/requests.json --command "make bench BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE=$(BENCH_SCALE) BENCH_TIME_BOX=$(BENCH_TIME_BOX) BENCH_PEER_TIME_BOX=$(BENCH_PEER_TIME_BOX)"
	@echo "bench: docs/benchmarks.md, docs/img/*.png and the README's figures rewritten"

.PHONY: bench-peers
bench-peers: tools-python build ## Sweep each peer's throughput knobs (hack/bench/peer_knobs.py) and write the fastest to hack/bench/peer-settings.json, which make bench runs the peers with (about 45 min).
	$(PYTHON) hack/bench/peer_sweep.py

# Time each fuzz target runs for in make fuzz.
FUZZ_TIME ?= 60s

.PHONY: fuzz
fuzz: tools-go ## Fuzz every parser (go test -fuzz, FUZZ_TIME each); a table of executions and findings in bin/fuzz/results.md.
	FUZZ_TIME=$(FUZZ_TIME) hack/fuzz.sh

##@ Environments

.PHONY: control-plane
control-plane: tools-kube tools-debian ## Run etcd + kube-apiserver on loopback until Ctrl-C.
	hack/control-plane.sh

.PHONY: minio
minio: tools-minio ## Run a MinIO server with a bucket on loopback until Ctrl-C.
	hack/minio.sh

##@ Tools

.PHONY: tools
tools: ## Install every pinned tool into bin/ (cached in ~/.cache/shardfeed).
	hack/tools.sh all

.PHONY: tools-go tools-kube tools-minio tools-catalogs tools-debian tools-python tools-lerobot tools-video
tools-go: ; @hack/tools.sh go
tools-kube: ; @hack/tools.sh kube
tools-minio: ; @hack/tools.sh minio
tools-catalogs: ; @hack/tools.sh catalogs
tools-debian: ; @hack/tools.sh debian
tools-python: ; @hack/tools.sh python
tools-video: ; @hack/tools.sh video
tools-lerobot: ; @hack/tools.sh lerobot

##@ Local cluster

.PHONY: cluster-up cluster-down images controllers
cluster-up: tools ## Start a real single-node Kubernetes in .cache/cluster (root; see hack/cluster-up.sh).
	hack/cluster-up.sh
cluster-down: ## Stop the local cluster and remove everything it made.
	hack/cluster-down.sh
images: ## Build the OCI image archives (manager+sidecar, e2e trainer, pause) into .cache/images and import them into the cluster if up; IMAGE_REPOSITORY and IMAGE_TAG name the shardfeed image for your registry.
	hack/images.sh
controllers: tools ## Install JobSet, Kubeflow Trainer v2, the Kubeflow training operator and Kueue into the local cluster, built from their modules (hack/controllers.sh; versions in hack/versions.sh).
	hack/controllers.sh

.PHONY: test-e2e demo
test-e2e: tools build dist ## Run the end-to-end test and the short chaos run on the local cluster with make dist's image and chart (brings it up and down; root).
	CHAOS=short USE_DIST=1 hack/e2e.sh

.PHONY: test-chaos
test-chaos: tools build ## Run every fault-injection scenario (test/chaos) on the local cluster (CHAOS_SEED=n replays a run; root).
	CHAOS=full CHAOS_TABLE=$(BIN)/chaos.md hack/e2e.sh
demo: tools build ## The whole story on a local cluster, narrated: Helm, a dataset, a Job, a kill, a rescale, the exactly-once verdict (KEEP=1 keeps the cluster).
	DEMO=1 KEEP_CLUSTER=$(KEEP) LOG_PREFIX=demo hack/e2e.sh

.PHONY: clean
clean: ## Remove build outputs and the links in bin/ (the tool cache stays); stops the local cluster first.
	@[ ! -d .cache/cluster ] || hack/cluster-down.sh
	rm -rf $(BIN) .cache
