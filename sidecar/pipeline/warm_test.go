package pipeline

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkCopyShuffledRows gathers batches of 512 rows of 8 KiB, in a
// shuffled order, from a 512 MiB mapped file (rows at unaligned offsets,
// as in an MDS shard), into a 4 MiB batch: CopyTo, which warms the rows
// it copies next, against the same copies without warming.
//
//	go test ./sidecar/pipeline -run '^$' -bench CopyShuffledRows -count 6
func BenchmarkCopyShuffledRows(b *testing.B) {
	const (
		rowBytes = 8 << 10
		rows     = 64 << 10
		batch    = 512
		header   = 100
	)
	path := filepath.Join(b.TempDir(), "shard")
	if err := os.WriteFile(path, make([]byte, header+rows*rowBytes), 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, header+rows*rowBytes, syscall.PROT_READ, syscall.MAP_SHARED)
	_ = f.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Munmap(data) })
	var sum byte
	for i := 0; i < len(data); i += 4096 { // fault every page in before either is timed
		sum += data[i]
	}
	if sum != 0 {
		b.Fatal("the file is not zeroes")
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(rows)
	dst := make([]byte, batch*rowBytes)
	var m MessageWriter
	collect := func(i int) {
		lo := (i * batch) % rows
		for _, r := range order[lo : lo+batch] {
			m.parts = append(m.parts, part{buf: data[header+r*rowBytes : header+(r+1)*rowBytes]})
		}
	}
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(batch * rowBytes)
		for i := 0; b.Loop(); i++ {
			collect(i)
			n := 0
			for _, p := range m.parts {
				n += copy(dst[n:], p.buf)
			}
			m.parts = m.parts[:0]
		}
	})
	b.Run("CopyTo", func(b *testing.B) {
		b.SetBytes(batch * rowBytes)
		for i := 0; b.Loop(); i++ {
			collect(i)
			m.CopyTo(dst)
		}
	})
}
