// Package strictjson decodes JSON the way encoding/json's Decoder does
// with DisallowUnknownFields, without its second copy of the document, and
// lists a document's top-level keys: the index, its side files and its
// checkpoint are the largest documents the operator and each sidecar read,
// and a key the reader does not know is a file of another version, not
// one to read in part.
package strictjson
