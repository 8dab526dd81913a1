package webdataset

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// seedTar writes a small tar with Go's archive/tar in each header format
// (the fuzzer's seeds; the oracle tests check tars webdataset writes).
func seedTar(tb testing.TB, f tar.Format, long bool) []byte {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for i, m := range []struct{ name, body string }{
		{"a.cls", "3"}, {"a.json", `{"x": 1}`}, {"a.txt", "hi"}, {"b.cls", " 4\n"}, {"b.seg.png", "\x89PNG"}, {"__meta__", "{}"},
	} {
		name := m.name
		if long && i%2 == 0 {
			name = "d/" + string(bytes.Repeat([]byte("x"), 120)) + "/" + name
		}
		if err := w.WriteHeader(&tar.Header{Name: name, Size: int64(len(m.body)), Mode: 0o644, Format: f, Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		_, _ = w.Write([]byte(m.body))
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// FuzzWalkAndDecode: any bytes are walked and decoded or refused, never a
// panic, and bytes that walk decode to the samples the walk counted.
func FuzzWalkAndDecode(f *testing.F) {
	f.Add(seedTar(f, tar.FormatUSTAR, false))
	f.Add(seedTar(f, tar.FormatPAX, true))
	f.Add(seedTar(f, tar.FormatGNU, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		exts := map[string]bool{}
		var n int64
		err := walk(bytesBlocks(data), int64(len(data)), func(s *sample) error {
			n++
			for _, e := range s.exts {
				exts[e] = true
			}
			return nil
		})
		if err != nil {
			return
		}
		schema, err := streamSchema(exts, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Typed columns may refuse a member's value; raw bytes never do.
		raw := make([]indexfile.Field, len(schema))
		for i, fl := range schema {
			raw[i] = indexfile.Field{Name: fl.Name, Type: "binary"}
		}
		raw[0].Type = "utf8"
		rec, err := Decode(raw, data, n, nil)
		if err != nil {
			t.Fatalf("walked %d samples and does not decode: %v", n, err)
		}
		if rec.NumRows() != n {
			t.Fatalf("decoded %d samples of %d", rec.NumRows(), n)
		}
		rec.Release()
		if rec, err := Decode(schema, data, n, nil); err == nil {
			rec.Release()
		}
		// The in-memory walk and the ranged one agree.
		var m int64
		src := &rangedBlocks{ctx: context.Background(), st: memStore(data), key: "t", size: int64(len(data))}
		if err := walk(src, int64(len(data)), func(*sample) error { m++; return nil }); err != nil || m != n {
			t.Fatalf("the ranged walk found %d samples (%v), the in-memory one %d", m, err, n)
		}
	})
}

func TestParseIntAsPython(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"3", 3, true}, {" 4\n", 4, true}, {"-12", -12, true}, {"+7", 7, true}, {"1_000", 1000, true},
		{"", 0, false}, {"_1", 0, false}, {"1__0", 0, false}, {"--1", 0, false}, {"0x10", 0, false}, {"1.0", 0, false}} {
		got, err := parseInt([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseInt(%q) = %d, %v; want %d (ok %t)", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestKeyExtAsWebDataset(t *testing.T) {
	for _, c := range []struct{ name, key, ext string }{
		{"a.jpg", "a", "jpg"}, {"a.seg.PNG", "a", "seg.png"}, {"dir/a.b/c.txt", "dir/a.b/c", "txt"},
		{"noext", "", ""}, {"__meta__", "", ""}, {"__x__/y.txt", "", ""}, {"dir/.hidden.txt", "dir/", "hidden.txt"},
	} {
		key, ext, ok := keyExt(c.name)
		if key != c.key || ext != c.ext || ok != (c.key != "") {
			t.Errorf("keyExt(%q) = %q, %q, %t; want %q, %q", c.name, key, ext, ok, c.key, c.ext)
		}
	}
}

// FuzzWidsIndex: any shardindex.json is read or refused, never a panic, and
// every url it resolves to a key names one under the stream's root.
func FuzzWidsIndex(f *testing.F) {
	f.Add([]byte(`{"__kind__": "wids-shard-index-v1", "wids_version": 1, "shardlist": [{"url": "a.tar", "nsamples": 3, "filesize": 10240}]}`), "")
	f.Add([]byte(`{"wids_version": 1, "shardlist": [{"url": "../x.tar", "nsamples": 1}, {"url": "/abs/y.tar", "nsamples": 2}]}`), "sub/")
	f.Add([]byte(`{"wids_version": 1, "base": "mem://", "shardlist": [{"url": "mem://d/./a.tar", "nsamples": 0}], "datasets": []}`), "mem://")
	f.Fuzz(func(t *testing.T, data []byte, base string) {
		wf, err := readWids(context.Background(), memStore(data))
		if err != nil || wf == nil {
			return
		}
		for _, s := range wf.Shardlist {
			if s.NSamples == nil || *s.NSamples < 0 {
				t.Fatalf("%q read with a count of %v", s.URL, s.NSamples)
			}
			for _, b := range []string{wf.Base, base} {
				key, ok := widsKey(memStore(nil), b, s.URL)
				if ok && (key == "" || key == "." || key == ".." || strings.HasPrefix(key, "../") || strings.HasPrefix(key, "/")) {
					t.Fatalf("%q (base %q) resolved to the key %q, outside the stream", s.URL, b, key)
				}
			}
		}
	})
}
