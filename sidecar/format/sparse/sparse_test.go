package sparse

import (
	"io"
	"strings"
	"testing"
)

func TestReadsOnlyFetchedRanges(t *testing.T) {
	f := New(100, Range{Offset: 10, Data: []byte("0123456789")}, Range{Offset: 90, Data: []byte("tail000000")})
	tests := []struct {
		off  int64
		n    int
		want string
		err  string
	}{
		{off: 12, n: 3, want: "234"},
		{off: 90, n: 10, want: "tail000000"},
		{off: 18, n: 3, err: "[18, 21) of the file were not fetched"},
		{off: 50, n: 1, err: "not fetched"},
	}
	for _, tt := range tests {
		p := make([]byte, tt.n)
		_, err := f.ReadAt(p, tt.off)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ReadAt(%d) = %v, want %q", tt.off, err, tt.err)
			}
			continue
		}
		if err != nil || string(p) != tt.want {
			t.Errorf("ReadAt(%d) = %q, %v", tt.off, p, err)
		}
	}
	if pos, _ := f.Seek(-10, io.SeekEnd); pos != 90 {
		t.Fatalf("Seek end = %d", pos)
	}
	p := make([]byte, 4)
	if _, err := f.Read(p); err != nil || string(p) != "tail" {
		t.Fatalf("Read after seek = %q, %v", p, err)
	}
}
