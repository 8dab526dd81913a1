package bytesize

import "testing"

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{64 << 20, "64.0 MiB"}, {41 << 40, "41.0 TiB"}, {1 << 62, "4.0 EiB"},
	} {
		if got := Human(tt.n); got != tt.want {
			t.Errorf("Human(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
