package webdataset_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

// oneSampleTar is a tar of one member, a.txt.
func oneSampleTar(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	if err := w.WriteHeader(&tar.Header{Name: "a.txt", Size: 2, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("hi"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A tar that is not one is refused at index, naming it, as webdataset
// refuses it (tarfile's ReadError('empty file')): a failed upload must not
// pass as a tar of no samples. A tar of its end-of-archive blocks alone is
// one, of no samples, as webdataset reads it.
func TestIndexRefusesAnEmptyFileAsATar(t *testing.T) {
	var empty bytes.Buffer
	if err := tar.NewWriter(&empty).Close(); err != nil {
		t.Fatal(err)
	}
	one := oneSampleTar(t)
	for _, c := range []struct {
		name    string
		files   map[string][]byte
		want    string // in the error; "" for none
		samples int64
	}{
		{"zero bytes", map[string][]byte{"a.tar": nil, "b.tar": one}, "a.tar: the file is empty (0 bytes)", 0},
		{"zero bytes, gzipped name", map[string][]byte{"a.tar.gz": nil}, "a.tar.gz: the file is empty (0 bytes)", 0},
		{"end-of-archive blocks only", map[string][]byte{"a.tar": empty.Bytes(), "b.tar": one}, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, format.IndexOptions{})
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "re-upload") {
					t.Fatalf("got %v, want an error saying %q and how to fix it", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, s := range f.Shards {
				n += s.Samples
			}
			if n != c.samples {
				t.Fatalf("%d samples, want %d", n, c.samples)
			}
		})
	}
}

// slowStore holds the reads of every object but bad until their context
// ends: the tars read while another fails.
type slowStore struct {
	store.Store
	bad string
}

func (s slowStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key != s.bad && strings.HasSuffix(key, ".tar") {
		<-ctx.Done()
		return nil, fmt.Errorf("reading %s: %w", key, ctx.Err())
	}
	return s.Store.Get(ctx, key, off, n)
}

// The tar whose failure stops the indexing is the one named, not the
// earlier tars its failure cancelled (which say only "context canceled").
func TestIndexNamesTheTarThatFailedNotThoseItCancelled(t *testing.T) {
	dir := t.TempDir()
	one := oneSampleTar(t)
	for name, data := range map[string][]byte{"a.tar": one, "b.tar": one, "z.tar": bytes.Repeat([]byte("not a tar "), 100)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st := slowStore{Store: formattest.OpenDir(t, dir), bad: "z.tar"}
	_, err := formats.Default().Index(context.Background(), st, datav1alpha1.FormatWebDataset, format.IndexOptions{Concurrency: 3})
	if err == nil || !strings.Contains(err.Error(), "z.tar: corrupt tar") || strings.Contains(err.Error(), "canceled") {
		t.Fatalf("got %v, want the error of z.tar alone", err)
	}
}
