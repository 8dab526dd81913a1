package mp4

// Clips of the videos LeRobot's writer wrote (the lerobot format's
// recording: AV1, H.264, HEVC with open GOPs) read back as the samples
// they were cut from, and the pinned FFmpeg build decodes each to the
// very frames the whole file decodes to at those times.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// decodeYUV is every frame ffmpeg shows of the file, in presentation
// order, as yuv420p.
func decodeYUV(t *testing.T, ffmpeg string, file []byte, frame int) [][]byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.mp4")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := exec.Command(ffmpeg, "-v", "error", "-i", path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for len(raw) >= frame {
		out = append(out, raw[:frame])
		raw = raw[frame:]
	}
	return out
}

func TestClipsDecodeToTheFramesTheyWereCutFrom(t *testing.T) {
	ffmpeg := filepath.Join("..", "..", "..", "..", "bin", "ffmpeg-lgpl", "bin", "ffmpeg")
	if _, err := os.Stat(ffmpeg); err != nil {
		t.Fatalf("the pinned FFmpeg build is not in bin/ (make tools-video): %v", err)
	}
	for _, path := range testenv.GoldenFiles(t, filepath.Join("..", "testdata", "golden"), ".mp4", 8) {
		t.Run(path, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mv, err := parse(t, raw)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := mv.Video()
			if err != nil {
				t.Fatal(err)
			}
			frame := int(tr.Width)*int(tr.Height) + 2*((int(tr.Width)+1)/2)*((int(tr.Height)+1)/2)
			whole := decodeYUV(t, ffmpeg, raw, frame)
			shown := make([]int, len(tr.Samples)) // decode order to presentation order
			order := make([]int, len(tr.Samples))
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int { return int(tr.Samples[a].PTS() - tr.Samples[b].PTS()) })
			for rank, s := range order {
				shown[s] = rank
			}
			if len(whole) != len(tr.Samples) {
				t.Fatalf("the whole file decodes to %d frames, it has %d samples", len(whole), len(tr.Samples))
			}
			for _, want := range []int{0, 1, 2, 5, len(tr.Samples) / 2, len(tr.Samples) - 1} {
				want = min(want, len(tr.Samples)-1)
				first, err := tr.DecodeStart(want, tr.Samples[want].PTS())
				if err != nil {
					t.Fatal(err)
				}
				last := min(want+2, len(tr.Samples)-1)
				clip, err := tr.Clip(first, last, func(i int) ([]byte, error) {
					s := tr.Samples[i]
					return raw[s.Offset : s.Offset+int64(s.Size)], nil
				})
				if err != nil {
					t.Fatal(err)
				}
				back, err := parse(t, clip)
				if err != nil {
					t.Fatalf("the clip of samples [%d, %d] does not read back: %v", first, last, err)
				}
				ct, err := back.Video()
				if err != nil {
					t.Fatal(err)
				}
				if ct.Codec != tr.Codec || !bytes.Equal(ct.Config, tr.Config) || len(ct.Samples) != last-first+1 {
					t.Fatalf("the clip of samples [%d, %d] is %s of %d samples", first, last, ct.Codec, len(ct.Samples))
				}
				for i, s := range ct.Samples {
					o := tr.Samples[first+i]
					if s.Size != o.Size || s.Key != o.Key || s.PTS()-ct.Edit != o.PTS()-tr.clipStart(first, last) {
						t.Fatalf("clip sample %d is %+v (edit %d), the file's %+v", i, s, ct.Edit, o)
					}
				}
				// The clip's frames from its first keyframe on (a leading
				// picture before it cannot be decoded from it) are the
				// whole file's at the same times; the wanted one is at
				// ClipTime.
				frames := decodeYUV(t, ffmpeg, clip, frame)
				var from []int
				for s := first; s <= last; s++ {
					if tr.Samples[s].PTS() >= tr.Samples[first].PTS() {
						from = append(from, shown[s])
					}
				}
				slices.Sort(from)
				if len(frames) != len(from) {
					t.Fatalf("the clip of samples [%d, %d] decodes to %d frames, want %d", first, last, len(frames), len(from))
				}
				for k, rank := range from {
					if !bytes.Equal(frames[k], whole[rank]) {
						t.Fatalf("the clip of samples [%d, %d]: its frame %d is not the file's frame %d", first, last, k, rank)
					}
				}
				if at := tr.ClipTime(first, last, want); at < 0 || at*float64(tr.Timescale) != float64(tr.Samples[want].PTS()-tr.clipStart(first, last)) {
					t.Fatalf("ClipTime %v", at)
				}
			}
		})
	}
}

func TestClipRefusesWhatItCannotCut(t *testing.T) {
	m := movie{sizes: []uint32{5, 5, 5}, perChunk: []uint32{3}, deltas: 1, keys: []uint32{1}, edit: -1}
	mv, err := parse(t, m.file())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := mv.Video()
	data := func(int) ([]byte, error) { return make([]byte, 5), nil }
	for _, tc := range []struct {
		first, last int
		data        func(int) ([]byte, error)
		want        string
	}{
		{1, 2, data, "not one"},
		{0, 3, data, "of a track of 3"},
		{2, 1, data, "of a track of 3"},
		{0, 2, func(int) ([]byte, error) { return make([]byte, 4), nil }, "the track says 5"},
	} {
		if _, err := tr.Clip(tc.first, tc.last, tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Clip(%d, %d): %v, want an error saying %q", tc.first, tc.last, err, tc.want)
		}
	}
}
