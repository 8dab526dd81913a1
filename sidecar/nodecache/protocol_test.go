package nodecache

import (
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
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

func TestOnlyAPodBoundTokenForTheAgentIsAccepted(t *testing.T) {
	user := func(name string, extra map[string]authnv1.ExtraValue) authnv1.UserInfo {
		return authnv1.UserInfo{Username: name, Extra: extra}
	}
	bound := map[string]authnv1.ExtraValue{extraPodName: {"trainer-0"}, extraNodeName: {"node-a"}}
	for _, tt := range []struct {
		name string
		st   authnv1.TokenReviewStatus
		want string // "": accepted
	}{
		{"a pod's token", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience}, User: user("system:serviceaccount:ml:trainer", bound)}, ""},
		{"not authenticated", authnv1.TokenReviewStatus{Error: "expired"}, "expired"},
		{"another audience", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"shardfeed"}, User: user("system:serviceaccount:ml:trainer", bound)}, "not for audience"},
		{"a user", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience}, User: user("alice", bound)}, "not a ServiceAccount"},
		{"a ServiceAccount without a pod", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience}, User: user("system:serviceaccount:ml:trainer", nil)}, "not bound to a pod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := callerOf(tt.st)
			switch {
			case tt.want == "" && (err != nil || c != Caller{Namespace: "ml", ServiceAccount: "trainer", Pod: "trainer-0", Node: "node-a"}):
				t.Fatalf("%+v, %v", c, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("%v; want %q", err, tt.want)
			}
		})
	}
}

// An entry's address is who may read it, the store, and the bytes: it
// differs with the namespace, the Secret's keys, the identity, the store
// and the hash, and not with what a shared source's readers bring.
func TestAnEntrysAddressSaysWhoMayReadIt(t *testing.T) {
	a := &Agent{key: []byte("k"), shared: []sharedPrefix{{scheme: "s3", host: "public", endpoint: "https://minio:9000"}}}
	base := Request{Source: Source{URI: "s3://b/p/", Endpoint: "minio:9000", Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("s")}},
		Part: Part{Key: "x.mds", Size: 10, Hash: "xxh64:00ff"}}
	owner := Caller{Namespace: "ml", ServiceAccount: "trainer"}
	addr := func(c Caller, f func(*Request)) string {
		r := base
		r.Source.Credentials = map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("s")}
		if f != nil {
			f(&r)
		}
		s, err := a.entry(c, r)
		if err != nil {
			t.Fatal(err)
		}
		return s.Key
	}
	same := addr(owner, nil)
	if addr(Caller{Namespace: "ml", ServiceAccount: "other"}, nil) != same {
		t.Error("another ServiceAccount with the same Secret's keys has another address")
	}
	for _, tt := range []struct {
		name string
		c    Caller
		f    func(*Request)
	}{
		{"another namespace", Caller{Namespace: "other", ServiceAccount: "trainer"}, nil},
		{"another secret key", owner, func(r *Request) { r.Source.Credentials["AWS_SECRET_ACCESS_KEY"] = []byte("t") }},
		{"a workload identity", owner, func(r *Request) { r.Source.Credentials, r.Source.Identity = nil, &Identity{Token: "a", RoleARN: "arn"} }},
		{"another endpoint", owner, func(r *Request) { r.Source.Endpoint = "minio-2:9000" }},
		{"another bucket", owner, func(r *Request) { r.Source.URI = "s3://c/p/" }},
		{"another key", owner, func(r *Request) { r.Key = "y.mds" }},
		{"another hash", owner, func(r *Request) { r.Hash = "xxh64:00fe" }},
		{"a range of the object", owner, func(r *Request) { r.Range = true }},
		{"a version", owner, func(r *Request) { r.Version = "xxh64:0001" }},
	} {
		if addr(tt.c, tt.f) == same {
			t.Errorf("%s: the same address", tt.name)
		}
	}
	// A workload identity's entries are its ServiceAccount's.
	id := func(r *Request) { r.Source.Credentials, r.Source.Identity = nil, &Identity{Token: "a", RoleARN: "arn"} }
	rotated := func(r *Request) { r.Source.Credentials, r.Source.Identity = nil, &Identity{Token: "b", RoleARN: "arn"} }
	if addr(owner, id) != addr(owner, rotated) || addr(owner, id) == addr(Caller{Namespace: "ml", ServiceAccount: "other"}, id) {
		t.Error("a workload identity's address changes with its token, or not with its ServiceAccount")
	}
	// sha256 names content: one address for the bytes wherever they are
	// in the store; xxh64 does not.
	sha := func(key string) func(*Request) {
		return func(r *Request) { r.Key, r.Hash = key, "sha256:"+strings.Repeat("ab", 32) }
	}
	if addr(owner, sha("x.mds")) != addr(owner, sha("copy/x.mds")) {
		t.Error("a sha256-hashed shard has two addresses")
	}
	// Shared: every namespace and key reads the same entry of a shard a
	// collision-resistant hash checks; of an xxh64 one, each its own.
	shared := func(r *Request) { sha("x.mds")(r); r.Source.URI = "s3://public/" }
	if addr(owner, shared) != addr(Caller{Namespace: "other"}, func(r *Request) { shared(r); r.Source.Credentials = map[string][]byte{"x": []byte("y")} }) {
		t.Error("a shared source's entry differs by reader")
	}
	weak := func(r *Request) { r.Source.URI = "s3://public/" }
	if addr(owner, weak) == addr(Caller{Namespace: "other"}, weak) {
		t.Error("a shared source's xxh64 entry is shared")
	}
}
