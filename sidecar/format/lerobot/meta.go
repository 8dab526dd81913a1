package lerobot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// InfoPath is a dataset's info file, under its root.
const InfoPath = "meta/info.json"

// MaxInfoBytes bounds the info file shardfeed reads.
const MaxInfoBytes = 4 << 20

// CodebaseV3 is the dataset layout shardfeed reads: LeRobot's v3.0
// (episodes of many per data and video file).
const CodebaseV3 = "v3.0"

// Info is what shardfeed reads of a dataset's meta/info.json. Other keys
// are ignored, as LeRobot ignores them.
type Info struct {
	CodebaseVersion string             `json:"codebase_version"`
	FPS             float64            `json:"fps"`
	Features        map[string]Feature `json:"features"`
	DataPath        string             `json:"data_path"`
	VideoPath       *string            `json:"video_path"`
	TotalEpisodes   int64              `json:"total_episodes"`
	TotalFrames     int64              `json:"total_frames"`
	// StorageFormat is where the frames and videos are: "lance" for
	// LeRobot's Lance layout (lerobot-lancedb's converter writes it), any
	// other value the Parquet data files and MP4 files, as LeRobot's own
	// reader decides; absent, a dataset with a frames table is of the
	// Lance layout (converted before the field existed).
	StorageFormat *string `json:"storage_format,omitempty"`
	// keys are the features' names in the file's order.
	keys []string
}

// Feature is one of a dataset's features: a column of its data files, or
// a camera's video (dtype video).
type Feature struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	// Names are the shape's axes (a camera's "height", "width",
	// "channels", in either order LeRobot accepts).
	Names []string `json:"names,omitempty"`
	// Info holds a video's codec, size and pixel format; VideoInfo is
	// its older name.
	Info      map[string]any `json:"info,omitempty"`
	VideoInfo map[string]any `json:"video_info,omitempty"`
}

// FrameSize is a camera's or an image's height and width: where its
// names put them, else where the shape does (LeRobot writes [height,
// width, channels], and accepts [channels, height, width]; a
// single-channel image may be [height, width]).
func (f Feature) FrameSize() (height, width int) {
	h, w, _ := f.axes()
	return f.Shape[h], f.Shape[w]
}

// Channels is an image's or a camera's channels: 1 for a shape of two
// axes.
func (f Feature) Channels() int {
	if _, _, c := f.axes(); c >= 0 {
		return f.Shape[c]
	}
	return 1
}

// axes are the shape's axes of height, width and channels (-1: none).
func (f Feature) axes() (height, width, channels int) {
	if len(f.Shape) == 2 {
		return 0, 1, -1
	}
	h, w := slices.Index(f.Names, "height"), slices.Index(f.Names, "width")
	if len(f.Names) == len(f.Shape) && h >= 0 && w >= 0 && h != w {
		return h, w, 3 - h - w // the channels ("channels", or older datasets' "channel")
	}
	if channels := func(n int) bool { return n == 1 || n == 3 || n == 4 }; channels(f.Shape[0]) && !channels(f.Shape[2]) {
		return 1, 2, 0
	}
	return 0, 1, 2
}

// Depth says the feature is a depth map (LeRobot's is_depth_map, or its
// older video.is_depth_map).
func (f Feature) Depth() bool {
	flag := func(m map[string]any, k string) bool { v, _ := m[k].(bool); return v }
	return flag(f.Info, "is_depth_map") || flag(f.Info, "video.is_depth_map") || flag(f.VideoInfo, "video.is_depth_map")
}

// The dtypes of features.
const (
	DTypeVideo = "video"
	DTypeImage = "image"
)

// ParseInfo parses and checks a dataset's info file.
func ParseInfo(b []byte) (*Info, error) {
	if len(b) > MaxInfoBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the %d shardfeed reads", InfoPath, len(b), MaxInfoBytes)
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s is not LeRobot's info JSON: %w", InfoPath, err)
	}
	keys, err := objectKeys(b, "features")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", InfoPath, err)
	}
	in.keys = keys
	if err := in.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", InfoPath, err)
	}
	return &in, nil
}

// Lance says whether the dataset is of LeRobot's Lance layout, as
// LeRobot's Lance reader decides: its storage_format, or, without one,
// whether it has a frames table (listed: the store's keys).
func (in *Info) Lance(listed func(prefix string) bool) bool {
	if in.StorageFormat != nil {
		return *in.StorageFormat == StorageLance
	}
	return listed(FramesTable)
}

func (in *Info) check() error {
	switch {
	case in.CodebaseVersion == "":
		return errors.New("it has no codebase_version: not a LeRobot dataset's info file")
	case in.CodebaseVersion != CodebaseV3:
		return fmt.Errorf("codebase_version %q: shardfeed reads LeRobot's %s layout; convert the dataset with LeRobot's own converter first (lerobot 0.6: python -m lerobot.scripts.convert_dataset_v21_to_v30 --repo-id=NAME --root=DIR --push-to-hub=false, in place)", in.CodebaseVersion, CodebaseV3)
	case !(in.FPS > 0) || math.IsInf(in.FPS, 0) || in.FPS > 100000:
		return fmt.Errorf("fps %v: a dataset's frame rate must be positive", in.FPS)
	case len(in.Features) == 0:
		return errors.New("it lists no features")
	case in.TotalEpisodes < 0 || in.TotalFrames < 0:
		return fmt.Errorf("total_episodes %d and total_frames %d must not be negative", in.TotalEpisodes, in.TotalFrames)
	}
	if _, err := Expand(in.DataPath, 0, 0, ""); err != nil {
		return fmt.Errorf("data_path: %w", err)
	}
	for _, k := range in.keys {
		f := in.Features[k]
		if k == "" || strings.HasSuffix(k, PadSuffix) || strings.HasPrefix(k, "_shardfeed_") {
			return fmt.Errorf("feature %q: shardfeed reserves that name", k)
		}
		if f.DType == "" {
			return fmt.Errorf("feature %q has no dtype", k)
		}
		for _, d := range f.Shape {
			if d < 1 || d > 1<<20 {
				return fmt.Errorf("feature %q has shape %v: each dimension must be 1 to %d", k, f.Shape, 1<<20)
			}
		}
		if f.DType == DTypeVideo {
			if in.VideoPath == nil || *in.VideoPath == "" {
				return fmt.Errorf("feature %q is a video, and video_path is not set", k)
			}
			if _, err := Expand(*in.VideoPath, 0, 0, k); err != nil {
				return fmt.Errorf("video_path: %w", err)
			}
			if len(f.Shape) != 3 {
				return fmt.Errorf("video feature %q has shape %v: want [height, width, channels] or [channels, height, width]", k, f.Shape)
			}
		}
		if f.DType == DTypeImage && len(f.Shape) != 2 && len(f.Shape) != 3 {
			return fmt.Errorf("image feature %q has shape %v: want [height, width, channels], [channels, height, width] or [height, width]", k, f.Shape)
		}
	}
	return nil
}

// Keys are the features' names in the info file's order.
func (in *Info) Keys() []string { return in.keys }

// VideoKeys are the video features' names, in the info file's order.
func (in *Info) VideoKeys() []string {
	var out []string
	for _, k := range in.keys {
		if in.Features[k].DType == DTypeVideo {
			out = append(out, k)
		}
	}
	return out
}

// ImageKeys are the image features' names (images stored in the data
// files), in the info file's order.
func (in *Info) ImageKeys() []string {
	var out []string
	for _, k := range in.keys {
		if in.Features[k].DType == DTypeImage {
			out = append(out, k)
		}
	}
	return out
}

// objectKeys returns the keys of the object at top-level key name of the
// JSON object b, in order (encoding/json's maps lose it).
func objectKeys(b []byte, name string) ([]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	raw, ok := top[name]
	if !ok {
		return nil, fmt.Errorf("it has no %q", name)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%q is not an object", name)
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		if slices.Contains(keys, k) {
			return nil, fmt.Errorf("%q names %q twice", name, k)
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// field is one replacement field of a path template: {name} or
// {name:0Nd}, as LeRobot's Python format strings write them.
var field = regexp.MustCompile(`\{([a-z_]+)(?::(0?)([0-9]{0,2})d)?\}`)

// Expand fills a path template of info.json (data_path, video_path)
// with a chunk and file index and a video key. Only the fields LeRobot
// writes are known; any other brace is refused.
func Expand(template string, chunk, file int64, videoKey string) (string, error) {
	if template == "" {
		return "", errors.New("the template is empty")
	}
	var err error
	out := field.ReplaceAllStringFunc(template, func(m string) string {
		g := field.FindStringSubmatch(m)
		var v string
		switch g[1] {
		case "chunk_index":
			v = strconv.FormatInt(chunk, 10)
		case "file_index":
			v = strconv.FormatInt(file, 10)
		case "video_key":
			if g[3] != "" {
				err = fmt.Errorf("%s formats video_key as a number", m)
			}
			return videoKey
		default:
			err = fmt.Errorf("%s is not a field shardfeed knows (chunk_index, file_index, video_key)", m)
			return m
		}
		if width, _ := strconv.Atoi(g[3]); len(v) < width {
			pad := " "
			if g[2] == "0" {
				pad = "0"
			}
			v = strings.Repeat(pad, width-len(v)) + v
		}
		return v
	})
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(out, "{}") {
		return "", fmt.Errorf("%q has a brace that is not a field shardfeed knows", template)
	}
	if strings.HasPrefix(out, "/") || slices.Contains(strings.Split(out, "/"), "..") {
		return "", fmt.Errorf("%q leaves the dataset's root", out)
	}
	return out, nil
}
