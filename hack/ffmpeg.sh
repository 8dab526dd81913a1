# shellcheck shell=bash
# ffmpeg.sh builds FFmpeg's libraries and its ffmpeg and ffprobe commands
# from source: static, position-independent (for cgo), LGPL (no GPL,
# nonfree or version3 parts), decode-only, with dav1d for AV1, both from
# Debian's .orig tarballs pinned in hack/versions.sh. hack/tools.sh sources
# it (install_video) and uses its log, doing, die and cached helpers.
#
# The prefix has include/, lib/*.a, lib/pkgconfig/*.pc (dav1d's too) and
# bin/ffmpeg, bin/ffprobe. A cgo build links the libraries in with
#   PKG_CONFIG_PATH=$prefix/lib/pkgconfig
#   CGO_CFLAGS=$(pkg-config --cflags libavformat libavcodec libswscale libavutil)
#   CGO_LDFLAGS=$(pkg-config --static --libs libavformat libavcodec libswscale libavutil)
# (-L$prefix/lib -lavformat -lavcodec -ldav1d -ldl -lm -lswscale -lavutil
# -pthread -lm -latomic; or #cgo pkg-config: --static libavformat ...), and
# libc too with go build -ldflags '-linkmode external -extldflags -static'
# (as make build-libjpeg does).

# What FFmpeg is configured with (less --prefix): nothing autodetected, no
# component but those named here. Threads are autodetected libraries to
# configure, so pthreads is named again (the ffmpeg command needs threads).
# The ffmpeg command's reference decode: ffmpeg -i in.mp4 -f rawvideo
# -pix_fmt yuv420p out.yuv (scale converts pixel formats and sizes; null,
# wrapped_avframe and framemd5 time a decode or hash its frames). No zlib:
# the rare zlib-compressed mov or Matroska headers are not read.
FFMPEG_CONFIGURE=(
	--disable-autodetect --enable-pthreads
	--disable-everything --disable-doc --disable-debug --disable-network
	--disable-avdevice --disable-swresample --disable-postproc --disable-ffplay
	--enable-static --disable-shared --enable-pic --pkg-config-flags=--static
	--enable-libdav1d
	"--enable-decoder=h264,hevc,libdav1d"
	"--enable-parser=h264,hevc,av1"
	"--enable-demuxer=mov,matroska"
	"--enable-protocol=file,pipe"
	"--enable-filter=scale,format,null,fps"
	"--enable-encoder=rawvideo,wrapped_avframe"
	"--enable-muxer=rawvideo,null,framemd5"
)
# dav1d's meson options (less --prefix): the static library alone.
DAV1D_MESON=(
	--buildtype=release --default-library=static --libdir=lib
	-Denable_tools=false -Denable_tests=false -Denable_examples=false -Denable_docs=false
)

# ffmpeg_key: a short hash of the pins and the options above, which names
# the cache entry.
ffmpeg_key() {
	printf '%s\n' "$FFMPEG_VERSION" "$FFMPEG_SHA256" "$DAV1D_VERSION" "$DAV1D_SHA256" "$MESON_VERSION" \
		"${FFMPEG_CONFIGURE[@]}" -- "${DAV1D_MESON[@]}" | sha256sum | cut -c1-12
}

# ffmpeg_fetch URL SHA256: download URL into $CACHE/downloads unless a
# file there already has SHA256 (a new pin downloads again); prints the
# file's path.
ffmpeg_fetch() {
	local url=$1 sum=$2
	local file=$CACHE/downloads/${url##*/}
	if ! echo "$sum  $file" | sha256sum -c --quiet - >/dev/null 2>&1; then
		mkdir -p "$CACHE/downloads"
		curl -fsSL --retry 3 -o "$file.part" "$url" || die "could not download $url"
		echo "$sum  $file.part" | sha256sum -c --quiet - >&2 ||
			{ rm -f "$file.part" && die "$url does not have the SHA-256 pinned in hack/versions.sh"; }
		mv "$file.part" "$file"
	fi
	echo "$file"
}

# meson_venv: meson from PyPI, pinned, in a venv of its own in the cache;
# prints its directory.
meson_venv() {
	local dir=$CACHE/tools/meson-$MESON_VERSION
	if ! cached "$dir"; then
		doing "installing meson $MESON_VERSION (PyPI) into $dir"
		rm -rf "$dir"
		"$PYTHON" -m venv "$dir" || die "could not create the venv $dir"
		"$dir/bin/pip" install -q --disable-pip-version-check --progress-bar off "meson==$MESON_VERSION" >&2 ||
			die "pip could not install meson $MESON_VERSION"
		touch "$dir/.complete"
	fi
	echo "$dir"
}

# FFMPEG_CROSS: the GNU triplet of the cross compiler each Go
# architecture other than the machine's own is built with (Debian's
# crossbuild-essential-arm64), and the qemu-user that runs what it builds.
declare -A FFMPEG_CROSS=([arm64]=aarch64-linux-gnu)
declare -A FFMPEG_QEMU=([arm64]=qemu-aarch64)

# ffmpeg_run ARCH COMMAND...: runs a command built for ARCH (through
# qemu-user where it is not this machine's).
ffmpeg_run() {
	local arch=$1 && shift
	if [[ $arch == "$(go env GOHOSTARCH)" ]]; then
		"$@"
	else
		"${FFMPEG_QEMU[$arch]}" -L "/usr/${FFMPEG_CROSS[$arch]}" "$@"
	fi
}

# ffmpeg_build PREFIX [ARCH]: dav1d, then FFmpeg against it, into PREFIX
# (built in PREFIX.build, removed when done), for Go's ARCH (default this
# machine's; arm64 with Debian's cross compiler); checks the result and
# marks PREFIX complete.
ffmpeg_build() {
	local prefix=$1 arch=${2:-$(go env GOHOSTARCH)} jobs=2 t
	local build=$prefix.build cross="" dav1d_cross=() ffmpeg_cross=()
	rm -rf "$prefix" "$build" && mkdir -p "$prefix" "$build/dav1d" "$build/ffmpeg"
	if [[ $arch != "$(go env GOHOSTARCH)" ]]; then
		cross=${FFMPEG_CROSS[$arch]:-}
		[[ -n $cross ]] || die "no cross compiler is known for $arch (hack/ffmpeg.sh FFMPEG_CROSS)"
		if ! command -v "$cross-gcc" >/dev/null || ! command -v "${FFMPEG_QEMU[$arch]}" >/dev/null; then
			die "building FFmpeg for $arch needs $cross-gcc and ${FFMPEG_QEMU[$arch]} (hack/tools.sh debian installs crossbuild-essential-$arch and qemu-user)"
		fi
		printf '%s\n' "[binaries]" "c = '$cross-gcc'" "ar = '$cross-ar'" "strip = '$cross-strip'" "pkg-config = 'pkg-config'" \
			"[host_machine]" "system = 'linux'" "cpu_family = 'aarch64'" "cpu = 'aarch64'" "endian = 'little'" >"$build/cross.ini"
		dav1d_cross=(--cross-file "$build/cross.ini")
		ffmpeg_cross=(--enable-cross-compile --arch=aarch64 --target-os=linux "--cross-prefix=$cross-" --pkg-config=pkg-config)
	fi
	for t in nasm ninja pkg-config make cc; do
		command -v "$t" >/dev/null || die "building FFmpeg needs $t (hack/tools.sh debian installs it)"
	done
	local ffmpeg_tar dav1d_tar meson
	# (die in a command substitution ends only it: hence the exits.)
	ffmpeg_tar=$(ffmpeg_fetch "http://deb.debian.org/debian/pool/main/f/ffmpeg/ffmpeg_$FFMPEG_VERSION.orig.tar.xz" "$FFMPEG_SHA256") || exit 1
	dav1d_tar=$(ffmpeg_fetch "http://deb.debian.org/debian/pool/main/d/dav1d/dav1d_$DAV1D_VERSION.orig.tar.xz" "$DAV1D_SHA256") || exit 1
	meson=$(meson_venv)/bin/meson || exit 1

	doing "building dav1d $DAV1D_VERSION (static, $arch) into $prefix (about 1 minute cold on 2 cores)"
	local start=$SECONDS
	tar -xJf "$dav1d_tar" -C "$build/dav1d" --strip-components=1 || die "could not unpack $dav1d_tar"
	(
		cd "$build/dav1d" &&
			"$meson" setup --prefix "$prefix" "${DAV1D_MESON[@]}" "${dav1d_cross[@]}" build >build.log 2>&1 &&
			ninja -C build -j "$jobs" >>build.log 2>&1 &&
			"$meson" install -C build >>build.log 2>&1
	) || { tail -n 30 "$build/dav1d/build.log" >&2; die "building dav1d failed (log: $build/dav1d/build.log)"; }
	log "built dav1d in $((SECONDS - start)) s"

	doing "building FFmpeg $FFMPEG_VERSION (static, LGPL, decode-only, $arch) into $prefix (about 2 minutes cold on 2 cores)"
	start=$SECONDS
	tar -xJf "$ffmpeg_tar" -C "$build/ffmpeg" --strip-components=1 || die "could not unpack $ffmpeg_tar"
	(
		cd "$build/ffmpeg" &&
			PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig ./configure --prefix="$prefix" "${FFMPEG_CONFIGURE[@]}" "${ffmpeg_cross[@]}" >build.log 2>&1 &&
			make -j "$jobs" >>build.log 2>&1 &&
			make install >>build.log 2>&1
	) || { tail -n 30 "$build/ffmpeg/build.log" >&2; die "building FFmpeg failed (log: $build/ffmpeg/build.log)"; }
	log "built FFmpeg in $((SECONDS - start)) s"

	# The license it reports, and the decoders the sidecar needs.
	local ffmpeg=$prefix/bin/ffmpeg license decoders d
	license=$(ffmpeg_run "$arch" "$ffmpeg" -hide_banner -L) || die "$ffmpeg does not run"
	[[ $license == *"GNU Lesser General Public"* && $license != *"GNU General Public License"* && $license != *nonfree* ]] ||
		die "$ffmpeg is not under the LGPL: $license"
	decoders=$(ffmpeg_run "$arch" "$ffmpeg" -hide_banner -decoders) || die "$ffmpeg does not run"
	for d in h264 hevc libdav1d; do
		grep -qE "^ [A-Z.]{6} $d " <<<"$decoders" || die "$ffmpeg has no $d decoder"
	done
	rm -rf "$build"
	touch "$prefix/.complete"
}

# ffmpeg_licenses PREFIX: the licence texts of FFmpeg (LGPL 2.1 or later)
# and dav1d (BSD 2-Clause), from their pinned tarballs, into
# PREFIX/share/licenses/{FFmpeg,dav1d}/, where a binary that links them
# statically ships them from (hack/build-sidecar.sh --licenses). Kept
# apart from ffmpeg_build so that a cached build gets them too.
ffmpeg_licenses() {
	local prefix=$1 out=$1/share/licenses
	[[ -f $out/FFmpeg/COPYING.LGPLv2.1 && -f $out/dav1d/COPYING && -f $out/FFmpeg/SOURCE ]] && return 0
	local ffmpeg_tar dav1d_tar
	ffmpeg_tar=$(ffmpeg_fetch "http://deb.debian.org/debian/pool/main/f/ffmpeg/ffmpeg_$FFMPEG_VERSION.orig.tar.xz" "$FFMPEG_SHA256") || exit 1
	dav1d_tar=$(ffmpeg_fetch "http://deb.debian.org/debian/pool/main/d/dav1d/dav1d_$DAV1D_VERSION.orig.tar.xz" "$DAV1D_SHA256") || exit 1
	mkdir -p "$out/FFmpeg" "$out/dav1d"
	tar -xJf "$ffmpeg_tar" -C "$out/FFmpeg" --no-same-owner --strip-components=1 --wildcards '*/COPYING.LGPLv2.1' '*/LICENSE.md' ||
		die "$ffmpeg_tar has no COPYING.LGPLv2.1 or LICENSE.md"
	tar -xJf "$dav1d_tar" -C "$out/dav1d" --no-same-owner --strip-components=1 --wildcards '*/COPYING' ||
		die "$dav1d_tar has no COPYING"
	# Where the exact sources are, and how they were built (LGPL 2.1 §6:
	# what a user needs to rebuild the library and relink shardfeed, whose
	# own source is public).
	cat >"$out/FFmpeg/SOURCE" <<EOF
FFmpeg $FFMPEG_VERSION, linked statically into shardfeed's sidecar, is under the
GNU Lesser General Public License 2.1 or later (COPYING.LGPLv2.1, LICENSE.md).
Its source, unmodified: http://deb.debian.org/debian/pool/main/f/ffmpeg/ffmpeg_$FFMPEG_VERSION.orig.tar.xz
  sha256 $FFMPEG_SHA256
with dav1d $DAV1D_VERSION (BSD-2-Clause, ../dav1d/COPYING):
  http://deb.debian.org/debian/pool/main/d/dav1d/dav1d_$DAV1D_VERSION.orig.tar.xz
  sha256 $DAV1D_SHA256
configured with: ${FFMPEG_CONFIGURE[*]}
shardfeed's build (hack/ffmpeg.sh, hack/build-sidecar.sh in its source) rebuilds
both and relinks the binary: https://github.com/shardfeed/shardfeed
EOF
}
