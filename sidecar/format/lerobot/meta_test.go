package lerobot

import (
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		template    string
		chunk, file int64
		key         string
		want, err   string
	}{
		{template: "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", chunk: 2, file: 17, want: "data/chunk-002/file-017.parquet"},
		{template: "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4", chunk: 0, file: 1234, key: "observation.images.top", want: "videos/observation.images.top/chunk-000/file-1234.mp4"},
		{template: "data/{chunk_index}/{file_index:4d}.parquet", chunk: 3, file: 5, want: "data/3/   5.parquet"},
		{template: "data/{episode_index:06d}.parquet", err: "not a field shardfeed knows"},
		{template: "data/{chunk_index:x}.parquet", err: "brace"},
		{template: "../{chunk_index}.parquet", err: "leaves the dataset's root"},
		{template: "videos/{video_key}/{file_index}.mp4", key: "..", err: "leaves the dataset's root"},
		{template: "", err: "empty"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.template, tt.chunk, tt.file, tt.key)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q) = %q, %v; want an error containing %q", tt.template, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.template, got, err, tt.want)
		}
	}
}

const infoJSON = `{
  "codebase_version": "v3.0", "robot_type": null, "total_episodes": 3, "total_frames": 70,
  "total_tasks": 2, "chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
  "fps": 10, "splits": {"train": "0:3"},
  "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
  "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
  "features": {
    "observation.state": {"dtype": "float32", "shape": [6], "names": null},
    "observation.images.top": {"dtype": "video", "shape": [48, 64, 3], "names": ["height", "width", "channels"],
      "info": {"video.height": 48, "video.width": 64, "video.codec": "av1", "video.pix_fmt": "yuv420p"}},
    "action": {"dtype": "float32", "shape": [6], "names": null},
    "timestamp": {"dtype": "float32", "shape": [1], "names": null},
    "index": {"dtype": "int64", "shape": [1], "names": null}
  }
}`

func TestParseInfo(t *testing.T) {
	in, err := ParseInfo([]byte(infoJSON))
	if err != nil {
		t.Fatal(err)
	}
	if in.FPS != 10 || in.TotalEpisodes != 3 || in.TotalFrames != 70 {
		t.Errorf("%+v", in)
	}
	if want := []string{"observation.state", "observation.images.top", "action", "timestamp", "index"}; !slices.Equal(in.Keys(), want) {
		t.Errorf("keys %v, want the file's order %v", in.Keys(), want)
	}
	if v := in.VideoKeys(); !slices.Equal(v, []string{"observation.images.top"}) {
		t.Errorf("video keys %v", v)
	}
	for _, c := range []struct {
		field         string
		frames, lance bool
	}{
		{`, "storage_format": "lance"`, false, true},
		{`, "storage_format": "parquet"`, true, false}, // the field decides, as LeRobot's reader has it
		{`, "storage_format": "LANCE"`, true, false},
		{``, true, true}, // converted before the field existed: a frames table
		{``, false, false},
	} {
		in, err := ParseInfo([]byte(strings.Replace(infoJSON, `"total_frames": 70`, `"total_frames": 70`+c.field, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := in.Lance(func(prefix string) bool { return c.frames && prefix == FramesTable }); got != c.lance {
			t.Errorf("storage_format%s, a frames table %v: Lance layout %v, want %v", c.field, c.frames, got, c.lance)
		}
	}
	bad := []struct{ from, to, err string }{
		{`"v3.0"`, `"v2.1"`, "convert the dataset"},
		{`"fps": 10`, `"fps": 0`, "frame rate"},
		{`"shape": [6]`, `"shape": [0]`, "dimension"},
		{`"video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",`, ``, "video_path is not set"},
		{`"shape": [48, 64, 3]`, `"shape": [48, 64]`, "[height, width, channels]"},
		{`"action"`, `"action_is_pad"`, "reserves"},
		{`"total_frames": 70`, `"total_frames": "70"`, "not LeRobot's info JSON"},
	}
	for _, b := range bad {
		_, err := ParseInfo([]byte(strings.Replace(infoJSON, b.from, b.to, 1)))
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("%s -> %s: err = %v, want one containing %q", b.from, b.to, err, b.err)
		}
	}
}

// FuzzInfo: any info.json is parsed or refused, never a panic; one
// parsed has the features it lists, each path template filled or refused.
func FuzzInfo(f *testing.F) {
	f.Add([]byte(infoJSON))
	f.Add([]byte(`{"codebase_version": "v3.0", "fps": 30, "features": {"a": {"dtype": "int64", "shape": [1]}}, "data_path": "{chunk_index}/{file_index}.parquet"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInfo(b)
		if err != nil {
			return
		}
		if len(in.Keys()) != len(in.Features) {
			t.Fatalf("%d keys for %d features", len(in.Keys()), len(in.Features))
		}
		for _, k := range in.VideoKeys() {
			if p, err := Expand(*in.VideoPath, 1, 2, k); err != nil || strings.Contains(p, "..") {
				t.Fatalf("video path %q, %v", p, err)
			}
		}
	})
}

// A camera's or an image's size and channels come from its names where it has them, in either of
// the orders LeRobot's writer accepts, else from its shape's order; a
// depth map is flagged under any of the keys LeRobot reads.
func TestFeatureFrameSizeAndDepth(t *testing.T) {
	tests := []struct {
		name     string
		f        Feature
		h, w     int
		channels int
		depth    bool
	}{
		{"height, width, channels", Feature{Shape: []int{96, 128, 3}, Names: []string{"height", "width", "channels"}}, 96, 128, 3, false},
		{"channels first", Feature{Shape: []int{3, 64, 80}, Names: []string{"channels", "height", "width"}}, 64, 80, 3, false},
		{"older datasets' channel", Feature{Shape: []int{64, 80, 3}, Names: []string{"height", "width", "channel"}}, 64, 80, 3, false},
		{"channels first, no names", Feature{Shape: []int{3, 64, 80}}, 64, 80, 3, false},
		{"no names", Feature{Shape: []int{64, 80, 3}}, 64, 80, 3, false},
		{"names of other axes", Feature{Shape: []int{64, 80, 3}, Names: []string{"y", "x", "rgb"}}, 64, 80, 3, false},
		{"a single-channel image of two axes", Feature{Shape: []int{40, 56}, Names: []string{"height", "width"}}, 40, 56, 1, false},
		{"a one-channel depth map", Feature{Shape: []int{64, 48, 1}, Info: map[string]any{"is_depth_map": true}}, 64, 48, 1, true},
		{"the older key", Feature{Shape: []int{64, 48, 1}, Info: map[string]any{"video.is_depth_map": true}}, 64, 48, 1, true},
		{"the older field", Feature{Shape: []int{64, 48, 1}, VideoInfo: map[string]any{"video.is_depth_map": true}}, 64, 48, 1, true},
		{"not a depth map", Feature{Shape: []int{64, 48, 3}, Info: map[string]any{"is_depth_map": false}}, 64, 48, 3, false},
	}
	for _, tt := range tests {
		h, w := tt.f.FrameSize()
		if h != tt.h || w != tt.w || tt.f.Channels() != tt.channels || tt.f.Depth() != tt.depth {
			t.Errorf("%s: %dx%d of %d channels, depth %t; want %dx%d of %d, depth %t", tt.name, h, w, tt.f.Channels(), tt.f.Depth(), tt.h, tt.w, tt.channels, tt.depth)
		}
	}
}
