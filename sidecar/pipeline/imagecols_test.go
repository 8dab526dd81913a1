package pipeline

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/sidecar/images"
)

// spec.decode of a column the stream serves decoded already (a lerobot
// camera, uint8 (3, H, W)) says so and names what resizes it.
func TestDecodingAColumnServedDecodedSaysSo(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "observation.images.top", Type: arrow.FixedSizeListOf(3*40*56, arrow.PrimitiveTypes.Uint8)},
		{Name: "observation.state", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)},
	}, nil)
	spec := images.Spec{Resize: 8, Height: 8, Width: 8}
	for _, tc := range []struct{ column, want string }{
		{"observation.images.top", "served decoded already, fixed_size_list<item: uint8, nullable>[6720] (a lerobot stream's camera"},
		{"observation.state", "images are decoded from binary columns"},
	} {
		_, err := imageColumns(schema, map[string]images.Spec{tc.column: spec}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.column) {
			t.Errorf("%s: %v, want %q", tc.column, err, tc.want)
		}
	}
}
