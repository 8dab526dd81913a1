# One image for the operator (/manager) and the sidecar (/shardfeed sidecar).
# Static binaries on a distroless base: no shell, no package manager, non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/shardfeed/shardfeed/internal/version.version=${VERSION} -X github.com/shardfeed/shardfeed/internal/version.commit=${COMMIT}" \
      -o /out/ ./cmd/shardfeed ./cmd/manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardfeed /out/manager /
USER 65532:65532
ENTRYPOINT ["/manager"]
