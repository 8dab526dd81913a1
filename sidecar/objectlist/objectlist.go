// Package objectlist reads a list of a stream's objects (keys and sizes)
// that takes the place of listing its prefix: an S3 Inventory report's CSV
// data file, or a plain CSV of keys and sizes. At ten million objects a
// listing is hours of sequential requests; an inventory the store already
// wrote is one file.
package objectlist

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Form is how a list is written.
type Form string

const (
	// CSV is rows of key,size (an optional first row key,size is a
	// header), keys as the bucket names them.
	CSV Form = "csv"
	// S3InventoryCSV is an S3 Inventory report's CSV data file: bucket,
	// key (URL-encoded), size, then any other fields, no header.
	S3InventoryCSV Form = "s3-inventory-csv"

	// Parquet is a Parquet file of columns key and size (and bucket,
	// checked where there is one): an S3 Inventory report's Parquet data
	// file, or a list a query wrote.
	Parquet Form = "parquet"
	// S3Inventory is an S3 Inventory report's manifest.json: its data
	// files (CSV, gzipped, or Parquet), looked for beside it and in the
	// report's data/ folder, each checked against the manifest's MD5.
	S3Inventory Form = "s3-inventory"
)

// Forms are the forms ReadFile reads; csvForms those Parse reads.
var (
	Forms    = []Form{CSV, S3InventoryCSV, Parquet, S3Inventory}
	csvForms = []Form{CSV, S3InventoryCSV}
)

// Bounds of a list.
const (
	// MaxLineBytes bounds a row (S3 keys are at most 1,024 bytes).
	MaxLineBytes = 64 << 10
	// DefaultMaxObjects bounds the objects of a list.
	DefaultMaxObjects = 100_000_000
)

// Parse reads the objects of list r under prefix (a key prefix of
// bucket; "" for all) as form says, at most maxObjects of them (0:
// DefaultMaxObjects), and returns them sorted by key, relative to prefix,
// and how many rows were outside prefix (not the stream's). A row that
// does not parse, a negative size, a key twice or a row of another
// bucket is an error naming its row.
func Parse(r io.Reader, form Form, bucket, prefix string, maxObjects int) ([]store.Object, int, error) {
	if !slices.Contains(csvForms, form) {
		return nil, 0, fmt.Errorf("object list form %q: use one of %v", form, csvForms)
	}
	c := newCollector(prefix, maxObjects)
	cr := csv.NewReader(&lineLimit{r: bufio.NewReaderSize(r, 64<<10)})
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	for row := 1; ; row++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("object list, row %d: %w", row, err)
		}
		key, size, err := fields(rec, form, bucket)
		if err != nil {
			if row == 1 && form == CSV && len(rec) == 2 && strings.EqualFold(rec[0], "key") {
				continue // a header
			}
			return nil, 0, fmt.Errorf("object list, row %d: %w", row, err)
		}
		if err := c.add(key, size); err != nil {
			return nil, 0, fmt.Errorf("object list, row %d: %w", row, err)
		}
	}
	return c.done()
}

// collector gathers a list's objects under a prefix, bounded.
type collector struct {
	prefix  string
	max     int
	out     []store.Object
	outside int
}

func newCollector(prefix string, maxObjects int) *collector {
	if maxObjects <= 0 {
		maxObjects = DefaultMaxObjects
	}
	return &collector{prefix: prefix, max: maxObjects}
}

// add takes an object of the bucket, if under the prefix.
func (c *collector) add(key string, size int64) error {
	rel, ok := strings.CutPrefix(key, c.prefix)
	if !ok || rel == "" || strings.HasSuffix(rel, "/") {
		c.outside++ // another prefix's, or a directory's marker
		return nil
	}
	if err := store.CheckKey(rel); err != nil {
		return err
	}
	if len(c.out) == c.max {
		return fmt.Errorf("more than %d objects under %q", c.max, c.prefix)
	}
	c.out = append(c.out, store.Object{Key: rel, Size: size})
	return nil
}

// done returns the objects sorted by key, refusing a key listed twice,
// and how many were outside the prefix.
func (c *collector) done() ([]store.Object, int, error) {
	slices.SortFunc(c.out, func(a, b store.Object) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(c.out); i++ {
		if c.out[i].Key == c.out[i-1].Key {
			return nil, 0, fmt.Errorf("object list: %s is listed twice", c.out[i].Key)
		}
	}
	return c.out, c.outside, nil
}

// fields reads a row's key and size.
func fields(rec []string, form Form, bucket string) (string, int64, error) {
	var key, size string
	switch form {
	case CSV:
		if len(rec) != 2 {
			return "", 0, fmt.Errorf("%d fields, not key,size", len(rec))
		}
		key, size = rec[0], rec[1]
	case S3InventoryCSV:
		if len(rec) < 3 {
			return "", 0, fmt.Errorf("%d fields, not an inventory's bucket,key,size,…", len(rec))
		}
		if bucket != "" && rec[0] != bucket {
			return "", 0, fmt.Errorf("an object of bucket %q, and the stream's is %q: give the stream's bucket's inventory", rec[0], bucket)
		}
		k, err := url.QueryUnescape(rec[1])
		if err != nil {
			return "", 0, fmt.Errorf("key %q is not URL-encoded as an inventory's are: %w", rec[1], err)
		}
		key, size = k, rec[2]
	}
	if key == "" {
		return "", 0, errors.New("an empty key")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(size), 10, 64)
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("size %q of %s is not a number of bytes (a versioned inventory's delete marker has none: list the latest versions)", size, key)
	}
	return key, n, nil
}

// lineLimit fails a line longer than MaxLineBytes, so that one row never
// takes more memory than that.
type lineLimit struct {
	r    *bufio.Reader
	line int
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			l.line = 0
			continue
		}
		l.line++
		if l.line > MaxLineBytes {
			return 0, fmt.Errorf("a row is longer than %d bytes", MaxLineBytes)
		}
	}
	return n, err
}
