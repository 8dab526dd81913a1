package indexparts

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// Where a run's files are, under the index's store.
const (
	// Dir holds every run, a folder each.
	Dir = indexfile.Dir + "/parts/"
	// Version is the manifest's version.
	Version = 1
	// MaxParts bounds the parts of a run (an Indexed Job's completions
	// are bounded too).
	MaxParts = 100_000
	// MaxHead bounds the objects of a stream's head (its first objects
	// up to the first with a shard) that every part indexes again.
	MaxHead = 10_000
	// MaxManifestBytes bounds a manifest read: MaxParts spans and
	// MaxHead objects of keys up to 1 KiB.
	MaxManifestBytes = 32 << 20
	// MaxObjectsBytes bounds a part's object list read: about 20 million
	// objects of 100-byte keys.
	MaxObjectsBytes = 2 << 30
	// MaxRecordBytes bounds a part's record read.
	MaxRecordBytes = 64 << 10
	// maxKeyBytes is S3's bound on a key.
	maxKeyBytes = 1024
)

// Manifest says what a run is of and how its objects are cut into parts.
type Manifest struct {
	Version int `json:"version"`
	// Run identifies the run: the options, the listing and the parts.
	Run    string `json:"run"`
	Format string `json:"format"`
	// Options is the key of the index options (format.IndexOptions.Key).
	Options string `json:"options"`
	// Listing is the index's record of the objects (without Empty).
	Listing indexfile.Listing `json:"listing"`
	Objects int               `json:"objects"`
	Bytes   int64             `json:"bytes"`
	// Head are the stream's first objects up to the first with a shard.
	Head []Object `json:"head"`
	// Parts are the parts' objects; Digests the SHA-256 of each part's
	// object list as written.
	Parts   []Span   `json:"parts"`
	Digests []string `json:"digests"`
}

// Object is an object as a run records it: key, size and version tag.
type Object struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	ETag string `json:"etag,omitempty"`
}

// ObjectOf is a store's object as a run records it.
func ObjectOf(o store.Object) Object { return Object(o) }

// StoreObject is the store's object a run's records.
func (o Object) StoreObject() store.Object { return store.Object(o) }

// RunID identifies a run by what decides its parts: the options' key, the
// listing (its digest covers every key, size and version tag) and the
// number of parts.
func RunID(options string, l *indexfile.Listing, parts int) string {
	data, _ := json.Marshal(struct {
		Options string
		Objects int
		Digest  string
		List    bool
		Shards  string
		Parts   int
	}{options, l.Objects, l.Digest, l.ObjectList, l.Shards, parts})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// RunDir is the folder of a run's files.
func RunDir(run string) string { return Dir + run + "/" }

// ManifestKey is the key of a run's manifest.
func ManifestKey(run string) string { return RunDir(run) + "manifest.json" }

// CurrentKey is the key of the pointer to the run last listed with
// options (what --part and --merge-parts take without --run).
func CurrentKey(options string) string {
	return Dir + "current-" + options[:min(len(options), 16)] + ".json"
}

// ObjectsKey is the key of part k's object list.
func ObjectsKey(run string, k int) string { return fmt.Sprintf("%spart-%05d.objects", RunDir(run), k) }

// PartKey is the key of part k's index (compact).
func PartKey(run string, k int) string { return fmt.Sprintf("%spart-%05d.sfi", RunDir(run), k) }

// RecordKey is the key of part k's record, written last: the part is done.
func RecordKey(run string, k int) string { return fmt.Sprintf("%spart-%05d.json", RunDir(run), k) }

// CheckpointDir is the folder of part k's checkpoint while it runs.
func CheckpointDir(run string, k int) string {
	return fmt.Sprintf("%spart-%05d.checkpoint/", RunDir(run), k)
}

// Current names the run last listed for some options.
type Current struct {
	Run string `json:"run"`
}

// Record says a part is done: its index's SHA-256 and shard count.
type Record struct {
	Run    string `json:"run"`
	Part   int    `json:"part"`
	Shards int    `json:"shards"`
	// SHA256 is of the part's index file as written; empty where the
	// part has no shard (and no file).
	SHA256 string `json:"sha256,omitempty"`
}

// ParseCurrent reads a run pointer.
func ParseCurrent(data []byte) (Current, error) {
	var c Current
	if err := strictjson.Decode(data, &c); err != nil {
		return c, err
	}
	return c, CheckRun(c.Run)
}

// CheckRun refuses a run that is not one RunID makes (16 hex digits).
func CheckRun(run string) error {
	if len(run) != 16 {
		return fmt.Errorf("run %q is not 16 hex digits", run)
	}
	if _, err := hex.DecodeString(run); err != nil {
		return fmt.Errorf("run %q is not 16 hex digits", run)
	}
	return nil
}

// ParseRecord reads a part's record, which must be of run and part k.
func ParseRecord(data []byte, run string, k int) (Record, error) {
	var r Record
	if err := strictjson.Decode(data, &r); err != nil {
		return r, err
	}
	switch {
	case r.Run != run || r.Part != k:
		return r, fmt.Errorf("it is part %d of run %s, not part %d of run %s", r.Part, r.Run, k, run)
	case r.Shards < 0 || (r.Shards == 0) != (r.SHA256 == ""):
		return r, fmt.Errorf("%d shards with hash %q", r.Shards, r.SHA256)
	case r.SHA256 != "" && !isHex64(r.SHA256):
		return r, fmt.Errorf("sha256 %q is not 64 hex digits", r.SHA256)
	}
	return r, nil
}

func isHex64(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 64 && err == nil
}

// ParseManifest reads and checks a run's manifest: its spans cut its
// objects in order, every one in one part.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%d bytes, more than a manifest's %d", len(data), MaxManifestBytes)
	}
	var m Manifest
	if err := strictjson.Decode(data, &m); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) check() error {
	switch {
	case m.Version != Version:
		return fmt.Errorf("version %d, not %d: list the parts again with this shardfeed", m.Version, Version)
	case CheckRun(m.Run) != nil:
		return CheckRun(m.Run)
	case m.Objects < 1 || m.Objects != m.Listing.Objects:
		return fmt.Errorf("%d objects, its listing %d", m.Objects, m.Listing.Objects)
	case len(m.Parts) < 1 || len(m.Parts) > MaxParts || len(m.Digests) != len(m.Parts):
		return fmt.Errorf("%d parts and %d digests (1 to %d parts)", len(m.Parts), len(m.Digests), MaxParts)
	case len(m.Head) < 1 || len(m.Head) > min(MaxHead, m.Objects):
		return fmt.Errorf("a head of %d objects (1 to %d)", len(m.Head), min(MaxHead, m.Objects))
	}
	for _, o := range m.Head {
		if err := checkObject(o); err != nil {
			return fmt.Errorf("head: %w", err)
		}
	}
	next := 0
	var bytes int64
	for k, s := range m.Parts {
		if s.First != next || s.Objects < 0 || s.Objects > m.Objects-next || s.Bytes < 0 || s.Bytes > (1<<62)-bytes {
			return fmt.Errorf("part %d (%d objects from %d, %d bytes) does not follow the one before", k, s.Objects, s.First, s.Bytes)
		}
		if !isHex64(m.Digests[k]) {
			return fmt.Errorf("part %d: digest %q is not 64 hex digits", k, m.Digests[k])
		}
		next += s.Objects
		bytes += s.Bytes
	}
	if next != m.Objects || bytes != m.Bytes {
		return fmt.Errorf("the parts hold %d objects of %d bytes, the manifest says %d of %d", next, bytes, m.Objects, m.Bytes)
	}
	return nil
}

func checkObject(o Object) error {
	if o.Key == "" || len(o.Key) > maxKeyBytes || o.Size < 0 || len(o.ETag) > maxKeyBytes {
		return fmt.Errorf("object %.64q of %d bytes: keys are 1 to %d bytes, sizes not negative", o.Key, o.Size, maxKeyBytes)
	}
	return store.CheckKey(o.Key)
}

// EncodeObjects writes an object list: one JSON object a line.
func EncodeObjects(objs []store.Object) []byte {
	var b bytes.Buffer
	for _, o := range objs {
		line, _ := json.Marshal(ObjectOf(o))
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Digest is the SHA-256 of an object list as written.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ParseObjects reads part k's object list of a run's manifest: its bytes
// must be those the manifest's digest names, its objects as many as the
// part holds, in strictly increasing key order and of the sizes summed.
func ParseObjects(data []byte, m *Manifest, k int) ([]store.Object, error) {
	if k < 0 || k >= len(m.Parts) {
		return nil, fmt.Errorf("part %d of a run of %d", k, len(m.Parts))
	}
	if got := Digest(data); got != m.Digests[k] {
		return nil, fmt.Errorf("its SHA-256 is %s, the manifest's %s: it is not the list the run was planned with", got, m.Digests[k])
	}
	span := m.Parts[k]
	out := make([]store.Object, 0, min(span.Objects, len(data)/16+1))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16*maxKeyBytes) // a key and a tag of maxKeyBytes, every byte escaped (\u00XX)
	var sum int64
	for sc.Scan() {
		var o Object
		if err := strictjson.Decode(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("object %d: %w", len(out)+1, err)
		}
		if err := checkObject(o); err != nil {
			return nil, err
		}
		if len(out) == span.Objects {
			return nil, fmt.Errorf("more than the part's %d objects", span.Objects)
		}
		if n := len(out); n > 0 && out[n-1].Key >= o.Key {
			return nil, fmt.Errorf("object %q after %q: not in key order", o.Key, out[n-1].Key)
		}
		sum += o.Size
		out = append(out, o.StoreObject())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) != span.Objects || sum != span.Bytes {
		return nil, fmt.Errorf("%d objects of %d bytes, the manifest says %d of %d", len(out), sum, span.Objects, span.Bytes)
	}
	return out, nil
}

// jsonOf is a run file's bytes as written.
func jsonOf(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
