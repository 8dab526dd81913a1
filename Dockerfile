# One image for the operator (/manager) and the sidecar (/shardfeed sidecar).
# Static binaries on a distroless base: no shell, no package manager, non-root.
#
# The base images are build arguments so that a release build pins them by
# digest, resolved from the registry at build time:
#   docker build --build-arg BUILD_IMAGE=golang:1.26@sha256:… \
#                --build-arg BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:… .
# No digest is written here: none can be checked against the registries
# from the machine this project is developed on, and an unchecked digest
# is worse than a tag.
ARG BUILD_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY clients/go/go.mod clients/go/go.sum clients/go/
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
# The sidecar links libjpeg-turbo statically (cgo) to decode spec.decode's
# JPEGs, and FFmpeg's decoders (LGPL, decode-only, with dav1d: a lerobot
# stream's cameras), built from the sources hack/versions.sh pins by
# hack/tools.sh video; hack/build-sidecar.sh puts their licences in
# /licenses. SHARDFEED_JPEG=go and SHARDFEED_VIDEO=none leave each out
# (both: the portable sidecar, no cgo).
ARG SHARDFEED_JPEG=libjpeg
ARG SHARDFEED_VIDEO=ffmpeg
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      libjpeg62-turbo-dev nasm ninja-build pkg-config xz-utils curl python3-venv util-linux && \
    if [ "$SHARDFEED_VIDEO" != none ]; then SHARDFEED_CACHE=/cache hack/tools.sh video; fi && \
    LDFLAGS="-s -w -X github.com/shardfeed/shardfeed/internal/version.version=${VERSION} -X github.com/shardfeed/shardfeed/internal/version.commit=${COMMIT}" && \
    CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o /out/ ./cmd/manager && \
    LDFLAGS="$LDFLAGS" SHARDFEED_JPEG="$SHARDFEED_JPEG" SHARDFEED_VIDEO="$SHARDFEED_VIDEO" \
      hack/build-sidecar.sh --licenses /out/licenses /out/shardfeed

FROM ${BASE_IMAGE}
COPY --from=build /out/shardfeed /out/manager /
COPY --from=build /out/licenses /licenses
USER 65532:65532
ENTRYPOINT ["/manager"]
