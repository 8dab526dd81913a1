package nodecache

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// The fourth security review's finding 2 on the node cache: an entry's
// address left out the S3 region and partition, and a Parquet footer (a
// part the index does not hash) of a shared source was served to every
// namespace: one namespace's footer, filled through a bucket of the same
// name in another partition, was another namespace's hit. An entry is now
// addressed by everything that selects its bytes, and a part no hash
// checks is kept per namespace and credential, whatever the source.
func TestAnEntryIsAddressedByEverythingThatSelectsItsBytes(t *testing.T) {
	a, err := NewAgent(Options{Dir: t.TempDir(), Auth: anyPod{}, AllowCloudEndpoints: true, Log: slog.New(slog.DiscardHandler),
		SharedSources: []string{"s3://public-data/"}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checksum.Of("sha256", []byte("row group"))
	if err != nil {
		t.Fatal(err)
	}
	weak, err := checksum.Of("xxh64", []byte("row group"))
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA1"), "AWS_SECRET_ACCESS_KEY": []byte("s1")}
	other := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA2"), "AWS_SECRET_ACCESS_KEY": []byte("s2")}
	rowGroup := Request{Source: Source{URI: "s3://public-data/web/", Region: "us-east-1", Credentials: creds},
		Part: Part{Key: "a.parquet", Range: true, Offset: 4, Size: 100, Hash: sum.String()}}
	footer := Request{Source: rowGroup.Source, Part: Part{Key: "a.parquet", Range: true, Offset: 104, Size: 20, Version: sum.String()}}
	with := func(r Request, edit func(*Request)) Request {
		r.Source.Credentials = maps.Clone(r.Source.Credentials)
		edit(&r)
		return r
	}
	alice := Caller{Namespace: "team-a", ServiceAccount: "trainer", Pod: "p1"}
	bob := Caller{Namespace: "team-b", ServiceAccount: "trainer", Pod: "p2"}
	for _, tt := range []struct {
		name   string
		c1, c2 Caller
		r1, r2 Request
		same   bool
	}{
		{"a shared source's hashed part: one entry for all", alice, bob, rowGroup, rowGroup, true},
		{"a shared source's footer: one entry per namespace", alice, bob, footer, footer, false},
		{"a shared source's footer: one entry per credential", alice, alice, footer, with(footer, func(r *Request) { r.Source.Credentials = other }), false},
		{"a shared source's footer, the same namespace and keys: one entry", alice, alice, footer, footer, true},
		{"the same bucket name in another partition", alice, bob, with(footer, func(r *Request) { r.Source.Region = "cn-north-1" }),
			with(footer, func(r *Request) { r.Source.Region = "us-east-1" }), false},
		{"the same bucket name in another partition, the same namespace", alice, alice, with(footer, func(r *Request) { r.Source.Region = "cn-north-1" }), footer, false},
		{"the same bucket name in another region", alice, alice, with(footer, func(r *Request) { r.Source.Region = "eu-west-1" }), footer, false},
		{"a weakly hashed part in another partition", alice, alice, with(rowGroup, func(r *Request) {
			r.Hash, r.Source.Region = weak.String(), "cn-north-1"
		}), with(rowGroup, func(r *Request) { r.Hash = weak.String() }), false},
		{"another endpoint", alice, alice, with(footer, func(r *Request) { r.Source.Endpoint = "https://s3.example.com" }), footer, false},
		{"another object's footer of the same version", alice, alice, with(footer, func(r *Request) { r.Key = "b.parquet" }), footer, false},
		{"another version of the footer", alice, alice, with(footer, func(r *Request) { r.Version = weak.String() }), footer, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e1, err := a.entry(tt.c1, tt.r1)
			if err != nil {
				t.Fatal(err)
			}
			e2, err := a.entry(tt.c2, tt.r2)
			if err != nil {
				t.Fatal(err)
			}
			if got := e1.Key == e2.Key; got != tt.same {
				t.Errorf("one entry: %v, want %v", got, tt.same)
			}
		})
	}
}
