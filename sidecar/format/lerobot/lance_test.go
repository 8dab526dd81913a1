package lerobot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lerobot"
)

// In LeRobot's Lance layout a shard fetches ranges of the videos' blobs:
// each camera's movie box and its episode's samples, within the blob,
// never a whole video file that holds other episodes too; and the frames
// table's pages of its rows. Counted per sample, as a pod fetches them.
func TestLanceLayoutFetchesVideosByRange(t *testing.T) {
	dir, m := golden(t)
	for _, kase := range []string{"multicam-lance-plain", "rollover-lance-episodes"} {
		t.Run(kase, func(t *testing.T) {
			c := m.Cases[kase]
			st, f, r := opened(t, dir, c)
			if f.LeRobot.Frames == nil {
				t.Fatal("the index of a dataset in LeRobot's Lance layout names no frames table")
			}
			episodes := map[indexfile.Range]int{} // episodes per video file (its movie box)
			for _, e := range f.Shards {
				for _, clip := range e.Episode.Clips {
					episodes[clip.Movie]++
				}
			}
			var videoBytes, frameBytes, samples int64
			for i, e := range f.Shards {
				samples += e.Samples
				byObject := map[string]int64{}
				for _, p := range r.Parts(i) {
					b, err := format.StoreRead(st)(context.Background(), p)
					if err != nil {
						t.Fatal(err)
					}
					byObject[p.Key] += int64(len(b))
					switch {
					case strings.HasPrefix(p.Key, lerobot.VideosTable):
						videoBytes += int64(len(b))
					case strings.HasPrefix(p.Key, lerobot.FramesTable):
						frameBytes += int64(len(b))
					default:
						t.Fatalf("shard %s fetches %s, outside the frames and videos tables", e.Name, p.Key)
					}
				}
				for k, clip := range e.Episode.Clips {
					for _, g := range []indexfile.Range{clip.Movie, clip.Samples} {
						if !strings.HasPrefix(g.Object, lerobot.VideosTable) || g.Offset < clip.Base || g.Offset+g.Length > clip.Base+clip.Size {
							t.Fatalf("shard %s camera %d: range %s [%d, +%d) is not within its video, [%d, +%d) of its blob", e.Name, k, g.Object, g.Offset, g.Length, clip.Base, clip.Size)
						}
					}
					if episodes[clip.Movie] > 1 && clip.Movie.Length+clip.Samples.Length >= clip.Size {
						t.Errorf("shard %s camera %d fetches %d bytes of a %d-byte video that holds %d episodes", e.Name, k, clip.Movie.Length+clip.Samples.Length, clip.Size, episodes[clip.Movie])
					}
				}
			}
			t.Logf("%d samples in %d shards: %.0f bytes of video and %.0f of the frames table fetched per sample", samples, len(f.Shards),
				float64(videoBytes)/float64(samples), float64(frameBytes)/float64(samples))
		})
	}
}
