package source

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func schemaOf(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

// Streams of different columns are refused, or with union served as the
// union of their columns, promoted where they share one, nullable where
// some stream lacks it; a stream's rows are null in the columns it lacks.
func TestUnifyUnionOfColumns(t *testing.T) {
	images := &Stream{Name: "images", native: schemaOf(
		arrow.Field{Name: "__key__", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int32})}
	tokens := &Stream{Name: "tokens", native: schemaOf(
		arrow.Field{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Uint16)},
		arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64})}
	for _, c := range []struct {
		name  string
		union bool
		want  string
	}{
		{"refused", false, `stream "tokens" has columns [n, tokens], stream "images" has [__key__, n]`},
		{"union", true, "__key__: utf8, n: int64, tokens: list<item: uint16, nullable>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			served, err := Unify([]*Stream{images, tokens}, c.union)
			if !c.union {
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "spec.missingColumns: null") {
					t.Fatalf("got %v, want %q and the way out", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range served.Fields() {
				got = append(got, f.Name+": "+f.Type.String())
				if (f.Name != "n") != f.Nullable {
					t.Errorf("column %s nullable %t: a column some stream lacks is nullable", f.Name, f.Nullable)
				}
			}
			if strings.Join(got, ", ") != c.want {
				t.Fatalf("served %s, want %s", strings.Join(got, ", "), c.want)
			}
			// A decoded shard of the tokens stream conforms with a null
			// __key__ per row.
			b := array.NewRecordBuilder(memory.DefaultAllocator, tokens.native)
			defer b.Release()
			b.Field(0).(*array.ListBuilder).AppendNull()
			b.Field(0).(*array.ListBuilder).AppendNull()
			b.Field(1).(*array.Int64Builder).AppendValues([]int64{4, 5}, nil)
			rec := b.NewRecordBatch()
			defer rec.Release()
			out, err := tokens.conform(context.Background(), []arrow.RecordBatch{rec}, served)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if out.NumRows() != 2 || out.Column(0).NullN() != 2 || out.Column(1).(*array.Int64).Value(1) != 5 {
				t.Fatalf("conformed to %v", out)
			}
		})
	}
}
