// Package huggingface reads Hugging Face datasets as `save_to_disk` writes
// them (and as the datasets cache holds them): Arrow IPC *stream* files,
// which have no footer to find their record batches by. `shardfeed index`
// walks each file once, recording every record batch's byte range; a shard
// is a run of whole batches, fetched with the file's schema message. The
// features the files carry in their schema metadata give the columns'
// meaning: a ClassLabel's names go into its field's metadata.
//
// # Layout
//
//	save_to_disk:   DIR/data-00000-of-0000N.arrow, state.json (its files),
//	                dataset_info.json (the features)
//	a DatasetDict:  DIR/dataset_dict.json {"splits": [...]}, a folder
//	                of each split as save_to_disk writes one
//	the cache:      DIR/<builder>-<split>[-NNNNN-of-NNNNN].arrow; a map's
//	                cache-<fingerprint>.arrow files are derived rows and
//	                not read as a split
//
// Each .arrow file is an Arrow IPC stream (arrowipc.StreamMessages: the
// framing, byte by byte, in its worked example): a schema message, whose
// metadata holds the features as JSON under "huggingface", then record
// batches, then the end-of-stream marker. A stream is read once at
// indexing for its messages' ranges; a shard is a run of whole batches,
// fetched with the schema message. The splits are never mixed: a source
// of several is read for the split the stream names, and refused without
// one (splits.go).
package huggingface

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
)

// MetaClassNames is the field metadata key of a ClassLabel column's names,
// a JSON list: label k is names[k].
const MetaClassNames = "shardfeed.class_names"

// maxFileBytes bounds an Arrow stream file read whole when it is indexed
// (datasets cuts save_to_disk's files at 500 MB by default).
const maxFileBytes = 8 << 30

// Format is the Hugging Face datasets format.
type Format struct{}

var (
	_ format.Format  = Format{}
	_ format.Indexer = Format{}
)

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatHuggingFace }

// Suffixes implements format.Indexer: the Arrow stream files.
func (Format) Suffixes() []string { return []string{".arrow"} }

// splitOption is the option that chooses a split.
const splitOption = "split"

// Options lists the format's own index option (format.Option): the split
// of a source that holds several.
func (Format) Options() []format.Option {
	return []format.Option{{Flag: splitOption, Field: "spec.streams[].huggingface.split",
		Help: "the split to index where URI holds several (a DatasetDict's folder, a datasets cache folder); refused without one there",
		For:  "a DatasetDict's or a datasets cache's split",
		Spec: func(s *datav1alpha1.Stream) string {
			if s.HuggingFace == nil {
				return ""
			}
			return s.HuggingFace.Split
		},
		Indexed: func(f *indexfile.File) string {
			if f.HuggingFace == nil {
				return ""
			}
			return f.HuggingFace.Split
		}}}
}

// IndexHelp is shardfeed index's help of a huggingface stream.
func (Format) IndexHelp() string {
	return `URI is a Hugging Face dataset as save_to_disk writes it (or a split of
it, or a datasets cache directory): its Arrow stream files, each read
once to find its record batches; a shard is a run of whole batches of
about --shard-size, fetched with the file's schema. A DatasetDict's
folder (dataset_dict.json) or a cache folder of several splits
(<builder>-<split>.arrow) needs --split: splits are never mixed.`
}

// IndexObject implements format.Indexer: the file is read once, its
// messages walked and checked, and its record batches cut into shards of
// about opts.ShardBytes, each hashed.
func (Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if err := indexFile(ctx, st, o, f, opts); err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	return nil
}

func indexFile(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if o.Size > maxFileBytes {
		return fmt.Errorf("%d bytes, above the bound of %d on one file: save the dataset with a smaller max_shard_size", o.Size, int64(maxFileBytes))
	}
	body, err := st.Get(ctx, o.Key, 0, -1)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(body, maxFileBytes+1))
	_ = body.Close()
	if err != nil {
		return err
	}
	schema, batches, err := arrowipc.StreamMessages(data)
	if err != nil {
		return fmt.Errorf("not a Hugging Face dataset's Arrow stream file: %w", err)
	}
	// Every file of the stream has the first one's schema.
	sch, err := arrowipc.StreamSchema(data[schema.Offset : schema.Offset+schema.Length])
	if err != nil {
		return err
	}
	if len(f.Shards) > 0 {
		if err := sameSchema(ctx, st, f.Shards[0], sch); err != nil {
			return err
		}
	}
	part := 0
	for i := 0; i < len(batches); {
		first := batches[i]
		e := indexfile.Entry{Name: fmt.Sprintf("%s#%d", o.Key, part), Object: o.Key, Part: part, Offset: first.Offset,
			ObjectSize: int64(len(data)), FooterOffset: schema.Offset, FooterLength: schema.Length}
		for ; i < len(batches) && (e.Length == 0 || e.Length < opts.ShardBytes); i++ {
			e.Length = batches[i].Offset + batches[i].Length - first.Offset
			e.Samples += batches[i].Rows
		}
		sum, _ := checksum.Of(opts.Hash, data[e.Offset:e.Offset+e.Length])
		e.Hash = sum.String()
		f.Shards = append(f.Shards, e)
		part++
	}
	return nil
}

// sameSchema refuses a file whose schema is not the stream's first file's.
func sameSchema(ctx context.Context, st store.Store, e indexfile.Entry, sch *arrow.Schema) error {
	first, err := format.ReadRange(ctx, st, e.Object, e.FooterOffset, e.FooterLength)
	if err != nil {
		return err
	}
	want, err := arrowipc.StreamSchema(first)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Object, err)
	}
	if !want.Equal(sch) {
		return fmt.Errorf("its schema (%s) is not %s's (%s): one stream is one dataset split", sch, e.Object, want)
	}
	return nil
}

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	return &reader{f: f}, nil
}

type reader struct{ f *indexfile.File }

// Parts are the shard's batches, then its file's schema message.
func (r *reader) Parts(i int) []format.Part {
	e := r.f.Shard(i)
	return []format.Part{{Key: e.Object, Size: e.Length, Hash: e.Hash, Range: true, Offset: e.Offset},
		{Key: e.Object, Size: e.FooterLength, Range: true, Offset: e.FooterOffset, Version: e.Hash}}
}

func (r *reader) Schema(ctx context.Context, read format.ReadFunc) (*arrow.Schema, error) {
	e := r.f.Shard(0)
	msg, err := read(ctx, r.Parts(0)[1])
	if err != nil {
		return nil, err
	}
	s, err := arrowipc.StreamSchema(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Object, err)
	}
	return WithFeatures(s)
}

func (r *reader) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	recs, err := arrowipc.ReadStreamBatches(ctx, parts[1], parts[0], columns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.f.Shard(i).Name, err)
	}
	for k, rec := range recs { // the served schema carries the features' metadata
		s, err := WithFeatures(rec.Schema())
		if err != nil {
			return nil, err
		}
		recs[k] = array.NewRecordBatch(s, rec.Columns(), rec.NumRows())
		rec.Release()
	}
	return format.RecordsOf(recs)
}

// features is what a datasets file says of its columns, in its schema's
// "huggingface" metadata.
type features struct {
	Info struct {
		Features map[string]json.RawMessage `json:"features"`
	} `json:"info"`
}

// WithFeatures returns s with each ClassLabel column's names in its
// field's metadata (MetaClassNames), from the "huggingface" schema
// metadata datasets writes; a schema without it is returned as it is.
func WithFeatures(s *arrow.Schema) (*arrow.Schema, error) {
	raw, ok := s.Metadata().GetValue("huggingface")
	if !ok {
		return s, nil
	}
	var fs features
	if err := json.Unmarshal([]byte(raw), &fs); err != nil {
		return nil, fmt.Errorf("the schema's huggingface metadata is not the features' JSON: %w", err)
	}
	fields := s.Fields()
	for i, fl := range fields {
		var feat struct {
			Type  string   `json:"_type"`
			Names []string `json:"names"`
		}
		if js, ok := fs.Info.Features[fl.Name]; !ok || json.Unmarshal(js, &feat) != nil || feat.Type != "ClassLabel" {
			continue
		}
		names, _ := json.Marshal(feat.Names)
		fields[i].Metadata = arrow.MetadataFrom(map[string]string{MetaClassNames: string(names)})
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), nil
}
