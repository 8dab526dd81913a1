package expr

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

var partitions = []Column{{"date", "utf8"}, {"region", "utf8"}, {"bucket", "int32"}, {"score", "float64"}, {"gold", "bool"}}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		src, want string
	}{
		{"region == 'eu'", ""},
		{"anything_goes(x) && y", ""}, // names are checked by Compile
		{"", "the expression is empty"},
		{"   ", "the expression is empty"},
		{"region == ", "not a CEL expression"},
		{"region = 'eu'", "not a CEL expression"},
		{strings.Repeat("a && ", 1000) + "a", "not a CEL expression"},
		{strings.Repeat("(", 200) + "a" + strings.Repeat(")", 200), "not a CEL expression"},
	} {
		err := Check(tc.src)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%.40q) = %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestCompileRefusals(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"region == 'eu' && zone == 'a' && zone != kind", []string{"no column zone, kind", "the columns are date, region, bucket, score, gold"}},
		{"bucket", []string{"not a bool", "region == 'eu'"}},
		{"region + 1 == 2", []string{"no matching overload"}},
		{"region ==", []string{"not a CEL expression"}},
	} {
		_, err := Compile(tc.src, partitions)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Compile(%q) = %v, want %q", tc.src, err, w)
			}
		}
	}
	if _, err := Compile("x", []Column{{"x", "date64"}}); err == nil || !strings.Contains(err.Error(), `column "x": type "date64" is not one of bool, int32`) {
		t.Errorf("an unknown type: %v", err)
	}
}

func TestEvalAndDecide(t *testing.T) {
	e, err := Compile("region == 'eu' && date >= '2024-01-02' && bucket < 2", partitions)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		known            map[string]any
		value, decided   bool
		wantErrSubstring string
	}{
		{"every column, selected", map[string]any{"date": "2024-01-02", "region": "eu", "bucket": int64(1), "score": 1.0, "gold": true}, true, true, ""},
		{"every column, not selected", map[string]any{"date": "2024-01-02", "region": "eu", "bucket": int64(2), "score": 1.0, "gold": true}, false, true, ""},
		{"an early date decides alone", map[string]any{"date": "2024-01-01"}, false, true, ""},
		{"a later date does not", map[string]any{"date": "2024-01-03"}, false, false, ""},
		{"a null region is not eu, whatever the bucket", map[string]any{"date": "2024-01-03", "region": nil, "bucket": int64(1)}, false, true, ""},
		// null && unknown is never true, where CEL leaves it unknown.
		{"a null region, the bucket unknown", map[string]any{"date": "2024-01-03", "region": nil}, false, true, ""},
		{"nothing known", map[string]any{}, false, false, ""},
		{"an int32 value", map[string]any{"date": "2024-01-03", "region": "eu", "bucket": Value(int32(0))}, true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, decided, err := e.Decide(tc.known)
			if err != nil || v != tc.value || decided != tc.decided {
				t.Fatalf("Decide = %v, %v, %v; want %v, %v", v, decided, err, tc.value, tc.decided)
			}
		})
	}
	// A null compared with < is null: not kept, and no error.
	if v, decided, err := e.Decide(map[string]any{"date": "2024-01-03", "region": "eu", "bucket": nil}); v || !decided || err != nil {
		t.Fatalf("a null bucket: %v, %v, %v", v, decided, err)
	}
	if _, err := e.Eval(map[string]any{"date": "2024-01-03"}); err == nil {
		t.Fatal("Eval without every column: no error")
	}
	// An expensive expression ends in an error, not a long evaluation.
	slow, err := Compile("[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f+bucket > 0))))))", partitions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Eval(map[string]any{"date": "", "region": "", "bucket": int64(1), "score": 0.0, "gold": false}); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("a costly expression: %v", err)
	}
}

func TestCompilePartialDecidesWhatTheKnownColumnsDecide(t *testing.T) {
	src := "region == 'eu' && date >= '2024-01-02' && bucket < 2"
	for _, tc := range []struct {
		name           string
		known          []Column
		values         map[string]any
		value, decided bool
	}{
		{"the first level, pruned", partitions[:1], map[string]any{"date": "2024-01-01"}, false, true},
		{"the first level, kept", partitions[:1], map[string]any{"date": "2024-01-02"}, false, false},
		{"the second level, pruned", partitions[:2], map[string]any{"date": "2024-01-02", "region": "us"}, false, true},
		{"the second level, a null", partitions[:2], map[string]any{"date": "2024-01-02", "region": nil}, false, true},
		{"the last level under a null", partitions[:3], map[string]any{"date": "2024-01-02", "region": nil, "bucket": int64(1)}, false, true},
		{"every level", partitions[:3], map[string]any{"date": "2024-01-02", "region": "eu", "bucket": int64(1)}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := CompilePartial(src, tc.known)
			if err != nil {
				t.Fatal(err)
			}
			v, decided, err := e.Decide(tc.values)
			if err != nil || v != tc.value || decided != tc.decided {
				t.Fatalf("Decide = %v, %v, %v; want %v, %v", v, decided, err, tc.value, tc.decided)
			}
		})
	}
	// Three-valued logic over what the unknown columns may be: null || x
	// may be true, !(null && x) may be true, null && x may not.
	for _, tc := range []struct {
		src     string
		decided bool
	}{
		{"region == 'eu' || bucket < 2", false},
		{"!(region == 'eu' && bucket < 2)", false},
		{"!(region == 'eu' || bucket < 2)", true},
		{"region == 'eu' ? bucket < 2 : false", true},
		{"region == null && bucket < 2", false},
		{"region != null && bucket < 2", true},
	} {
		e, err := CompilePartial(tc.src, partitions[:2])
		if err != nil {
			t.Fatal(err)
		}
		if v, decided, err := e.Decide(map[string]any{"date": "2024-01-02", "region": nil}); err != nil || v || decided != tc.decided {
			t.Errorf("%s with a null region: %v, %v, %v; want decided %v", tc.src, v, decided, err, tc.decided)
		}
	}
	// A comprehension's variable is no column.
	e, err := CompilePartial("['eu', 'uk'].exists(r, r == region)", []Column{{"region", "utf8"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, decided, err := e.Decide(map[string]any{"region": "uk"}); err != nil || !v || !decided {
		t.Fatalf("exists: %v, %v, %v", v, decided, err)
	}
}

// A null is unknown, as in SQL, Spark and pyarrow: a comparison or a
// function of it is null, && and || follow three-valued logic, and a row
// is kept only where the expression is true. x == null tests for a null.
func TestNullsAreUnknownAsInSQL(t *testing.T) {
	cols := []Column{{"lang", "utf8"}, {"score", "float64"}, {"n", "int64"}}
	for _, tc := range []struct {
		src         string
		lang, score any
		want        bool
	}{
		{"lang != 'de'", nil, 0.5, false},
		{"lang != 'de'", "en", 0.5, true},
		{"!(lang == 'de')", nil, 0.5, false},
		{"lang == null", nil, 0.5, true},
		{"null == lang", nil, 0.5, true},
		{"lang == null", "en", 0.5, false},
		{"lang != null", nil, 0.5, false},
		{"null != lang", "en", 0.5, true},
		{"lang != null && lang != 'de'", "en", 0.5, true},
		{"lang == null || lang != 'de'", nil, 0.5, true},
		{"lang == 'de' || score > 0.4", nil, 0.5, true},
		{"lang == 'de' || score > 0.6", nil, 0.5, false},
		{"score > 0.6 && lang != 'de'", nil, 0.5, false},
		{"!(lang != 'de' && score > 0.6)", nil, 0.5, true},
		{"!(lang != 'de' && score > 0.4)", nil, 0.5, false},
		{"lang in ['en', 'de']", nil, 0.5, false},
		{"lang.startsWith('e')", nil, 0.5, false},
		{"(lang == 'de') == false", nil, 0.5, false},
		{"lang == lang", nil, 0.5, false},
		{"score < 1.0", "en", nil, false},
		{"score == null && lang == 'en'", "en", nil, true},
		{"n == null", "en", 0.5, true},
		{"lang == 'de' ? false : true", nil, 0.5, false},
	} {
		t.Run(fmt.Sprintf("%s with lang=%v score=%v", tc.src, tc.lang, tc.score), func(t *testing.T) {
			e, err := Compile(tc.src, cols)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(map[string]any{"lang": tc.lang, "score": tc.score, "n": nil})
			if err != nil || got != tc.want {
				t.Fatalf("Eval = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	// A NaN still fails an ordering, with the advice to guard it.
	e, err := Compile("score < 1.0", cols)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(map[string]any{"lang": "en", "score": math.NaN(), "n": nil}); err == nil || !strings.Contains(err.Error(), "x == x") {
		t.Fatalf("a NaN ordering: %v", err)
	}
}
