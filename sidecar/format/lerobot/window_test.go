package lerobot

import (
	"slices"
	"strings"
	"testing"
)

func TestNewWindows(t *testing.T) {
	tests := []struct {
		name   string
		deltas map[string][]float64
		fps    float64
		tol    float64
		want   map[string][]int
		err    string
	}{
		{name: "none", deltas: nil, fps: 10},
		{name: "whole frames", deltas: map[string][]float64{"action": {0, 0.1, 0.2}, "observation.state": {-0.1, 0}}, fps: 10, tol: 1e-4,
			want: map[string][]int{"action": {0, 1, 2}, "observation.state": {-1, 0}}},
		// Python rounds half to even: 2.5 frames is 2, 3.5 is 4.
		{name: "half to even", deltas: map[string][]float64{"a": {0.25, 0.35, -0.25}}, fps: 10, tol: 0.1,
			want: map[string][]int{"a": {2, 4, -2}}},
		{name: "thirds at 30 fps", deltas: map[string][]float64{"a": {1.0 / 30, -2.0 / 30}}, fps: 30, tol: 1e-4,
			want: map[string][]int{"a": {1, -2}}},
		{name: "outside the tolerance", deltas: map[string][]float64{"a": {0.033}}, fps: 30, tol: 1e-4, err: "a: 0.033"},
		{name: "empty window", deltas: map[string][]float64{"a": {}}, fps: 30, tol: 1e-4, err: "has 0 deltas"},
		{name: "mask key", deltas: map[string][]float64{"a_is_pad": {0}}, fps: 30, tol: 1e-4, err: "mask"},
		{name: "no fps", deltas: map[string][]float64{"a": {0}}, fps: 0, tol: 1e-4, err: "positive frame rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWindows(tt.deltas, tt.fps, tt.tol)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if w != nil {
					t.Fatalf("windows %+v, want none", w)
				}
				return
			}
			for k, want := range tt.want {
				if !slices.Equal(w.Offsets[k], want) {
					t.Errorf("%s: %v, want %v", k, w.Offsets[k], want)
				}
			}
			if len(w.Keys) != len(tt.want) || !slices.IsSorted(w.Keys) {
				t.Errorf("keys %v", w.Keys)
			}
		})
	}
}

func TestQueryHoldsTheEdges(t *testing.T) {
	offsets := []int{-2, -1, 0, 1, 2}
	rows, pad := make([]int64, 5), make([]bool, 5)
	tests := []struct {
		idx  int64
		rows []int64
		pad  []bool
	}{
		{idx: 10, rows: []int64{10, 10, 10, 11, 12}, pad: []bool{true, true, false, false, false}},
		{idx: 12, rows: []int64{10, 11, 12, 13, 13}, pad: []bool{false, false, false, false, true}},
		{idx: 11, rows: []int64{10, 10, 11, 12, 13}, pad: []bool{true, false, false, false, false}},
	}
	for _, tt := range tests {
		Query(tt.idx, 10, 14, offsets, rows, pad)
		if !slices.Equal(rows, tt.rows) || !slices.Equal(pad, tt.pad) {
			t.Errorf("Query(%d) = %v %v, want %v %v", tt.idx, rows, pad, tt.rows, tt.pad)
		}
	}
}
