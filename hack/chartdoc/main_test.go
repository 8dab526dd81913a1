package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheChartsReadmeListsEveryValue(t *testing.T) {
	tests := []struct {
		name, values, schema, want, wantErr string
	}{
		{
			name:   "a value with its comment, type and default; one only the schema has",
			values: "# How many.\nreplicas: 2\nimage:\n  tag: \"\"\n",
			schema: `{"properties": {"replicas": {"type": "integer"}, "image": {"properties": {"tag": {"type": "string"}, "digest": {"type": "string", "description": "Pins it."}}}}}`,
			want:   "| `replicas` | integer | `2` | How many. |\n| `image.tag` | string | `\"\"` |  |\n| `image.digest` | string | (unset) | Pins it. |\n",
		},
		{
			name:    "a value the schema does not describe",
			values:  "replicas: 2\nrepilcas: 3\n",
			schema:  `{"properties": {"replicas": {"type": "integer"}}}`,
			wantErr: "values.yaml has repilcas, which values.schema.json does not describe",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]string{"values.yaml": tt.values, "values.schema.json": tt.schema} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out strings.Builder
			err := run(dir, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.HasSuffix(out.String(), tt.want) {
				t.Fatalf("got %v:\n%s\nwant it to end with:\n%s", err, out.String(), tt.want)
			}
		})
	}
}
