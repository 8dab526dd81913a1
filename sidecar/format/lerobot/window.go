package lerobot

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// DefaultTolerance is LeRobotDataset's default tolerance_s: how far, in
// seconds, a window's delta may be from a whole number of frames, and a
// decoded frame's time from the one asked for.
const DefaultTolerance = 1e-4

// MaxWindow bounds the offsets of one key's window.
const MaxWindow = 1024

// Windows are a stream's delta timestamps as frame offsets, per key:
// each sample of key K becomes the rows at its index plus each offset,
// held at the episode's edges, with a K_is_pad mask.
type Windows struct {
	// Keys in order.
	Keys []string
	// Offsets per key, in frames.
	Offsets map[string][]int
}

// PadSuffix names a windowed key's mask of padded steps, as LeRobot's.
const PadSuffix = "_is_pad"

// NewWindows turns delta timestamps (seconds per key) into frame offsets
// at fps, as LeRobotDataset does: each delta must be a whole number of
// frames within tolerance seconds (check_delta_timestamps), and is
// rounded half to even, as Python's round (get_delta_indices).
func NewWindows(deltas map[string][]float64, fps, tolerance float64) (*Windows, error) {
	if len(deltas) == 0 {
		return nil, nil
	}
	if !(fps > 0) || math.IsInf(fps, 0) {
		return nil, fmt.Errorf("fps %v: a window needs a positive frame rate", fps)
	}
	if !(tolerance >= 0) || math.IsInf(tolerance, 0) {
		return nil, fmt.Errorf("tolerance %v s: it must be 0 or more", tolerance)
	}
	w := &Windows{Offsets: map[string][]int{}}
	for k := range deltas {
		w.Keys = append(w.Keys, k)
	}
	slices.Sort(w.Keys)
	var off []string
	for _, k := range w.Keys {
		ds := deltas[k]
		if len(ds) == 0 || len(ds) > MaxWindow {
			return nil, fmt.Errorf("deltaTimestamps[%q] has %d deltas: give 1 to %d", k, len(ds), MaxWindow)
		}
		if strings.HasSuffix(k, PadSuffix) {
			return nil, fmt.Errorf("deltaTimestamps[%q]: a key ending in %s names a window's mask, not a feature", k, PadSuffix)
		}
		offsets := make([]int, len(ds))
		var bad []string
		for i, d := range ds {
			if math.IsNaN(d) || math.Abs(d*fps) > 1<<30 {
				return nil, fmt.Errorf("deltaTimestamps[%q][%d] = %v s is not a time shardfeed can window by", k, i, d)
			}
			var whole bool
			if offsets[i], whole = DeltaFrames(d, fps, tolerance); !whole {
				bad = append(bad, fmt.Sprint(d))
			}
		}
		if bad != nil {
			off = append(off, fmt.Sprintf("%s: %s", k, strings.Join(bad, ", ")))
		}
		w.Offsets[k] = offsets
	}
	if off != nil {
		return nil, fmt.Errorf("deltaTimestamps outside the tolerance of %v s: %s; each must be a multiple of 1/%v s (LeRobot's check_delta_timestamps)", tolerance, strings.Join(off, "; "), fps)
	}
	return w, nil
}

// DeltaFrames is delta d seconds in frames at fps, rounded half to even
// as Python's round (LeRobot's get_delta_indices), and whether it is a
// whole number of frames within tolerance seconds
// (check_delta_timestamps).
func DeltaFrames(d, fps, tolerance float64) (int, bool) {
	frames := d * fps
	r := math.RoundToEven(frames)
	return int(r), math.Abs(frames-r)/fps <= tolerance
}

// Query sets rows[j] to the frame that offset j of a window reads for the
// frame at idx of the episode [start, end) (absolute indices), held at
// the episode's first and last frames, and pad[j] where it was held.
func Query(idx, start, end int64, offsets []int, rows []int64, pad []bool) {
	for j, o := range offsets {
		q := idx + int64(o)
		pad[j] = q < start || q >= end
		rows[j] = max(start, min(end-1, q))
	}
}
