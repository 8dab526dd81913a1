package expr

import "testing"

// Statistics rule a filter out only where no row within them can match,
// and never where a NaN row would make the filter fail to evaluate. A null
// row matches no comparison (three-valued logic): it never keeps a row
// group.
func TestExcludesOnlyWhatNoRowWithinTheStatisticsMatches(t *testing.T) {
	cols := []Column{{"id", "int64"}, {"score", "float64"}, {"lang", "utf8"}, {"ok", "bool"}, {"blob", "binary"}}
	ids := map[string]Stats{"id": {Min: int64(10), Max: int64(19), NullsKnown: true}}
	scores := map[string]Stats{"score": {Min: 0.0, Max: 1.0, NullsKnown: true}}
	langs := map[string]Stats{"lang": {Min: "fr", Max: "it", Nulls: 3, NullsKnown: true}}
	for _, tc := range []struct {
		filter string
		stats  map[string]Stats
		want   bool
	}{
		{"id < 10", ids, true},
		{"id < 11", ids, false},
		{"id <= 9", ids, true},
		{"id > 19", ids, true},
		{"id >= 19", ids, false},
		{"id == 20", ids, true},
		{"id == 15", ids, false},
		{"20 <= id", ids, true},
		{"5 > id", ids, true},
		{"id in [1, 2, 30]", ids, true},
		{"id in [1, 12]", ids, false},
		{"id > 100 || id < 5", ids, true},
		{"id > 100 || id < 11", ids, false},
		{"id > 100 && lang == 'en'", ids, true},
		{"lang == 'en' && id > 100", ids, true},
		{"id >= 19.5", ids, true},
		{"id >= 18.5", ids, false},
		{"!(id < 10)", ids, false}, // not understood: read
		{"id % 2 == 0", ids, false},
		// Floats: Parquet's writers leave a NaN out of min and max, and a
		// NaN fails an ordering: decided on the statistics only under a
		// conjunction with x == x (false for NaN), on either side.
		{"score > 1.0", scores, false},
		{"score > 1", scores, false},
		{"score != null && score > 1.0", scores, false},
		{"score == score && score > 1.0", scores, true},
		{"score > 1 && score == score", scores, true},
		{"score == score && (score > 1.0 || id < 10)", map[string]Stats{"score": scores["score"], "id": ids["id"]}, true},
		{"score == score || score > 1.0", scores, false},
		{"id > 5 && score == score && score > 1.0", map[string]Stats{"score": scores["score"], "id": ids["id"]}, true},
		{"(id > 5 && score == score) && score > 1.0", map[string]Stats{"score": scores["score"], "id": ids["id"]}, true},
		{"score > 1.0 && (id > 5 && score == score)", map[string]Stats{"score": scores["score"], "id": ids["id"]}, true},
		{"score > 1.0 && (id > 5 || score == score)", map[string]Stats{"score": scores["score"], "id": ids["id"]}, false},
		{"id == id && score > 1.0", map[string]Stats{"score": scores["score"], "id": ids["id"]}, false},
		{"score == 2.0", scores, true}, // NaN == 2.0 is false, not an error
		{"score in [2.0, 3.0]", scores, true},
		// Nulls are null under every comparison, never true.
		{"lang == 'en'", langs, true},
		{"lang in ['en', 'zz']", langs, true},
		{"lang == 'ga'", langs, false},
		{"lang > 'j'", langs, true},
		{"lang > 'j'", map[string]Stats{"lang": {Min: "fr", Max: "it", NullsKnown: true}}, true},
		{"id < 10", map[string]Stats{"id": {Min: int64(10), Max: int64(19)}}, true}, // null count unknown: no matter
		{"lang == null", langs, false},
		{"lang == null", map[string]Stats{"lang": {Min: "fr", Max: "it", NullsKnown: true}}, true},
		{"lang == null", map[string]Stats{"lang": {Min: "fr", Max: "it"}}, false}, // nulls unknown
		{"lang == null || id < 10", map[string]Stats{"lang": {Min: "fr", Max: "it", NullsKnown: true}, "id": ids["id"]}, true},
		{"id < 10", map[string]Stats{"id": {NullsKnown: true}}, false}, // no min/max
		{"id < 10", nil, false},
		{"ok == true", map[string]Stats{"ok": {Min: false, Max: false, NullsKnown: true}}, true},
		{"blob == b'x'", map[string]Stats{"blob": {Min: "a", Max: "b", NullsKnown: true}}, false}, // bytes: not compared
		{"score < 0.5", map[string]Stats{"score": {Min: 0.7, Max: 0.9, NullsKnown: true}}, false},
		{"score == score && score < 0.5", map[string]Stats{"score": {Min: 0.7, Max: 0.9, NullsKnown: true}}, true},
	} {
		e, err := Compile(tc.filter, cols)
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := e.Excludes(tc.stats); got != tc.want {
			t.Errorf("%s over %v: excludes %v, want %v", tc.filter, tc.stats, got, tc.want)
		}
	}
}
