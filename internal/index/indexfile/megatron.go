package indexfile

import (
	"errors"
	"fmt"
	"slices"
)

// Megatron says how the shards of a megatron stream (Megatron-LM's indexed
// datasets: .bin token files, each with its .idx) are read.
type Megatron struct {
	// DType is the tokens' type, as the .idx files' dtype code says
	// (MegatronDTypes).
	DType string `json:"dtype"`
	// Unit is what a sample is: a "document" (the tokens of its sequences)
	// or a "sequence".
	Unit string `json:"unit"`
	// Modes says the .idx files record a mode per sequence (multimodal
	// datasets), served as the column "mode" of a sequence.
	Modes bool `json:"modes,omitempty"`
}

// The units of a megatron stream's samples.
const (
	MegatronDocument = "document"
	MegatronSequence = "sequence"
)

// MegatronDTypes are the token types of Megatron's .idx dtype codes 1–8, in
// code order.
var MegatronDTypes = []string{"uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"}

// MegatronRanges is how many ranges of its .idx a megatron shard lists:
// its sequences' lengths, then (documents) the document index entries
// from its first document's start to its last one's end, or (sequences of
// a multimodal index) their modes.
func (m *Megatron) MegatronRanges() int {
	if m.Unit == MegatronDocument || m.Modes {
		return 2
	}
	return 1
}

func (m *Megatron) check() error {
	if !slices.Contains(MegatronDTypes, m.DType) {
		return fmt.Errorf(`"dtype" %q is not one of %v`, m.DType, MegatronDTypes)
	}
	switch m.Unit {
	case MegatronDocument:
		if m.Modes {
			return errors.New("a multimodal index (modes per sequence) serves sequences, not documents")
		}
	case MegatronSequence:
	default:
		return fmt.Errorf(`"unit" %q is neither %q nor %q`, m.Unit, MegatronDocument, MegatronSequence)
	}
	return nil
}

// checkMegatron checks a megatron shard's .idx ranges.
func (e Entry) checkMegatron(m *Megatron) error {
	if len(e.Ranges) != m.MegatronRanges() {
		return fmt.Errorf("a megatron shard of %ss lists %d ranges of its .idx, not %d", m.Unit, len(e.Ranges), m.MegatronRanges())
	}
	for _, r := range e.Ranges {
		if err := r.check(); err != nil {
			return err
		}
	}
	if e.Files != nil || e.RowStart != 0 {
		return errors.New("a megatron shard has a lance shard's files")
	}
	return nil
}
