#!/usr/bin/env bash
# dist.sh builds every artifact of a release into dist/<version>/, without a
# container engine or a registry (docs/releasing.md):
#   shardfeed-<v>-py3-none-manylinux_2_17_{x86_64,aarch64}.whl
#                                   the Python client with the static CLI inside
#                                   (the sidecar's build: libjpeg-turbo and FFmpeg on amd64)
#   shardfeed-image-<v>.tar         the image (manager + sidecar) as an OCI
#                                   archive: an index of linux/amd64 and
#                                   linux/arm64, named <repository>:<v>
#   shardfeed-image-<v>-linux-<arch>.tar
#                                   each architecture's image alone
#   shardfeed-<v>.tgz               the Helm chart, version and appVersion <v>,
#                                   its image pinned to the index's digest
#   kubectl-shardfeed-<v>-linux-{amd64,arm64}.tar.gz
#                                   the kubectl plugin (kubectl-shardfeed, LICENSE)
#   kubectl-shardfeed-<v>.krew.yaml the plugin's krew manifest (RELEASE_URL: where
#                                   the archives are downloaded from)
#   shardfeed-<v>.spdx.json         the SBOM (SPDX 2.3): binaries, Go modules, wheels
#   shardfeed-<v>.provenance.json   the build's provenance (in-toto Statement v1,
#                                   SLSA Provenance v1) naming every artifact above
#   SHA256SUMS                      the checksums of all of the above
#   SHA256SUMS.sig, shardfeed-<v>.provenance.json.sig
#                                   with SHARDFEED_SIGNING_KEY (the path of an
#                                   Ed25519 private key in PEM, kept outside the
#                                   repository): their signatures, base64
# and, beside the folder, dist/<v>.env (dist/latest.env): what the tests and
# the release workflow read about the build; not an artifact, never published.
#
# The version: DIST_VERSION (1.2.3 or 1.2.3-rc.1), else the tag v1.2.3 at
# HEAD, else a development build of VERSION: <VERSION>-dev.<commits>.g<sha>.
# IMAGE_REPOSITORY (default ghcr.io/shardfeed/shardfeed) names the image.
# The amd64 sidecar links libjpeg-turbo (make tools installs its headers)
# and FFmpeg's decoders (make tools-video), with their licence texts in
# /licenses (the wheel's shardfeed/_bin/licenses), and so does the x86_64
# wheel's CLI, the same binary (hack/build-sidecar.sh); the arm64 ones
# link FFmpeg too (cross-built by make tools-video, Debian's cross
# compiler) and decode JPEG in Go (SHARDFEED_JPEG=go and
# SHARDFEED_VIDEO=none leave them out on amd64 too).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=dist
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
cd "$ROOT"

base=$(tr -d '[:space:]' <VERSION)
if [[ -n ${DIST_VERSION:-} ]]; then
	V=${DIST_VERSION#v}
elif tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
	V=${tag#v}
else
	V="$base-dev.$(git rev-list --count HEAD).g$(git rev-parse --short=12 HEAD)"
fi
[[ $V =~ ^[0-9]+\.[0-9]+\.[0-9]+(-(rc|alpha|beta)\.[0-9]+|-dev\.[0-9]+\.g[0-9a-f]+)?$ ]] ||
	die "version '$V' is not 1.2.3, 1.2.3-rc.1 or a development build (DIST_VERSION, or a tag v1.2.3)"
[[ ${V%%-*} == "$base" ]] || die "version $V is not a build of VERSION ($base): bump VERSION, the chart and the Python package first (docs/releasing.md)"
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
	log "warning: the work tree has changes: the artifacts are of the tree, not of $(git rev-parse --short HEAD)"
fi
REPO=${IMAGE_REPOSITORY:-ghcr.io/shardfeed/shardfeed}
OUT=$ROOT/dist/$V
STAGE=$ROOT/dist/.stage-$V
rm -rf "$OUT" "$STAGE"
# Earlier development builds go (about 1 GB each); releases stay.
find "$ROOT/dist" -mindepth 1 -maxdepth 1 -type d -name '*-dev.*' -exec rm -rf {} + 2>/dev/null || true
mkdir -p "$OUT" "$STAGE"
trap 'rm -rf "$STAGE"' EXIT
COMMIT=$(git rev-parse HEAD)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
KEY=${SHARDFEED_SIGNING_KEY:-}
CREATED=$(git log -1 --format=%cI HEAD)
LDFLAGS="-s -w -X github.com/shardfeed/shardfeed/internal/version.version=v$V -X github.com/shardfeed/shardfeed/internal/version.commit=$COMMIT"
log "shardfeed $V ($COMMIT) into ${OUT#"$ROOT"/}/"

gobuild() { # ARCH OUT PACKAGE
	CGO_ENABLED=0 GOOS=linux GOARCH=$1 GOFLAGS=-buildvcs=false go build -trimpath -tags netgo,osusergo -ldflags "$LDFLAGS" -o "$2" "$3"
}
for arch in amd64 arm64; do
	d=$STAGE/linux-$arch
	mkdir -p "$d"
	log "building linux/$arch: the CLI, the manager, the kubectl plugin, the sidecar"
	gobuild "$arch" "$d/shardfeed" ./cmd/shardfeed
	gobuild "$arch" "$d/manager" ./cmd/manager
	mkdir -p "$d/plugin"
	gobuild "$arch" "$d/plugin/kubectl-shardfeed" ./cmd/kubectl-shardfeed
	cp LICENSE "$d/plugin/"
	# Reproducible: fixed names, owners, times and order, no gzip timestamp.
	tar -C "$d/plugin" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$CREATED" -cf - kubectl-shardfeed LICENSE |
		gzip -n >"$OUT/kubectl-shardfeed-$V-linux-$arch.tar.gz"
	if [[ $arch == amd64 ]]; then
		# libjpeg-turbo and FFmpeg linked in, their licences beside.
		LDFLAGS=$LDFLAGS hack/build-sidecar.sh --arch amd64 --licenses "$d/licenses" "$d/sidecar"
	else
		# FFmpeg linked in (no arm64 libjpeg-turbo here: JPEG in Go).
		LDFLAGS=$LDFLAGS SHARDFEED_JPEG=go hack/build-sidecar.sh --arch "$arch" --licenses "$d/licenses" "$d/sidecar"
	fi
done

# The wheels: make wheel's staging, once per architecture.
[[ -x $BIN/venv-build/bin/python ]] || make --no-print-directory bin/venv-build/.complete
for arch in amd64 arm64; do
	w=$STAGE/wheel-$arch
	cp -r clients/python "$w"
	rm -rf "$w/build" "$w"/src/*.egg-info "$w/src/shardfeed/_bin"
	mkdir -p "$w/src/shardfeed/_bin"
	# The sidecar's build: libjpeg-turbo linked in for amd64, as the image's.
	cp "$STAGE/linux-$arch/sidecar" "$w/src/shardfeed/_bin/shardfeed"
	cp -r "$STAGE/linux-$arch/licenses" "$w/src/shardfeed/_bin/licenses"
	machine=x86_64
	[[ $arch == arm64 ]] && machine=aarch64
	SHARDFEED_VERSION=$V SHARDFEED_WHEEL_MACHINE=$machine "$BIN/venv-build/bin/python" -m pip wheel --quiet --disable-pip-version-check \
		--no-deps --no-build-isolation -w "$OUT" "$w"
done

# The image: one archive per architecture, and the index of both.
(CGO_ENABLED=0 go build -o "$STAGE/ociarchive" ./hack/images/ociarchive)
platform() {
	local files=("$STAGE/linux-$1/manager:/manager" "$STAGE/linux-$1/sidecar:/shardfeed") f
	while IFS= read -r f; do files+=("$STAGE/linux-$1/licenses/$f:/licenses/$f"); done < <(cd "$STAGE/linux-$1/licenses" && find . -type f -printf '%P\n' | sort)
	(IFS=, && echo "$1=${files[*]}")
}
for arch in amd64 arm64; do
	"$STAGE/ociarchive" -ref "$REPO:$V-$arch" -out "$OUT/shardfeed-image-$V-linux-$arch.tar" -entrypoint /manager -user 65532:65532 \
		-platform "$(platform "$arch")"
done
"$STAGE/ociarchive" -ref "$REPO:$V" -out "$OUT/shardfeed-image-$V.tar" -entrypoint /manager -user 65532:65532 \
	-digest-file "$STAGE/digest" -platform "$(platform amd64)" -platform "$(platform arm64)"
DIGEST=$(cat "$STAGE/digest")
log "image $REPO:$V@$DIGEST"

# The chart, pinned to the image's digest.
cp -r charts/shardfeed "$STAGE/chart"
sed -i -E "s/^version: .*/version: $V/; s/^appVersion: .*/appVersion: \"$V\"/" "$STAGE/chart/Chart.yaml"
sed -i -E "0,/^  repository: .*/s||  repository: $REPO|; 0,/^  digest: .*/s||  digest: \"$DIGEST\"|" "$STAGE/chart/values.yaml"
grep -q "digest: \"$DIGEST\"" "$STAGE/chart/values.yaml" || die "the chart's values.yaml has no image.digest to pin"
"$BIN/helm" package "$STAGE/chart" --destination "$OUT" >/dev/null

# The plugin's krew manifest (krew.sigs.k8s.io/v1alpha2), its archives'
# checksums in it.
URL=${RELEASE_URL:-https://github.com/shardfeed/shardfeed/releases/download/v$V}
{
	cat <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: shardfeed
spec:
  version: v$V
  homepage: https://github.com/shardfeed/shardfeed
  shortDescription: Ask the cluster about shardfeed's datasets and jobs
  description: |
    Explains what the shardfeed operator keeps in the cluster: a dataset's
    plan, a job's progress and lineage, why a pod was not injected. It
    changes nothing.
  platforms:
EOF
	for arch in amd64 arm64; do
		a=kubectl-shardfeed-$V-linux-$arch.tar.gz
		cat <<EOF
    - selector:
        matchLabels:
          os: linux
          arch: $arch
      uri: $URL/$a
      sha256: $(sha256sum "$OUT/$a" | cut -d' ' -f1)
      bin: kubectl-shardfeed
      files:
        - from: kubectl-shardfeed
          to: .
        - from: LICENSE
          to: .
EOF
	done
} >"$OUT/kubectl-shardfeed-$V.krew.yaml"

# The SBOM and the checksums.
wheels=()
for w in "$OUT"/*.whl; do wheels+=(-wheel "$w"); done
# The libjpeg-turbo the amd64 sidecar (and wheel) link: Debian's.
libjpeg=$(dpkg-query -W -f '${Version}' libjpeg62-turbo-dev 2>/dev/null | sed -E 's/^[0-9]+://; s/-[^-]*$//') || true
# The FFmpeg and dav1d it links: the pins make tools-video built.
ffmpeg=$(sed -n 's/^FFMPEG_VERSION=\([^ ]*\).*/\1/p' hack/versions.sh) dav1d=$(sed -n 's/^DAV1D_VERSION=\([^ ]*\).*/\1/p' hack/versions.sh)
go run ./hack/sbom -version "$V" -created "$CREATED" -libjpeg "${libjpeg:-unknown}" -ffmpeg "$ffmpeg" -dav1d "$dav1d" -out "$OUT/shardfeed-$V.spdx.json" "${wheels[@]}" \
	"$STAGE/linux-amd64/shardfeed" "$STAGE/linux-amd64/manager" "$STAGE/linux-amd64/sidecar" "$STAGE/linux-amd64/plugin/kubectl-shardfeed" \
	"$STAGE/linux-arm64/shardfeed" "$STAGE/linux-arm64/manager" "$STAGE/linux-arm64/sidecar" "$STAGE/linux-arm64/plugin/kubectl-shardfeed"
# The provenance: every artifact by its digest, what built it from what.
builder=${SHARDFEED_BUILDER:-}
if [[ -z $builder && -n ${GITHUB_RUN_ID:-} ]]; then
	builder=${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY:-shardfeed/shardfeed}/actions/runs/$GITHUB_RUN_ID
fi
(cd "$OUT" && go run "$ROOT/hack/provenance" -version "$V" -commit "$COMMIT" -image "$REPO" -started "$STARTED" \
	-builder "${builder:-$(hostname)}" -out "shardfeed-$V.provenance.json" -- *.whl *.tar *.tar.gz *.tgz *.krew.yaml *.spdx.json)
(cd "$OUT" && sha256sum -- *.whl *.tar *.tar.gz *.tgz *.krew.yaml *.spdx.json *.provenance.json >SHA256SUMS)
cat >"$ROOT/dist/$V.env" <<EOF
DIST_VERSION=$V
DIST_DIR=$OUT
DIST_IMAGE_REPOSITORY=$REPO
DIST_IMAGE=$REPO@$DIGEST
DIST_IMAGE_NAME=$REPO:$V
DIST_IMAGE_ARCHIVE=$OUT/shardfeed-image-$V.tar
DIST_CHART=$OUT/shardfeed-$V.tgz
DIST_PLUGIN_MANIFEST=$OUT/kubectl-shardfeed-$V.krew.yaml
EOF
if [[ -n $KEY ]]; then
	"$ROOT/hack/sign-dist.sh" "$OUT"
else
	log "unsigned: set SHARDFEED_SIGNING_KEY to sign the checksums and the provenance (docs/releasing.md)"
fi
ln -sfn "$V" "$ROOT/dist/latest"
ln -sfn "$V.env" "$ROOT/dist/latest.env"
log "done: $(cd "$OUT" && ls | tr '\n' ' ')"
