// Package checksum computes and checks the content hashes that shard
// indexes record, written "algo:hex" (e.g. "xxh64:ef46db3751d8e999"), with
// the algorithm names and hex digests of MosaicML Streaming's MDS indexes.
package checksum

import (
	"crypto/md5"  //nolint:gosec // MDS indexes record md5; it detects corruption, not attacks
	"crypto/sha1" //nolint:gosec // MDS indexes record sha1; likewise
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

var algorithms = map[string]func() hash.Hash{
	"md5":      md5.New,
	"sha1":     sha1.New,
	"sha224":   sha256.New224,
	"sha256":   sha256.New,
	"sha384":   sha512.New384,
	"sha512":   sha512.New,
	"sha3_224": func() hash.Hash { return sha3.New224() },
	"sha3_256": func() hash.Hash { return sha3.New256() },
	"sha3_384": func() hash.Hash { return sha3.New384() },
	"sha3_512": func() hash.Hash { return sha3.New512() },
	"xxh64":    func() hash.Hash { return xxhash.New() },
	"xxh3_64":  func() hash.Hash { return xxh3.New() },
	"xxh3_128": func() hash.Hash { return xxh3.New128() },
	"xxh128":   func() hash.Hash { return xxh3.New128() },
}

// Algorithms lists the supported algorithm names, sorted.
func Algorithms() []string {
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Sum is an expected digest: an algorithm and its hex digest.
type Sum struct {
	Algo string
	Hex  string
}

// Parse reads "algo:hex". An empty string is the zero Sum (no check).
func Parse(s string) (Sum, error) {
	if s == "" {
		return Sum{}, nil
	}
	algo, digest, ok := strings.Cut(s, ":")
	if !ok {
		return Sum{}, fmt.Errorf("hash %q: write algo:hex, e.g. xxh64:ef46db3751d8e999", s)
	}
	if _, ok := algorithms[algo]; !ok {
		return Sum{}, fmt.Errorf("hash algorithm %q is not supported: use one of %s", algo, strings.Join(Algorithms(), ", "))
	}
	if _, err := hex.DecodeString(digest); err != nil || digest == "" {
		return Sum{}, fmt.Errorf("hash %q: the digest is not hex", s)
	}
	return Sum{Algo: algo, Hex: strings.ToLower(digest)}, nil
}

// IsZero reports a Sum that checks nothing.
func (s Sum) IsZero() bool { return s.Algo == "" }

// CollisionResistant says whether bytes of the sum can be trusted to be
// the ones the sum was taken of, against someone who chooses them: the
// SHA-2 and SHA-3 families. xxh64, xxh3, md5 and sha1 detect corruption,
// not forgery (a second preimage of xxh64 takes a moment).
func (s Sum) CollisionResistant() bool {
	switch s.Algo {
	case "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384", "sha3_512":
		return true
	}
	return false
}

func (s Sum) String() string {
	if s.IsZero() {
		return ""
	}
	return s.Algo + ":" + s.Hex
}

// New returns a hash of the algorithm, or nil for the zero Sum.
func (s Sum) New() hash.Hash {
	if s.IsZero() {
		return nil
	}
	return algorithms[s.Algo]()
}

// Of returns the digest of data with algo.
func Of(algo string, data []byte) (Sum, error) {
	f, ok := algorithms[algo]
	if !ok {
		return Sum{}, fmt.Errorf("hash algorithm %q is not supported: use one of %s", algo, strings.Join(Algorithms(), ", "))
	}
	h := f()
	h.Write(data)
	return Sum{Algo: algo, Hex: hex.EncodeToString(h.Sum(nil))}, nil
}
