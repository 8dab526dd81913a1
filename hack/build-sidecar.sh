#!/usr/bin/env bash
# build-sidecar.sh builds the sidecar's binary (the shardfeed CLI, which the
# image runs as its sidecar and the wheel bundles) for linux/amd64, or
# linux/arm64 with --arch arm64 (Debian's cross compiler): static, with the
# C libraries the portable build lacks linked in through cgo:
#   libjpeg-turbo  Debian's libjpeg62-turbo-dev (make tools-debian):
#                  spec.decode's JPEGs, about twice as fast as Go's decoder
#   FFmpeg         LGPL, decode-only, with dav1d (make tools-video,
#                  bin/ffmpeg-lgpl, bin/ffmpeg-lgpl-arm64, hack/ffmpeg.sh):
#                  a lerobot stream's cameras; without it they are refused
#                  with an error
# SHARDFEED_JPEG=go leaves libjpeg-turbo out, SHARDFEED_VIDEO=none FFmpeg;
# with both, the binary is the portable one (no cgo). LDFLAGS are the Go
# linker flags (version stamps).
#
# Usage: hack/build-sidecar.sh [--best-effort] [--arch ARCH] [--licenses DIR] OUT
#   --arch ARCH    amd64 (this machine's) or arm64; an arm64 build decodes
#                  JPEG in Go (no arm64 libjpeg-turbo here)
#   --best-effort  a library this machine cannot link is left out, with a
#                  line saying so (make wheel), not an error (the image, a
#                  release)
#   --licenses DIR the licence texts of the linked libraries go into DIR
#                  (DIR/FFmpeg, DIR/dav1d, DIR/libjpeg-turbo), emptied
#                  first: a statically linked LGPL library ships its
#                  licence with the binary
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=build-sidecar
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

best_effort=0 licenses="" arch=$(go env GOHOSTARCH)
while (($#)); do
	case $1 in
	--best-effort) best_effort=1 ;;
	--licenses) licenses=$2 && shift ;;
	--arch) arch=$2 && shift ;;
	-h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
	-*) die "unknown flag $1 (--best-effort, --arch ARCH, --licenses DIR)" ;;
	*) break ;;
	esac
	shift
done
(($# == 1)) || die "usage: hack/build-sidecar.sh [--best-effort] [--arch ARCH] [--licenses DIR] OUT"
out=$1
cc=cc ffmpeg=$BIN/ffmpeg-lgpl
if [[ $arch != "$(go env GOHOSTARCH)" ]]; then
	[[ $arch == arm64 ]] || die "--arch $arch: amd64 or arm64"
	cc=aarch64-linux-gnu-gcc ffmpeg=$BIN/ffmpeg-lgpl-arm64
	command -v "$cc" >/dev/null || die "$cc is missing: run make tools-debian (crossbuild-essential-arm64)"
fi

# missing WHAT HOW: a library that cannot be linked here.
missing() {
	((best_effort)) || die "$1 is missing: $2"
	log "left out: $1 is missing ($2)"
}

tags=netgo,osusergo
env=()
jpeg_copyright=/usr/share/doc/libjpeg62-turbo/copyright
if [[ ${SHARDFEED_JPEG:-libjpeg} != go ]]; then
	if [[ $arch == "$(go env GOHOSTARCH)" && -f /usr/include/jpeglib.h ]] && command -v cc >/dev/null && [[ -f $(cc -print-file-name=libjpeg.a) ]]; then
		tags+=,libjpeg
	else
		missing "libjpeg-turbo's headers or static library" "run make tools (Debian's libjpeg62-turbo-dev), or SHARDFEED_JPEG=go"
	fi
fi
if [[ ${SHARDFEED_VIDEO:-ffmpeg} != none ]]; then
	if [[ -f $ffmpeg/lib/pkgconfig/libavcodec.pc ]] && command -v pkg-config >/dev/null; then
		tags+=,ffmpeg
		env+=(PKG_CONFIG_LIBDIR="$ffmpeg/lib/pkgconfig")
	else
		missing "FFmpeg's libraries ($ffmpeg)" "run make tools-video, or SHARDFEED_VIDEO=none"
	fi
fi

cd "$ROOT"
if [[ $tags == netgo,osusergo ]]; then
	CGO_ENABLED=0 GOARCH="$arch" GOFLAGS=-buildvcs=false go build -trimpath -tags "$tags" -ldflags "${LDFLAGS:-}" -o "$out" ./cmd/shardfeed
else
	env "${env[@]}" CC="$cc" CGO_ENABLED=1 GOARCH="$arch" GOFLAGS=-buildvcs=false go build -trimpath -tags "$tags" \
		-ldflags "${LDFLAGS:-} -linkmode external -extldflags -static" -o "$out" ./cmd/shardfeed
fi
log "$out: linux/$arch, -tags $tags"

if [[ -n $licenses ]]; then
	rm -rf "$licenses" && mkdir -p "$licenses"
	if [[ $tags == *,ffmpeg* ]]; then
		[[ -f $ffmpeg/share/licenses/FFmpeg/COPYING.LGPLv2.1 && -f $ffmpeg/share/licenses/dav1d/COPYING ]] ||
			die "$ffmpeg/share/licenses lacks FFmpeg's or dav1d's licence: run make tools-video"
		cp -r "$ffmpeg/share/licenses/FFmpeg" "$ffmpeg/share/licenses/dav1d" "$licenses/"
	fi
	if [[ $tags == *,libjpeg* ]]; then
		[[ -f $jpeg_copyright ]] || die "$jpeg_copyright is missing: run make tools (Debian's libjpeg62-turbo-dev)"
		mkdir -p "$licenses/libjpeg-turbo" && cp "$jpeg_copyright" "$licenses/libjpeg-turbo/copyright"
	fi
fi
