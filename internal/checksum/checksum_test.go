package checksum

import (
	"strings"
	"testing"
)

// Digests of "" and "shardfeed" as Python's hashlib and xxhash print them
// (hexdigest), which is what MDS indexes record.
func TestDigestsMatchPythonHexdigest(t *testing.T) {
	tests := []struct {
		algo, data, want string
	}{
		{"md5", "", "d41d8cd98f00b204e9800998ecf8427e"},
		{"sha1", "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{"sha256", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"sha3_256", "", "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"},
		{"xxh64", "", "ef46db3751d8e999"},
		{"xxh3_64", "", "2d06800538d394c2"},
		{"xxh128", "", "99aa06d3014798d86001c324468d497f"},
	}
	for _, tt := range tests {
		t.Run(tt.algo, func(t *testing.T) {
			got, err := Of(tt.algo, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got.Hex != tt.want {
				t.Errorf("%s(%q) = %s, want %s", tt.algo, tt.data, got.Hex, tt.want)
			}
			parsed, err := Parse(got.String())
			if err != nil || parsed != got {
				t.Errorf("Parse(%q) = %v, %v", got.String(), parsed, err)
			}
		})
	}
}

func TestParseRejectsClearly(t *testing.T) {
	tests := []struct{ in, want string }{
		{"xxh64", "write algo:hex"},
		{"crc32:00", "not supported"},
		{"sha1:zz", "not hex"},
		{"sha1:", "not hex"},
	}
	for _, tt := range tests {
		if _, err := Parse(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
	if s, err := Parse(""); err != nil || !s.IsZero() || s.New() != nil {
		t.Errorf("Parse(\"\") = %v, %v", s, err)
	}
}

// Only the SHA-2 and SHA-3 families name bytes someone could not forge;
// every algorithm an index may record is one or the other.
func TestOnlyTheSHAFamiliesAreCollisionResistant(t *testing.T) {
	strong := map[string]bool{"sha224": true, "sha256": true, "sha384": true, "sha512": true,
		"sha3_224": true, "sha3_256": true, "sha3_384": true, "sha3_512": true}
	for algo := range algorithms {
		sum, err := Of(algo, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if got := sum.CollisionResistant(); got != strong[algo] {
			t.Errorf("%s: collision resistant %v, want %v", algo, got, strong[algo])
		}
	}
	if (Sum{}).CollisionResistant() {
		t.Error("no sum is collision resistant")
	}
}
