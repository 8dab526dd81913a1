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
# JPEGs; SHARDFEED_JPEG=go builds the portable one.
ARG SHARDFEED_JPEG=libjpeg
RUN LDFLAGS="-s -w -X github.com/shardfeed/shardfeed/internal/version.version=${VERSION} -X github.com/shardfeed/shardfeed/internal/version.commit=${COMMIT}" && \
    CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o /out/ ./cmd/manager && \
    if [ "$SHARDFEED_JPEG" = go ]; then \
      CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o /out/ ./cmd/shardfeed; \
    else \
      apt-get update -q && apt-get install -y -q --no-install-recommends libjpeg62-turbo-dev && \
      CGO_ENABLED=1 go build -trimpath -tags libjpeg,netgo,osusergo \
        -ldflags "$LDFLAGS -linkmode external -extldflags -static" -o /out/ ./cmd/shardfeed; \
    fi

FROM ${BASE_IMAGE}
COPY --from=build /out/shardfeed /out/manager /
USER 65532:65532
ENTRYPOINT ["/manager"]
