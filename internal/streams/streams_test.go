package streams

import (
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IndexCommand(tt.stream); got != tt.want {
				t.Errorf("IndexCommand =\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}
