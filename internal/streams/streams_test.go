package streams

import (
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// The command a missing index names carries every field of the stream
// that index needs, and nothing it does not take.
func TestIndexCommandNamesEverythingIndexNeeds(t *testing.T) {
	snap := int64(42)
	tests := []struct {
		name   string
		stream datav1alpha1.Stream
		want   string
	}{
		{"parquet on AWS", datav1alpha1.Stream{Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: "s3://b/p/", Region: "eu-west-1"}},
			"shardfeed index s3://b/p/ --format parquet --region eu-west-1"},
		{"jsonl on MinIO", datav1alpha1.Stream{Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "s3://b/p/", Endpoint: "http://minio:9000", Insecure: true}},
			"shardfeed index s3://b/p/ --format jsonl --endpoint http://minio:9000 --insecure"},
		{"a pinned table", datav1alpha1.Stream{Format: datav1alpha1.FormatIceberg, Source: datav1alpha1.Source{URI: "s3://lake/.shardfeed/t/"},
			Iceberg: &datav1alpha1.IcebergTable{Table: "ml.t", SnapshotID: &snap,
				Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogREST, URI: "http://cat:8181", Name: "lake", Warehouse: "wh"}}},
			"shardfeed index s3://lake/.shardfeed/t/ --format iceberg --catalog-type rest --catalog-uri http://cat:8181 --catalog-name lake --warehouse wh --table ml.t --snapshot-id 42"},
		{"a Glue table at a ref", datav1alpha1.Stream{Format: datav1alpha1.FormatIceberg, Source: datav1alpha1.Source{URI: "s3://lake/.shardfeed/t/", Region: "eu-west-1"},
			Iceberg: &datav1alpha1.IcebergTable{Table: "web.clicks", Ref: "train",
				Catalog: datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogGlue, Region: "eu-west-1", CatalogID: "123456789012"}}},
			"shardfeed index s3://lake/.shardfeed/t/ --format iceberg --catalog-type glue --catalog-region eu-west-1 --catalog-id 123456789012 --table web.clicks --ref train --region eu-west-1"},
		{"a hive tree with a selection", datav1alpha1.Stream{Format: datav1alpha1.FormatORC, Source: datav1alpha1.Source{URI: "s3://b/events/"},
			Partitions: &datav1alpha1.Partitions{Select: "region == 'eu'", Columns: []datav1alpha1.PartitionColumn{{Name: "date", Type: "utf8"}, {Name: "region", Type: "utf8"}}}},
			`shardfeed index s3://b/events/ --format orc --hive --partition-columns 'date:utf8,region:utf8' --select 'region == '\''eu'\'''`},
		{"a filtered MDS stream", datav1alpha1.Stream{Format: datav1alpha1.FormatMDS, Source: datav1alpha1.Source{URI: "s3://b/m/"}, Filter: "lang == 'en'"},
			`shardfeed index s3://b/m/ --format mds --filter 'lang == '\''en'\'''`},
		{"a Lance dataset at a tag", datav1alpha1.Stream{Format: datav1alpha1.FormatLance, Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"},
			Lance: &datav1alpha1.LanceTable{Tag: "train-v3"}},
			"shardfeed index s3://lake/robots.lance/ --format lance --tag train-v3"},
		{"a Lance dataset at a version", datav1alpha1.Stream{Format: datav1alpha1.FormatLance, Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"},
			Lance: &datav1alpha1.LanceTable{Version: &snap}},
			"shardfeed index s3://lake/robots.lance/ --format lance --version 42"},
		{"a Lance dataset's columns", datav1alpha1.Stream{Format: datav1alpha1.FormatLance, Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"}, Columns: []string{"id", "caption"}},
			"shardfeed index s3://lake/robots.lance/ --format lance --columns 'id,caption'"},
		{"an index apart from read-only data", datav1alpha1.Stream{Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: "s3://shared/web/", IndexURI: "s3://team/idx/web/"}},
			"shardfeed index s3://shared/web/ --format parquet --index-uri s3://team/idx/web/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IndexCommand(tt.stream); got != tt.want {
				t.Errorf("IndexCommand =\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}

// An index apart from the data is in the same store, read with the same
// credentials: another scheme or another Azure account is refused.
func TestCheckIndexURI(t *testing.T) {
	tests := []struct {
		name, uri, index string
		ok               bool
	}{
		{"none", "s3://b/p/", "", true},
		{"another bucket", "s3://shared/p/", "s3://team/idx/p/", true},
		{"another scheme", "s3://shared/p/", "gs://team/idx/p/", false},
		{"the same Azure account", "az://acct/data/p/", "az://acct/idx/p/", true},
		{"another Azure account", "az://acct/data/p/", "az://other/idx/p/", false},
		{"another ADLS account", "abfss://data@acct.dfs.core.windows.net/p/", "abfss://idx@other.dfs.core.windows.net/p/", false},
		{"the same ADLS account", "abfss://data@acct.dfs.core.windows.net/p/", "abfss://idx@acct.dfs.core.windows.net/p/", true},
		{"a local index for remote data", "s3://shared/p/", "file:///tmp/idx/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckIndexURI(datav1alpha1.Source{URI: tt.uri, IndexURI: tt.index})
			if (err == nil) != tt.ok {
				t.Fatalf("CheckIndexURI(%s, %s) = %v, want ok=%v", tt.uri, tt.index, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "in another store than source.uri") {
				t.Fatalf("the refusal says no fix: %v", err)
			}
		})
	}
}

// An index of a partitioned tree is read only by a stream that partitions
// it the same way: the same selection, and the same given columns.
func TestCheckPartitions(t *testing.T) {
	inferred := &indexfile.Partitions{Columns: []indexfile.Field{{Name: "date", Type: "utf8"}, {Name: "bucket", Type: "int32"}}, Select: "bucket < 2"}
	given := &indexfile.Partitions{Columns: inferred.Columns, Given: true, Select: "bucket < 2"}
	cols := []datav1alpha1.PartitionColumn{{Name: "date", Type: "utf8"}, {Name: "bucket", Type: "int32"}}
	stream := func(p *datav1alpha1.Partitions) datav1alpha1.Stream {
		return datav1alpha1.Stream{Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: "s3://b/p/"}, Partitions: p}
	}
	for _, tc := range []struct {
		name string
		spec *datav1alpha1.Partitions
		got  *indexfile.Partitions
		want string
	}{
		{"neither", nil, nil, ""},
		{"the same selection", &datav1alpha1.Partitions{Select: "bucket < 2"}, inferred, ""},
		{"the same given columns", &datav1alpha1.Partitions{Select: "bucket < 2", Columns: cols}, given, ""},
		{"an index the spec does not partition", nil, inferred, "its index is of a hive-partitioned tree (columns date utf8, bucket int32) and the spec has no partitions"},
		{"a spec whose index is not partitioned", &datav1alpha1.Partitions{}, nil, "spec.streams[2].partitions is set, and its index is not of a partitioned tree: re-run shardfeed index (shardfeed index s3://b/p/ --format parquet --hive)"},
		{"another selection", &datav1alpha1.Partitions{Select: "bucket < 3"}, inferred, `spec.streams[2].partitions.select is "bucket < 3", its index selected "bucket < 2"`},
		{"columns given, the index inferred", &datav1alpha1.Partitions{Select: "bucket < 2", Columns: cols}, inferred, "columns are given, and its index's types were inferred"},
		{"other columns", &datav1alpha1.Partitions{Select: "bucket < 2", Columns: []datav1alpha1.PartitionColumn{{Name: "date", Type: "utf8"}, {Name: "bucket", Type: "int64"}}}, given, "columns differ from its index's (date utf8, bucket int32)"},
		{"fewer columns", &datav1alpha1.Partitions{Select: "bucket < 2", Columns: cols[:1]}, given, "columns differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPartitions(2, stream(tc.spec), tc.got)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A lance stream's index must be of its dataset, at the version or tag its
// spec pins: a dataset that moved on is refused naming both versions.
func TestCheckLance(t *testing.T) {
	v5, v6 := int64(5), int64(6)
	idx := &indexfile.Lance{Root: "s3://lake/robots.lance/", Version: 5, Tag: "train"}
	tests := []struct {
		name   string
		stream datav1alpha1.Stream
		index  *indexfile.Lance
		want   string // "" for none
	}{
		{"the tag pinned", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/robots.lance"}, Lance: &datav1alpha1.LanceTable{Tag: "train"}}, idx, ""},
		{"another tag", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"}, Lance: &datav1alpha1.LanceTable{Tag: "eval"}}, idx,
			`lance.tag is "eval", its index was resolved from "train" (version 5)`},
		{"the version pinned", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"}, Lance: &datav1alpha1.LanceTable{Version: &v5}},
			&indexfile.Lance{Root: "s3://lake/robots.lance/", Version: 5}, ""},
		{"a moved dataset", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"}, Lance: &datav1alpha1.LanceTable{Version: &v6}},
			&indexfile.Lance{Root: "s3://lake/robots.lance/", Version: 5}, "lance.version pins version 6, its index is at version 5"},
		{"no pin, an untagged index", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/robots.lance/"}},
			&indexfile.Lance{Root: "s3://lake/robots.lance/", Version: 9}, ""},
		{"another dataset", datav1alpha1.Stream{Source: datav1alpha1.Source{URI: "s3://lake/other.lance/"}}, idx, "its index is of the Lance dataset s3://lake/robots.lance/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkLance(0, tt.stream, tt.index)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			case err != nil && !strings.Contains(err.Error(), "shardfeed index"):
				t.Fatalf("error %v does not say how to re-index", err)
			}
		})
	}
}
