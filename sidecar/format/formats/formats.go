// Package formats is the registry of the shard formats shardfeed reads,
// keyed by the API's format name: the one table the sidecar and the CLI
// find a format in, with the index options each takes alone
// (format.Option) and its help. A new format is a package implementing
// format.Format (and format.Indexer, to be indexed by `shardfeed index`)
// and one row here.
package formats

import (
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
	"github.com/shardfeed/shardfeed/sidecar/format/huggingface"
	"github.com/shardfeed/shardfeed/sidecar/format/iceberg"
	"github.com/shardfeed/shardfeed/sidecar/format/lance"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot"
	"github.com/shardfeed/shardfeed/sidecar/format/litdata"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
	"github.com/shardfeed/shardfeed/sidecar/format/megatron"
	"github.com/shardfeed/shardfeed/sidecar/format/orc"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
	"github.com/shardfeed/shardfeed/sidecar/format/webdataset"
)

// Default returns a registry of every format shardfeed reads. Each call
// returns a new registry, so a test may register a format of its own.
func Default() format.Registry {
	return format.NewRegistry(
		mds.Format{},
		parquet.Format,
		arrowipc.Format,
		orc.Format,
		text.JSONL,
		text.CSV,
		text.TSV,
		iceberg.Format,
		lance.Format,
		megatron.Format{},
		webdataset.Format{},
		huggingface.Format{},
		litdata.Format{},
		lerobot.Format{},
	)
}
