#!/usr/bin/env bash
# images.sh builds the images the local cluster runs, as OCI image archives
# in .cache/images, without a container engine or a registry, and imports
# them into the cluster's containerd when it is up:
#   registry.local/shardfeed:e2e          /manager and /shardfeed (the operator and the sidecar;
#                                         /shardfeed links libjpeg-turbo and FFmpeg statically,
#                                         their licences in /licenses; see SHARDFEED_JPEG)
#   registry.local/shardfeed-trainer:e2e  /trainer (test/e2e/trainer: the end-to-end trainer)
#   registry.local/pause:e2e              /pause (the pod sandbox)
# IMAGE_REPOSITORY and IMAGE_TAG name the shardfeed image for a registry of
# your own (docs/operations.md: loading and pushing the archive); the
# Dockerfile builds the same image with a container engine.
#
# SHARDFEED_JPEG=go leaves libjpeg-turbo out (Go's slower JPEG decoder for
# spec.decode; docs/formats.md), SHARDFEED_VIDEO=none FFmpeg (a lerobot
# stream's cameras are refused); both: the portable /shardfeed (no cgo).
#
# Usage: hack/images.sh [pause|shardfeed|trainer]...   (default: all)
#        hack/images.sh --import-only                  (import the archives there are)
#        IMAGE_REPOSITORY=registry.example.com/ml/shardfeed IMAGE_TAG=0.1.0 hack/images.sh shardfeed
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=images
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"
export PATH=$PATH:/usr/sbin

TAG=e2e
IMAGE_REPOSITORY=${IMAGE_REPOSITORY:-registry.local/shardfeed}
IMAGE_TAG=${IMAGE_TAG:-$TAG}
VERSION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo "")
LDFLAGS="-s -w -X github.com/shardfeed/shardfeed/internal/version.version=$VERSION -X github.com/shardfeed/shardfeed/internal/version.commit=$COMMIT"
out=$IMAGES/bin
mkdir -p "$out"

gobuild() { # OUT PACKAGE
	(cd "$ROOT" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -tags netgo,osusergo -ldflags "$LDFLAGS" -o "$1" "$2")
}
# The sidecar, static, with Debian's libjpeg-turbo and FFmpeg's decoders
# linked in (hack/build-sidecar.sh; make build-video builds the same), and
# their licence texts beside it.
sidecarbuild() { # OUT
	LDFLAGS=$LDFLAGS "$ROOT/hack/build-sidecar.sh" --licenses "$out/licenses" "$1"
}
# licensefiles DIR: SRC:DEST arguments of the licence texts under DIR, at
# /licenses/ in the image.
licensefiles() {
	local f
	while IFS= read -r f; do echo "$1/$f:/licenses/$f"; done < <(cd "$1" && find . -type f -printf '%P\n' | sort)
}
archive() { # NAME REF ENTRYPOINT USER FILES...
	local name=$1 ref=$2 entry=$3 user=$4
	shift 4
	"$out/ociarchive" -ref "$ref" -out "$IMAGES/$name.tar" -entrypoint "$entry" -user "$user" "$@"
	log "$ref -> ${IMAGES#"$ROOT"/}/$name.tar ($(du -h "$IMAGES/$name.tar" | cut -f1))"
}

build() {
	case $1 in
	pause)
		gobuild "$out/pause" ./hack/images/pause
		archive pause "registry.local/pause:$TAG" /pause 65535:65535 "$out/pause:/pause"
		;;
	shardfeed)
		gobuild "$out/manager" ./cmd/manager
		sidecarbuild "$out/shardfeed"
		mapfile -t licenses < <(licensefiles "$out/licenses")
		archive shardfeed "$IMAGE_REPOSITORY:$IMAGE_TAG" /manager 65532:65532 "$out/manager:/manager" "$out/shardfeed:/shardfeed" "${licenses[@]}"
		;;
	trainer)
		gobuild "$out/trainer" ./test/e2e/trainer
		archive shardfeed-trainer "registry.local/shardfeed-trainer:$TAG" /trainer 65532:65532 "$out/trainer:/trainer"
		;;
	*) die "unknown image '$1': pause, shardfeed or trainer" ;;
	esac
}

import() {
	[[ -S $SOCKET ]] || return 0
	local a
	for a in "$IMAGES"/*.tar; do
		[[ -f $a ]] || continue
		ctr -a "$SOCKET" -n k8s.io images import --no-unpack=false "$a" >/dev/null ||
			die "importing $a into the cluster's containerd failed"
	done
	log "imported $(find "$IMAGES" -maxdepth 1 -name '*.tar' | wc -l) images into the cluster"
}

if [[ ${1:-} == --import-only ]]; then
	import
	exit 0
fi
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$out/ociarchive" ./hack/images/ociarchive)
what=("$@")
((${#what[@]})) || what=(pause shardfeed trainer)
for w in "${what[@]}"; do build "$w"; done
import
