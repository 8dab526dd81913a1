package indexfile

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/shardfeed/shardfeed/internal/store"
)

// FileName is the name of a stream's index. shardfeed writes its own under
// Dir in the stream's prefix (Key), where the data's readers do not look:
// pyarrow.dataset, pandas, Spark and Trino skip names that start with "_".
// MDS's index.json, and a shardfeed index written before, sit in the
// prefix itself; readers look under Dir first, then there.
const (
	FileName = "index.json"
	Dir      = "_shardfeed"
	Key      = Dir + "/" + FileName
)

// DefaultMaxBytes is the cap of an index read when the caller sets none:
// about 250 000 shards of shardfeed's own index.
const DefaultMaxBytes = 64 << 20

// TooLargeError is an index over the cap of its read: the reader stops at
// the cap, whatever the store sends (an endless body included).
type TooLargeError struct {
	URI   string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than the cap of %d bytes (%s) on index reads: write the index compact (shardfeed index --index-form compact: about a tenth of the JSON's size), split the stream into several, or raise the cap (the manager's --max-index-bytes, chart value maxIndexBytes)",
		e.URI, e.Limit, humanBytes(e.Limit))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// ReadObject reads the object at key whole, at most maxBytes of it (0:
// DefaultMaxBytes), whatever the store sends.
func ReadObject(ctx context.Context, st store.Store, key string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	r, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ObjectURI(st, key), err)
	}
	if int64(len(data)) > maxBytes {
		return nil, &TooLargeError{URI: ObjectURI(st, key), Limit: maxBytes}
	}
	return data, nil
}

// ObjectURI is key's URI in st (path.Join would fold the "//" of the
// scheme).
func ObjectURI(st store.Store, key string) string {
	return strings.TrimSuffix(st.URI(), "/") + "/" + key
}
