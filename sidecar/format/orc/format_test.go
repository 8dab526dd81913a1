package orc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// pyarrowFile is a small ORC file pyarrow wrote (zstd, 60 rows), kept as
// the reader's fuzz seed.
func pyarrowFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("orcfile/testdata/fuzz/FuzzReadFile/pyarrow-zstd")
	if err != nil {
		t.Fatal(err)
	}
	_, lit, _ := strings.Cut(string(b), "\n")
	lit = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(lit, "[]byte(")), ")")
	s, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

func indexDir(t *testing.T, files map[string][]byte) (*indexfile.File, error) {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return format.NewRegistry(Format).Index(context.Background(), st, datav1alpha1.FormatORC, format.IndexOptions{})
}

func TestIndexAndReadEveryStripeOfAPyarrowFile(t *testing.T) {
	data := pyarrowFile(t)
	f, err := indexDir(t, map[string][]byte{"a.orc": data, "notes.txt": []byte("not ORC")})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Shards) == 0 {
		t.Fatal("no stripes indexed")
	}
	var rows int64
	for i, e := range f.Shards {
		if e.FooterOffset+e.FooterLength != int64(len(data)) || e.Offset+e.Length > e.FooterOffset {
			t.Fatalf("stripe %d: range [%d, +%d), tail [%d, +%d) of %d bytes", i, e.Offset, e.Length, e.FooterOffset, e.FooterLength, len(data))
		}
		tail := data[e.FooterOffset:]
		recs, err := ReadStripeRange(context.Background(), format.FootedPart{Size: e.ObjectSize, Tail: tail, Offset: e.Offset, Data: data[e.Offset : e.Offset+e.Length], Index: e.Part}, []string{"text", "id"})
		if err != nil {
			t.Fatalf("stripe %d: %v", i, err)
		}
		for _, r := range recs {
			if got := r.Schema().Field(0).Name + "," + r.Schema().Field(1).Name; got != "text,id" || r.NumCols() != 2 {
				t.Fatalf("projected columns %s", r.Schema())
			}
			if _, ok := r.Column(1).(*array.Int64); !ok {
				t.Fatalf("id is %s", r.Column(1).DataType())
			}
			rows += r.NumRows()
			r.Release()
		}
		rows -= e.Samples
	}
	if rows != 0 {
		t.Fatalf("the stripes decoded to %d rows more than the index says", rows)
	}
}

func TestRefusals(t *testing.T) {
	data := pyarrowFile(t)
	f, err := indexDir(t, map[string][]byte{"a.orc": data})
	if err != nil {
		t.Fatal(err)
	}
	e := f.Shards[0]
	stripe, tail := data[e.Offset:e.Offset+e.Length], data[e.FooterOffset:]
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"a file too short", func() error { _, err := indexDir(t, map[string][]byte{"a.orc": []byte("OR")}); return err }, "too short for ORC"},
		{"not ORC", func() error {
			_, err := indexDir(t, map[string][]byte{"a.orc": bytes.Repeat([]byte{7}, 100)})
			return err
		}, "a.orc: corrupt ORC file"},
		{"a cut file", func() error { _, err := indexDir(t, map[string][]byte{"a.orc": data[:len(data)-1]}); return err }, "a.orc: corrupt ORC file"},
		{"a stripe outside the file", func() error {
			_, err := ReadStripeRange(context.Background(), format.FootedPart{Size: e.ObjectSize, Tail: tail, Offset: e.Offset, Data: stripe, Index: 99}, nil)
			return err
		}, "stripe 99 is outside the file's"},
		{"a stripe at another offset", func() error {
			_, err := ReadStripeRange(context.Background(), format.FootedPart{Size: e.ObjectSize, Tail: tail, Offset: e.Offset + 1, Data: stripe, Index: 0}, nil)
			return err
		}, "re-run shardfeed index"},
		{"an unknown column", func() error {
			_, err := ReadStripeRange(context.Background(), format.FootedPart{Size: e.ObjectSize, Tail: tail, Offset: e.Offset, Data: stripe, Index: 0}, []string{"nope"})
			return err
		}, `no column "nope": the file's columns are id,`},
		{"a corrupt stripe", func() error {
			bad := bytes.Clone(stripe)
			for i := range bad {
				bad[i] ^= 0x5a
			}
			_, err := ReadStripeRange(context.Background(), format.FootedPart{Size: e.ObjectSize, Tail: tail, Offset: e.Offset, Data: bad, Index: 0}, nil)
			return err
		}, "corrupt ORC file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
