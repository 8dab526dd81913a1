package indexfile

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
)

// LeRobot is the LeRobot dataset of a lerobot stream as `shardfeed index`
// read it: its frame rate, columns, cameras and tasks.
type LeRobot struct {
	// Root is the dataset's directory, as a URI ending in "/"; the
	// shards' objects are keys under it.
	Root string `json:"root"`
	// Codebase is the dataset's layout (info.json's codebase_version).
	Codebase string  `json:"codebase"`
	FPS      float64 `json:"fps"`
	// ArrowSchema is the data files' columns' Arrow schema (an IPC
	// schema message, base64).
	ArrowSchema string `json:"arrowSchema"`
	// Videos are the cameras, in info.json's order.
	Videos []LeRobotVideo `json:"videos,omitempty"`
	// Images are the features stored as images in the data files (dtype
	// image), in info.json's order.
	Images []LeRobotImage `json:"images,omitempty"`
	// Shapes are the shapes of the features of two or more axes (stored
	// as lists of lists), by name.
	Shapes map[string][]int `json:"shapes,omitempty"`
	// Tasks are the task strings by task_index.
	Tasks []string `json:"tasks"`
	// Episodes is the selection the index was made with ("" for all).
	Episodes string `json:"episodes,omitempty"`
	// Frames is the frames table of a dataset in LeRobot's Lance layout
	// (info.json's storage_format "lance": frames.lance/, row N frame N;
	// videos.lance/'s blobs the video files), nil for Parquet data files.
	Frames *Lance `json:"frames,omitempty"`
}

// LeRobotVideo is one camera of a dataset.
type LeRobotVideo struct {
	Key string `json:"key"`
	// Codec is the video track's sample entry (av01, avc1, hvc1, ...).
	Codec  string `json:"codec"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Depth marks a depth map's video (LeRobot's is_depth_map), which
	// shardfeed does not serve yet.
	Depth bool `json:"depth,omitempty"`
}

// LeRobotImage is a feature a dataset stores as an image a frame, in a
// data file's column (LeRobot's dtype image).
type LeRobotImage struct {
	Key    string `json:"key"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Depth marks a single-channel image (a depth map), which shardfeed
	// does not serve decoded yet.
	Depth bool `json:"depth,omitempty"`
}

// LeRobotEpisode is a lerobot shard's frames: frames [Start,
// Start+Samples) of one episode, in a data file's rows and, per camera, a
// video file's samples.
type LeRobotEpisode struct {
	// Index is the episode's episode_index.
	Index int64 `json:"index"`
	// From is the dataset index of its first frame; Length its frames.
	From   int64 `json:"from"`
	Length int64 `json:"length"`
	// Start is the shard's first frame within the episode.
	Start int64 `json:"start"`
	// Row is the data file row of the episode's first frame; the
	// shard's Ranges are the row groups that hold its frames, the
	// first starting at RowGroupRow.
	Row         int64 `json:"row"`
	RowGroupRow int64 `json:"rowGroupRow"`
	// RowGroups are the data file's row groups of the shard's Ranges.
	RowGroups []int `json:"rowGroups"`
	// Clips are its cameras' videos, in LeRobot.Videos' order.
	Clips []LeRobotClip `json:"clips,omitempty"`
	// Pieces are, in LeRobot's Lance layout, the frames table's shards
	// that hold the episode's rows, in order: one per fragment.
	Pieces []Entry `json:"pieces,omitempty"`
}

// LeRobotClip is an episode's video of one camera: its samples in a
// video file, and the file's movie box that says how to read them.
type LeRobotClip struct {
	// Size is the video file's; Base where it begins in its object (a
	// Lance blob's position in its blob file; 0: the object is the file).
	Size int64 `json:"size"`
	Base int64 `json:"base,omitempty"`
	// Movie is the file's movie box (moov); Samples the episode's
	// samples, from the keyframe its first frame decodes from.
	Movie   Range `json:"movie"`
	Samples Range `json:"samples"`
	// From and To are the episode's times in the file, in seconds
	// (from_timestamp, to_timestamp).
	From float64 `json:"from"`
	To   float64 `json:"to"`
}

func (l *LeRobot) check() error {
	if l.Codebase == "" {
		return errors.New(`"codebase" is missing: re-run shardfeed index`)
	}
	if !(l.FPS > 0) || math.IsInf(l.FPS, 0) {
		return fmt.Errorf(`"fps" %v is not a frame rate`, l.FPS)
	}
	if _, err := base64.StdEncoding.DecodeString(l.ArrowSchema); err != nil || l.ArrowSchema == "" {
		return errors.New(`"arrowSchema" is missing or not base64: re-run shardfeed index`)
	}
	if err := checkRoot(l.Root); err != nil {
		return err
	}
	if l.Frames != nil {
		if err := l.Frames.check(); err != nil {
			return fmt.Errorf("the frames table: %w", err)
		}
	}
	for _, v := range l.Videos {
		if err := checkFrameSize("video", v.Key, v.Width, v.Height); err != nil {
			return err
		}
	}
	for _, m := range l.Images {
		if err := checkFrameSize("image", m.Key, m.Width, m.Height); err != nil {
			return err
		}
	}
	for k, shape := range l.Shapes {
		size := 1
		for _, n := range shape {
			if n < 1 || n > 1<<20 || size > 1<<24/n {
				return fmt.Errorf("feature %q has shape %v: each dimension must be 1 to %d, and %d values at most", k, shape, 1<<20, 1<<24)
			}
			size *= n
		}
		if len(shape) < 2 || len(shape) > 8 {
			return fmt.Errorf("feature %q has shape %v: the index records shapes of 2 to 8 axes", k, shape)
		}
	}
	return nil
}

func checkFrameSize(kind, key string, width, height int) error {
	if key == "" || width <= 0 || height <= 0 || width > 1<<15 || height > 1<<15 {
		return fmt.Errorf("%s %q of %dx%d: each needs a key and a size of 1 to %d pixels a side", kind, key, width, height, 1<<15)
	}
	return nil
}

// checkLeRobot checks a lerobot shard against its dataset.
func (e Entry) checkLeRobot(l *LeRobot) error {
	ep := e.Episode
	if ep == nil {
		return errors.New("a lerobot shard names no episode")
	}
	if ep.Length < 1 || ep.From < 0 || ep.Row < 0 || ep.RowGroupRow < 0 || ep.RowGroupRow > ep.Row || ep.Start < 0 || ep.Start+e.Samples > ep.Length {
		return fmt.Errorf("frames [%d, +%d) of episode %d of %d frames (from %d, row %d, row group at row %d) are not within it", ep.Start, e.Samples, ep.Index, ep.Length, ep.From, ep.Row, ep.RowGroupRow)
	}
	if l.Frames != nil {
		if err := ep.checkPieces(); err != nil {
			return err
		}
	} else if len(e.Ranges) == 0 || e.FooterLength <= 0 || e.FooterOffset < 0 {
		return errors.New("a lerobot shard lists no row groups or no data file footer")
	}
	if len(ep.RowGroups) != len(e.Ranges) {
		return fmt.Errorf("%d row groups for %d ranges", len(ep.RowGroups), len(e.Ranges))
	}
	for _, g := range ep.RowGroups {
		if g < 0 {
			return fmt.Errorf("row group %d", g)
		}
	}
	for _, r := range e.Ranges {
		if err := r.check(); err != nil {
			return err
		}
	}
	if len(ep.Clips) != len(l.Videos) {
		return fmt.Errorf("episode %d has %d videos, the dataset %d cameras", ep.Index, len(ep.Clips), len(l.Videos))
	}
	for k, c := range ep.Clips {
		for _, r := range []Range{c.Movie, c.Samples} {
			if err := r.check(); err != nil {
				return fmt.Errorf("camera %s: %w", l.Videos[k].Key, err)
			}
			if c.Base < 0 || r.Offset < c.Base || r.Offset-c.Base+r.Length > c.Size {
				return fmt.Errorf("camera %s: range [%d, +%d) is outside its %d-byte file at %d", l.Videos[k].Key, r.Offset, r.Length, c.Size, c.Base)
			}
		}
		if c.Movie.Object != c.Samples.Object {
			return fmt.Errorf("camera %s: the movie box is of %s, the samples of %s", l.Videos[k].Key, c.Movie.Object, c.Samples.Object)
		}
		if !(c.To >= c.From) || c.From < 0 || math.IsInf(c.To, 0) {
			return fmt.Errorf("camera %s: times [%v, %v) are not an interval", l.Videos[k].Key, c.From, c.To)
		}
	}
	return nil
}

// checkPieces checks an episode's frames table shards (LeRobot's Lance
// layout): Lance shards whose live rows are its frames.
func (ep *LeRobotEpisode) checkPieces() error {
	if len(ep.Pieces) == 0 || len(ep.RowGroups) != 0 {
		return errors.New("a shard of LeRobot's Lance layout lists no frames table pieces, or row groups")
	}
	var frames int64
	for j, p := range ep.Pieces {
		if err := p.checkLance(); err != nil {
			return fmt.Errorf("piece %d: %w", j, err)
		}
		if err := p.checkDeleted(); err != nil {
			return fmt.Errorf("piece %d: %w", j, err)
		}
		if p.Samples < 1 || p.RowStart < 0 || p.Part < 0 {
			return fmt.Errorf("piece %d: rows [%d, +%d) of fragment %d, %d live: not a run of frames", j, p.RowStart, p.Rows, p.Part, p.Samples)
		}
		frames += p.Samples
	}
	if frames != ep.Length {
		return fmt.Errorf("its pieces hold %d live rows, the episode %d frames", frames, ep.Length)
	}
	return nil
}
