package budget

import (
	"fmt"
	"testing"
)

// A source gets its burst, then nothing; another source its own; a total
// bounds them all; the table of sources stays bounded.
func TestEachSourceGetsItsBudgetAndAllTogetherTheTotal(t *testing.T) {
	b := New(0.001, 3, 4)
	for _, tt := range []struct {
		addr string
		want bool
	}{{"10.0.0.1:1", true}, {"10.0.0.1:2", true}, {"10.0.0.1:3", true}, {"10.0.0.1:4", false}, {"10.0.0.2:1", true}} {
		if got := b.Allow(tt.addr); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.addr, got, tt.want)
		}
	}
	total := New(1000, 10, 100).WithTotal(0.001, 2)
	if !total.Allow("a") || !total.Allow("b") || total.Allow("c") {
		t.Error("the total did not bound the sources together")
	}
	for i := range 100 {
		b.Allow(fmt.Sprintf("10.1.0.%d:1", i))
	}
	if len(b.sources) > 4 {
		t.Errorf("%d sources remembered, want at most 4", len(b.sources))
	}
}
