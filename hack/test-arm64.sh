#!/usr/bin/env bash
# test-arm64.sh builds the video decoding's and the LeRobot reader's tests
# for linux/arm64, as the arm64 sidecar is built (Debian's cross compiler,
# FFmpeg cross-built by make tools-video into bin/ffmpeg-lgpl-arm64, static)
# and runs them under qemu-user: the arm64 decode's YUV planes against the
# pinned ffmpeg command's, its RGB frames against LeRobot's recording
# (within the arm64 tolerance: FFmpeg's NEON conversion rounds otherwise
# than the x86 one LeRobot's recording was made with), the items, windows
# and image features exactly.
#
# Usage: hack/test-arm64.sh [go test -run PATTERN]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX="test-arm64"
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
cd "$ROOT"

cc=aarch64-linux-gnu-gcc
command -v "$cc" >/dev/null || die "$cc is missing: make tools-debian installs crossbuild-essential-arm64"
command -v qemu-aarch64 >/dev/null || die "qemu-aarch64 is missing: make tools-debian installs qemu-user"
[[ -f $BIN/ffmpeg-lgpl-arm64/lib/pkgconfig/libavcodec.pc ]] || die "$BIN/ffmpeg-lgpl-arm64 is missing: run make tools-video"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for pkg in sidecar/video sidecar/format/lerobot; do
	test=$out/$(basename "$pkg").test
	PKG_CONFIG_LIBDIR=$BIN/ffmpeg-lgpl-arm64/lib/pkgconfig CC=$cc CGO_ENABLED=1 GOARCH=arm64 GOFLAGS=-buildvcs=false \
		go test -c -trimpath -tags netgo,osusergo,ffmpeg -ldflags '-linkmode external -extldflags -static' -o "$test" "./$pkg"
	log "$pkg: linux/arm64 under qemu-user"
	# The LeRobot Lance layout's cases (-lance-) decode the same videos as
	# the Parquet layout's, through pure Go beside: amd64 runs them.
	(cd "$pkg" && qemu-aarch64 "$test" -test.count=1 -test.skip '/.*-lance-' ${1:+-test.run "$1"})
done
