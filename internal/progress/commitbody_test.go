package progress

import (
	"strings"
	"testing"
)

func TestParseCommitAcceptsExactlyTheDocumentedFields(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Commit
		says string // "" = accepted
	}{
		{"epoch and step", `{"epoch":1,"step":3}`, Commit{Epoch: 1, Step: 3}, ""},
		{"resumed", ` {"step":0, "epoch":2, "resumed":true} `, Commit{Epoch: 2, Step: 0, Resumed: true}, ""},
		{"resumed false", `{"epoch":0,"step":0,"resumed":false}`, Commit{}, ""},
		{"empty object", `{}`, Commit{}, `field "epoch" is required`},
		{"null", `null`, Commit{}, "one JSON object"},
		{"empty body", ``, Commit{}, "one JSON object"},
		{"array", `[1,2]`, Commit{}, "one JSON object"},
		{"no epoch", `{"step":3}`, Commit{}, `field "epoch" is required`},
		{"no step", `{"epoch":3}`, Commit{}, `field "step" is required`},
		{"duplicate key", `{"epoch":1,"step":3,"step":4}`, Commit{}, `field "step" appears twice`},
		{"another case", `{"Epoch":1,"step":3}`, Commit{}, `unknown field "Epoch" (fields are case-sensitive)`},
		{"unknown field", `{"epoch":1,"step":3,"stp":5}`, Commit{}, `unknown field "stp"`},
		{"fraction", `{"epoch":1,"step":3.5}`, Commit{}, `"step" must be a non-negative integer, got 3.5`},
		{"exponent", `{"epoch":1e3,"step":3}`, Commit{}, `"epoch" must be a non-negative integer`},
		{"negative", `{"epoch":-1,"step":3}`, Commit{}, `"epoch" must be a non-negative integer, got -1`},
		{"string number", `{"epoch":"1","step":3}`, Commit{}, `got "1"`},
		{"huge", `{"epoch":1,"step":99999999999999999999}`, Commit{}, `"step" must be a non-negative integer`},
		{"resumed not bool", `{"epoch":1,"step":3,"resumed":1}`, Commit{}, `"resumed" must be true or false`},
		{"trailing object", `{"epoch":1,"step":3}{"epoch":9,"step":9}`, Commit{}, "nothing after it"},
		{"trailing garbage", `{"epoch":1,"step":3} x`, Commit{}, "nothing after it"},
		{"unterminated", `{"epoch":1,"step":3`, Commit{}, "not valid JSON"},
		{"form encoding", `epoch=1&step=3`, Commit{}, "one JSON object"},
		{"too long", `{"epoch":1,"step":3,"resumed":false` + strings.Repeat(" ", CommitBodyLimit) + `}`, Commit{}, "over 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCommit([]byte(tt.body))
			if tt.says == "" {
				if err != nil || got != tt.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %+v, %v; want an error saying %q", got, err, tt.says)
			}
		})
	}
}
