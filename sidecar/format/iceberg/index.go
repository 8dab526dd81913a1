package iceberg

import (
	"context"
	"errors"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/iceberg/icebergindex"
)

// IndexTable implements format.TableIndexer: the table, resolved through
// its catalog at its snapshot, as the stream's index (icebergindex).
func (icebergFormat) IndexTable(ctx context.Context, _ store.Store, opts format.IndexOptions) (*indexfile.File, error) {
	t := opts.Table
	if t == nil {
		return nil, errors.New("shardfeed index: iceberg streams are tables: name the table and its catalog (--table, --catalog-type; spec.streams[].iceberg)")
	}
	spec := t.Iceberg
	if spec.Table == "" || spec.Catalog.Type == "" {
		return nil, errors.New("an iceberg stream needs its table, namespace.table, and its catalog's type, rest, sql or glue, with its uri for rest and sql (--table, --catalog-type, --catalog-uri; spec.streams[].iceberg)")
	}
	var snapshot int64
	if spec.SnapshotID != nil {
		snapshot = *spec.SnapshotID
	}
	if snapshot != 0 && spec.Ref != "" {
		return nil, errors.New("give a snapshot id or a ref, not both (--snapshot-id, --ref)")
	}
	c := icebergindex.Catalog{IcebergCatalog: spec.Catalog, Timeout: t.Timeout,
		Token: t.Token, Credential: t.Credential, User: t.User, Password: t.Password}
	return icebergindex.Index(ctx, icebergindex.Table{Catalog: c, Name: spec.Table, SnapshotID: snapshot, Ref: spec.Ref}, t.Source,
		icebergindex.Options{Hash: opts.Hash, Progress: opts.Progress})
}
