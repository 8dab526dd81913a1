package nodewire

import (
	"strings"
	"testing"
)

func TestARequestTheAgentCannotServeSafelyIsRefused(t *testing.T) {
	good := Request{Source: Source{URI: "s3://b/p/", Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("k")}}, Part: Part{Key: "a/b.mds", Size: 10, Hash: "xxh64:00ff"}}
	edit := func(f func(*Request)) Request {
		r := good
		f(&r)
		return r
	}
	for _, tt := range []struct {
		name string
		req  Request
		want string // "": accepted
	}{
		{"a shard of an object store", good, ""},
		{"a workload identity", edit(func(r *Request) {
			r.Source.Credentials, r.Source.Identity = nil, &Identity{Token: "jwt", RoleARN: "arn"}
		}), ""},
		{"no URI", edit(func(r *Request) { r.Source.URI = "" }), "source.uri is empty"},
		{"a file", edit(func(r *Request) { r.Source.URI = "file:///var/lib/" }), "not files"},
		{"a key out of the prefix", edit(func(r *Request) { r.Key = "../other/x" }), "not a plain relative path"},
		{"an absolute key", edit(func(r *Request) { r.Key = "/etc/passwd" }), "not a plain relative path"},
		{"a key with dots inside", edit(func(r *Request) { r.Key = "a/../../x" }), "not a plain relative path"},
		{"a negative size", edit(func(r *Request) { r.Size = -1 }), "must not be negative"},
		{"a negative offset", edit(func(r *Request) { r.Range, r.Offset = true, -5 }), "must not be negative"},
		{"no hash", edit(func(r *Request) { r.Hash = "" }), "no hash and no version"},
		{"a footer: no hash, its row group's as the version", edit(func(r *Request) { r.Hash, r.Version = "", "xxh64:00ff" }), ""},
		{"a version that is not a hash", edit(func(r *Request) { r.Hash, r.Version = "", "v2" }), "version"},
		{"an unknown hash", edit(func(r *Request) { r.Hash = "crc0:00" }), "not supported"},
		{"no credentials", edit(func(r *Request) { r.Source.Credentials = nil }), "never its own"},
		{"an identity without a token", edit(func(r *Request) { r.Source.Credentials, r.Source.Identity = nil, &Identity{RoleARN: "arn"} }), "token is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("%v; want %q", err, tt.want)
			}
		})
	}
}
