package main

import (
	"os/exec"
	"strings"
	"testing"
)

// decoders are the imports that decode shards. The control plane reads
// bounded indexes only (internal/index): linking any of these would put
// a decoder of untrusted bytes, and its size, in the operator.
var decoders = []string{
	"github.com/apache/arrow-go/v18/parquet",
	"github.com/apache/arrow-go/v18/arrow/ipc",
	"github.com/apache/arrow-go/v18/arrow/csv",
	"github.com/klauspost/compress/zstd",
	"github.com/klauspost/compress/gzip",
	"github.com/klauspost/compress/snappy",
	"github.com/golang/snappy",
	"github.com/andybalholm/brotli",
	"github.com/pierrec/lz4",
	"compress/bzip2",
	"github.com/shardfeed/shardfeed/sidecar/",
}

func TestTheManagerLinksNoDecoder(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, d := range decoders {
			if dep == d || strings.HasPrefix(dep, strings.TrimSuffix(d, "/")+"/") {
				t.Errorf("cmd/manager depends on %s: the control plane must not link a shard decoder (read indexes with internal/index)", dep)
			}
		}
	}
}
