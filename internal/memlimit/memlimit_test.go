package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		limit   int64
		ok, err bool
	}{
		{"max\n", 0, false, false},
		{"536870912\n", 536870912, true, false},
		{"0", 0, false, true},
		{"-1", 0, false, true},
		{"lots", 0, false, true},
	}
	for _, tt := range tests {
		limit, ok, err := Parse(tt.in)
		if limit != tt.limit || ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("Parse(%q) = %d, %v, %v; want %d, %v, error %v", tt.in, limit, ok, err, tt.limit, tt.ok, tt.err)
		}
	}
}

func TestApplySetsTheRuntimeLimitUnlessGOMEMLIMITIsSet(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	path := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(path, []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	got, err := Apply(path)
	if err != nil || got != 966367641 || debug.SetMemoryLimit(-1) != 966367641 {
		t.Fatalf("Apply = %d, %v; runtime limit %d; want 90%% of 1 GiB", got, err, debug.SetMemoryLimit(-1))
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "2GiB")
	if got, err := Apply(path); err != nil || got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set, Apply = %d, %v and the runtime limit became %d", got, err, debug.SetMemoryLimit(-1))
	}
	t.Setenv("GOMEMLIMIT", "")
	if got, err := Apply(filepath.Join(t.TempDir(), "absent")); err != nil || got != 0 {
		t.Fatalf("without a cgroup file, Apply = %d, %v", got, err)
	}
}
