package icebergindex

import (
	"bytes"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// The table's metadata file, manifest list and manifests are read by
// iceberg-go's parsers, from files a table's writers control; a hostile
// one must give an error, not a panic. These are the parsers Index runs
// (through the catalog and the scan), each behind a recover, and the
// fuzz targets' entry points.

func parseMetadata(data []byte) (md table.Metadata, err error) {
	defer recoverCorrupt("table metadata", &err)
	return table.ParseMetadataBytes(data)
}

func readManifestList(data []byte) (mf []iceberg.ManifestFile, err error) {
	defer recoverCorrupt("manifest list", &err)
	return iceberg.ReadManifestList(bytes.NewReader(data))
}

func readManifest(m iceberg.ManifestFile, data []byte) (es []iceberg.ManifestEntry, err error) {
	defer recoverCorrupt("manifest", &err)
	return iceberg.ReadManifest(m, bytes.NewReader(data), false)
}

// recoverCorrupt turns a parser's panic into an error naming what it read.
func recoverCorrupt(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("corrupt %s: %v", what, r)
	}
}
