//go:build ffmpeg

package lerobot_test

// Clips (cameras: Clips), where FFmpeg is linked in: each row's clip,
// decoded on its own, shows at each of its times the very frame the
// sidecar serves decoded in that window slot (the frames checked against
// LeRobot's in golden_video_test.go), in every case of the recording, cut
// in shards of an episode and of three frames.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/sidecar/format/lerobot"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot/mp4"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

func TestClipsShowTheServedFrames(t *testing.T) {
	dir, m := golden(t)
	for kase, c := range m.Cases {
		if c.Frames != nil {
			continue // resized frames are the sidecar's; clips are decoded by the trainer
		}
		for name, c := range m.shardings(kase, c) {
			t.Run(name, func(t *testing.T) {
				cameras := m.videos(c)
				all := func(*arrow.Schema) []string { return nil }
				_, frames, _ := served(t, dir, c, all)
				c.Clips = true
				_, clips, schema := served(t, dir, c, all)
				for cam, shape := range cameras {
					if f, _ := schema.FieldsByName(cam); len(f) != 1 || f[0].Type.ID() != arrow.BINARY {
						t.Fatalf("%s is not served as clips: %v", cam, f)
					}
					size := shape[0] * shape[1] * shape[2]
					for b := range clips {
						checkClips(t, cam, size, shape, frames[b], clips[b])
					}
				}
			})
		}
	}
}

// checkClips decodes each row's clip of camera cam and compares the frame
// at each of its times with the frames' record's slot.
func checkClips(t *testing.T, cam string, size int, shape []int, frames, clips arrow.RecordBatch) {
	t.Helper()
	clipCol := column(t, clips, cam).(*array.Binary)
	timeCol := column(t, clips, cam+lerobot.TimeSuffix)
	want := column(t, frames, cam).(*array.FixedSizeList)
	vals := want.ListValues().(*array.Uint8).Uint8Values()
	for j := range int(clips.NumRows()) {
		var times []float64
		switch tc := timeCol.(type) {
		case *array.Float64:
			times = []float64{tc.Value(j)}
		case *array.FixedSizeList:
			n := int(tc.DataType().(*arrow.FixedSizeListType).Len())
			times = tc.ListValues().(*array.Float64).Float64Values()[(tc.Offset()+j)*n : (tc.Offset()+j+1)*n]
		default:
			t.Fatalf("%s%s is %s", cam, lerobot.TimeSuffix, timeCol.DataType())
		}
		row := vals[(want.Offset()+j)*len(times)*size : (want.Offset()+j+1)*len(times)*size]
		got := decodeClip(t, clipCol.Value(j), times, shape)
		for x := range times {
			if !bytes.Equal(got[x], row[x*size:(x+1)*size]) {
				t.Fatalf("%s row %d: its clip at %v s is not the frame served in slot %d", cam, j, times[x], x)
			}
		}
	}
}

// decodeClip decodes a clip on its own (its movie box and samples, as a
// trainer's decoder reads the file) and returns its frames shown at times,
// as RGB planes.
func decodeClip(t *testing.T, clip []byte, times []float64, shape []int) [][]byte {
	t.Helper()
	read := func(off, n int64) ([]byte, error) { return clip[off : off+n], nil }
	box, err := mp4.FindMovie(read, int64(len(clip)))
	if err != nil {
		t.Fatal(err)
	}
	mv, err := mp4.ParseMovie(clip[box.Offset:box.Offset+box.Size], int64(len(clip)))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := mv.Video()
	if err != nil {
		t.Fatal(err)
	}
	var packets []video.Packet
	for _, s := range tr.Samples {
		packets = append(packets, video.Packet{Data: clip[s.Offset : s.Offset+int64(s.Size)], PTS: s.PTS(), Key: s.Key})
	}
	at := map[int64][]int{}
	for x, sec := range times {
		pts := int64(math.Round(sec*float64(tr.Timescale))) + tr.Edit
		at[pts] = append(at[pts], x)
	}
	out := make([][]byte, len(times))
	err = video.Decode(video.Track{Codec: tr.Codec, Config: tr.Config, Width: int(tr.Width), Height: int(tr.Height)}, packets, func(f video.Frame) error {
		for _, x := range at[f.PTS()] {
			out[x] = make([]byte, shape[0]*shape[1]*shape[2])
			if err := f.RGB(out[x], shape[2], shape[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for x, f := range out {
		if f == nil {
			t.Fatalf("the clip shows no frame at %v s", times[x])
		}
	}
	return out
}

// The clips decoded as a trainer decodes them: the Python client's
// decode_clips, torchcodec on the CPU (LeRobot's pinned venv), gives the
// frames the sidecar decodes, within maxRGBDifference.
func TestClipsDecodeWithTorchcodec(t *testing.T) {
	python := filepath.Join("..", "..", "..", "bin", "venv-lerobot", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("LeRobot's venv is not in bin/ (make tools-lerobot): %v", err)
	}
	dir, m := golden(t)
	out := t.TempDir()
	type clipCase struct {
		Name   string      `json:"name"`
		Clips  []string    `json:"clips"`
		Times  [][]float64 `json:"times"`
		Shape  []int       `json:"shape"`
		Frames string      `json:"frames"`
	}
	var cases []clipCase
	for kase, c := range m.Cases {
		if c.Frames != nil {
			continue
		}
		all := func(*arrow.Schema) []string { return nil }
		_, frames, _ := served(t, dir, c, all)
		c.Clips = true
		_, clips, _ := served(t, dir, c, all)
		for cam, shape := range m.videos(c) {
			cc := clipCase{Name: kase + "/" + cam, Shape: shape, Frames: fmt.Sprintf("%d.u8", len(cases))}
			var want []byte
			for b := range clips {
				clipCol := column(t, clips[b], cam).(*array.Binary)
				timeCol := column(t, clips[b], cam+lerobot.TimeSuffix)
				fr := column(t, frames[b], cam).(*array.FixedSizeList)
				per := int(fr.DataType().(*arrow.FixedSizeListType).Len())
				vals := fr.ListValues().(*array.Uint8).Uint8Values()
				want = append(want, vals[fr.Offset()*per:(fr.Offset()+fr.Len())*per]...)
				for j := range int(clips[b].NumRows()) {
					name := fmt.Sprintf("%d-%d.mp4", len(cases), len(cc.Clips))
					if err := os.WriteFile(filepath.Join(out, name), clipCol.Value(j), 0o600); err != nil {
						t.Fatal(err)
					}
					cc.Clips = append(cc.Clips, name)
					switch tc := timeCol.(type) {
					case *array.Float64:
						cc.Times = append(cc.Times, []float64{tc.Value(j)})
					case *array.FixedSizeList:
						n := int(tc.DataType().(*arrow.FixedSizeListType).Len())
						cc.Times = append(cc.Times, tc.ListValues().(*array.Float64).Float64Values()[(tc.Offset()+j)*n:(tc.Offset()+j+1)*n])
					}
				}
			}
			if err := os.WriteFile(filepath.Join(out, cc.Frames), want, 0o600); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, cc)
		}
	}
	raw, err := json.Marshal(map[string]any{"cases": cases, "allowed": maxRGBDifference})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "cases.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, filepath.Join("..", "..", "..", "test", "oracle", "lerobot_clips.py"), out)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "..", "..", "clients", "python", "src"))
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("decode_clips (torchcodec): %v\n%s", err, got)
	}
	t.Logf("%d cameras' clips decoded by torchcodec: %s", len(cases), bytes.TrimSpace(got))
}

// videos are the case's cameras stored as video (of cameras, which
// lists the image features too).
func (m manifest) videos(c goldenCase) map[string][]int {
	out := m.cameras(c)
	for _, k := range m.Images[c.Dataset] {
		delete(out, k)
	}
	return out
}
