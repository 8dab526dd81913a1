package objectlist

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5" //nolint:gosec // S3 Inventory's manifest names its files' MD5s
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shardfeed/shardfeed/internal/store"
)

// maxManifestBytes bounds an inventory's manifest.json: a list of data
// files, each a few hundred bytes.
const maxManifestBytes = 16 << 20

// ReadFile reads the objects of the list at name under prefix of bucket,
// as form says: a CSV form (gunzipped where the name ends in .gz), a
// Parquet file, or an S3 Inventory manifest and its data files. It
// returns what Parse does.
func ReadFile(name string, form Form, bucket, prefix string, maxObjects int) ([]store.Object, int, error) {
	c := newCollector(prefix, maxObjects)
	var err error
	switch form {
	case CSV, S3InventoryCSV:
		err = readCSVFile(name, form, bucket, c)
	case Parquet:
		err = readParquetFile(name, bucket, c)
	case S3Inventory:
		err = readManifest(name, bucket, c)
	default:
		return nil, 0, fmt.Errorf("object list form %q: use one of %v", form, Forms)
	}
	if err != nil {
		return nil, 0, err
	}
	return c.done()
}

func readCSVFile(name string, form Form, bucket string, c *collector) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer func() { _ = zr.Close() }()
		r = zr
	}
	objs, outside, err := Parse(r, form, bucket, "", c.max)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, o := range objs {
		if err := c.add(o.Key, o.Size); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	c.outside += outside
	return nil
}

// readParquetFile reads columns key, size and (where there is one)
// bucket of a Parquet file. S3 Inventory's Parquet keys are not
// URL-encoded, as its CSV's are.
func readParquetFile(name string, bucket string, c *collector) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: corrupt Parquet data: %v", name, r)
		}
	}()
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := readParquet(f, bucket, c); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func readParquet(r pq.ReaderAtSeeker, bucket string, c *collector) error {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return fmt.Errorf("not a Parquet file: %w", err)
	}
	defer func() { _ = pf.Close() }()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 14}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	schema, err := fr.Schema()
	if err != nil {
		return err
	}
	col := func(name string, need bool) (int, error) {
		idx := schema.FieldIndices(name)
		if len(idx) == 0 {
			if need {
				return -1, fmt.Errorf("no column %q: a list of objects has columns key and size (and bucket), as S3 Inventory writes them", name)
			}
			return -1, nil
		}
		if schema.NumFields() != pf.MetaData().Schema.NumColumns() {
			return -1, errors.New("nested columns: a list of objects has flat columns key and size (and bucket)")
		}
		return idx[0], nil
	}
	keyCol, err := col("key", true)
	if err != nil {
		return err
	}
	sizeCol, err := col("size", true)
	if err != nil {
		return err
	}
	bucketCol, err := col("bucket", false)
	if err != nil {
		return err
	}
	cols := []int{keyCol, sizeCol}
	if bucketCol >= 0 {
		cols = append(cols, bucketCol)
	}
	rr, err := fr.GetRecordReader(context.Background(), cols, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	row := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		keys, ok := stringsOf(rec.Column(0))
		if !ok {
			return fmt.Errorf("column key is %s, not a string", rec.Column(0).DataType())
		}
		sizes, ok := rec.Column(1).(*array.Int64)
		if !ok {
			return fmt.Errorf("column size is %s, not int64", rec.Column(1).DataType())
		}
		var buckets func(int) string
		if len(cols) == 3 {
			if buckets, ok = stringsOf(rec.Column(2)); !ok {
				return fmt.Errorf("column bucket is %s, not a string", rec.Column(2).DataType())
			}
		}
		for i := range int(rec.NumRows()) {
			row++
			switch {
			case rec.Column(0).IsNull(i) || rec.Column(1).IsNull(i):
				return fmt.Errorf("row %d: a null key or size (a versioned inventory's delete marker has no size: list the latest versions)", row)
			case buckets != nil && bucket != "" && buckets(i) != bucket:
				return fmt.Errorf("row %d: an object of bucket %q, and the stream's is %q: give the stream's bucket's inventory", row, buckets(i), bucket)
			case sizes.Value(i) < 0:
				return fmt.Errorf("row %d: size %d of %s is negative", row, sizes.Value(i), keys(i))
			case keys(i) == "":
				return fmt.Errorf("row %d: an empty key", row)
			}
			if err := c.add(keys(i), sizes.Value(i)); err != nil {
				return fmt.Errorf("row %d: %w", row, err)
			}
		}
	}
	return rr.Err()
}

// stringsOf reads a string column's values.
func stringsOf(a arrow.Array) (func(int) string, bool) {
	switch a := a.(type) {
	case *array.String:
		return a.Value, true
	case *array.LargeString:
		return a.Value, true
	case *array.Binary:
		return func(i int) string { return string(a.Value(i)) }, true
	}
	return nil, false
}

// manifest is an S3 Inventory report's manifest.json, as much as is read.
type manifest struct {
	SourceBucket string `json:"sourceBucket"`
	FileFormat   string `json:"fileFormat"`
	FileSchema   string `json:"fileSchema"`
	Files        []struct {
		Key string `json:"key"`
		MD5 string `json:"MD5checksum"`
	} `json:"files"`
}

// readManifest reads an S3 Inventory report: its manifest, then each data
// file it lists, found beside it or in the report's data/ folder (where
// `aws s3 sync` of the report's destination puts them), checked against
// the manifest's MD5.
func readManifest(name, bucket string, c *collector) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	_ = f.Close()
	if err != nil {
		return err
	}
	if len(data) > maxManifestBytes {
		return fmt.Errorf("%s is larger than a manifest's %d bytes", name, maxManifestBytes)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s is not an S3 Inventory manifest: %w", name, err)
	}
	if bucket != "" && m.SourceBucket != bucket {
		return fmt.Errorf("%s is the inventory of bucket %q, and the stream's is %q", name, m.SourceBucket, bucket)
	}
	var form Form
	switch strings.ToUpper(m.FileFormat) {
	case "CSV":
		form = S3InventoryCSV
		if !strings.HasPrefix(strings.ReplaceAll(m.FileSchema, " ", ""), "Bucket,Key,Size") {
			return fmt.Errorf("%s: the report's fields are %q: configure the inventory with Size (its fields then start Bucket, Key, Size)", name, m.FileSchema)
		}
	case "PARQUET":
		form = Parquet
	default:
		return fmt.Errorf("%s: an inventory of format %q: use CSV or Parquet", name, m.FileFormat)
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("%s lists no data files", name)
	}
	dir := filepath.Dir(name)
	for _, df := range m.Files {
		local, err := findDataFile(dir, df.Key, df.MD5)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if form == Parquet {
			err = readParquetFile(local, bucket, c)
		} else {
			err = readCSVFile(local, form, bucket, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// findDataFile returns the local copy of a report's data file of key,
// beside the manifest or in ../data/, whose MD5 is md5hex.
func findDataFile(dir, key, md5hex string) (string, error) {
	base := path.Base(key)
	if base == "." || base == "/" || strings.ContainsAny(base, `/\`) {
		return "", fmt.Errorf("data file %q is not a file's key", key)
	}
	want, err := hex.DecodeString(md5hex)
	if err != nil || len(want) != md5.Size {
		return "", fmt.Errorf("data file %s: MD5checksum %q is not an MD5", key, md5hex)
	}
	tried := []string{filepath.Join(dir, base), filepath.Join(dir, "..", "data", base)}
	for _, p := range tried {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		h := md5.New() //nolint:gosec // the manifest's checksum
		_, err = io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return "", err
		}
		if !bytes.Equal(h.Sum(nil), want) {
			return "", fmt.Errorf("%s does not have the MD5 the manifest gives it: copy the report again", p)
		}
		return p, nil
	}
	return "", fmt.Errorf("data file %s is at none of %s: copy the report's data files beside its manifest", key, strings.Join(tried, ", "))
}
