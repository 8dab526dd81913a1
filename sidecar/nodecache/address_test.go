package nodecache

import (
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
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
		SharedSources: []string{"s3://public-data", "s3://mirror/?endpoint=https://minio.internal:9000", "az://publicacct/"}})
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
	strong512, err := checksum.Of("sha512", []byte("row group"))
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA1"), "AWS_SECRET_ACCESS_KEY": []byte("s1")}
	other := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA2"), "AWS_SECRET_ACCESS_KEY": []byte("s2")}
	rowGroup := nodewire.Request{Source: nodewire.Source{URI: "s3://public-data/web/", Region: "us-east-1", Credentials: creds},
		Part: nodewire.Part{Key: "a.parquet", Range: true, Offset: 4, Size: 100, Hash: sum.String()}}
	footer := nodewire.Request{Source: rowGroup.Source, Part: nodewire.Part{Key: "a.parquet", Range: true, Offset: 104, Size: 20, Version: sum.String()}}
	with := func(r nodewire.Request, edit func(*nodewire.Request)) nodewire.Request {
		r.Source.Credentials = maps.Clone(r.Source.Credentials)
		edit(&r)
		return r
	}
	alice := Caller{Namespace: "team-a", ServiceAccount: "trainer", Pod: "p1"}
	bob := Caller{Namespace: "team-b", ServiceAccount: "trainer", Pod: "p2"}
	for _, tt := range []struct {
		name   string
		c1, c2 Caller
		r1, r2 nodewire.Request
		same   bool
	}{
		{"a shared source's hashed part: one entry for all", alice, bob, rowGroup, rowGroup, true},
		{"a shared source's footer: one entry per namespace", alice, bob, footer, footer, false},
		{"a shared source's footer: one entry per credential", alice, alice, footer, with(footer, func(r *nodewire.Request) { r.Source.Credentials = other }), false},
		{"a shared source's footer, the same namespace and keys: one entry", alice, alice, footer, footer, true},
		{"the same bucket name in another partition", alice, bob, with(footer, func(r *nodewire.Request) { r.Source.Region = "cn-north-1" }),
			with(footer, func(r *nodewire.Request) { r.Source.Region = "us-east-1" }), false},
		{"the same bucket name in another partition, the same namespace", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.Region = "cn-north-1" }), footer, false},
		{"the same bucket name in another region", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.Region = "eu-west-1" }), footer, false},
		{"a weakly hashed part in another partition", alice, alice, with(rowGroup, func(r *nodewire.Request) {
			r.Hash, r.Source.Region = weak.String(), "cn-north-1"
		}), with(rowGroup, func(r *nodewire.Request) { r.Hash = weak.String() }), false},
		{"another endpoint", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.Endpoint = "https://s3.example.com" }), footer, false},
		{"another object's footer of the same version", alice, alice, with(footer, func(r *nodewire.Request) { r.Key = "b.parquet" }), footer, false},
		{"another version of the footer", alice, alice, with(footer, func(r *nodewire.Request) { r.Version = weak.String() }), footer, false},
		// The red team's: a shard hashed with xxh64 in a shared source,
		// filled through an Azure connection string naming an account of
		// the same name in another cloud (its bytes forged to the hash),
		// was a hit for every namespace. Only a collision-resistant hash
		// shares an entry now.
		{"a shared source's xxh64 shard: one entry per namespace", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Hash = weak.String() }),
			with(rowGroup, func(r *nodewire.Request) { r.Hash = weak.String() }), false},
		{"a shared source's sha512 shard: one entry for all", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Hash = strong512.String() }),
			with(rowGroup, func(r *nodewire.Request) { r.Hash = strong512.String() }), true},
		// A prefix is whole segments: s3://public-data/ shares nothing of
		// s3://public-data-private/.
		{"a bucket whose name begins with a shared one", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "s3://public-data-private/web/" }),
			with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "s3://public-data-private/web/" }), false},
		{"the shared bucket through userinfo", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "s3://public-data@evil/web/" }),
			with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "s3://public-data@evil/web/" }), false},
		{"the shared bucket written in capitals", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "S3://Public-Data/web/" }), rowGroup, true},
		// The second round's: a shared prefix is the cloud's own store
		// unless it names an endpoint; a bucket of the same name behind
		// another endpoint, or reached through an Azure connection
		// string, is another store, kept per namespace.
		{"the shared bucket's name behind another endpoint", alice, bob, with(rowGroup, func(r *nodewire.Request) { r.Source.Endpoint = "https://minio.internal:9000" }),
			with(rowGroup, func(r *nodewire.Request) { r.Source.Endpoint = "https://minio.internal:9000" }), false},
		{"a shared bucket behind its named endpoint", alice, bob, with(rowGroup, func(r *nodewire.Request) {
			r.Source.URI, r.Source.Endpoint = "s3://mirror/web/", "MINIO.internal:9000/"
		}),
			with(rowGroup, func(r *nodewire.Request) {
				r.Source.URI, r.Source.Endpoint = "s3://mirror/web/", "https://minio.internal:9000"
			}), true},
		{"a shared account through a connection string", alice, bob, with(rowGroup, func(r *nodewire.Request) {
			r.Source.URI, r.Source.Credentials = "az://publicacct/data/", map[string][]byte{"AZURE_STORAGE_CONNECTION_STRING": []byte("AccountName=publicacct;EndpointSuffix=core.chinacloudapi.cn")}
		}), with(rowGroup, func(r *nodewire.Request) { r.Source.URI = "az://publicacct/data/" }), false},
		{"abfss containers of one account", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.URI = "abfss://scratch@acct.dfs.core.windows.net/p/" }),
			with(footer, func(r *nodewire.Request) { r.Source.URI = "abfss://datasets@acct.dfs.core.windows.net/p/" }), false},
		// The key is the store's: prefix "p/" and key "a", not "pa".
		{"a prefix without its slash and a key", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.URI, r.Key = "s3://public-data/p", "a" }),
			with(footer, func(r *nodewire.Request) { r.Source.URI, r.Key = "s3://public-data/", "pa" }), false},
		{"a prefix with and without its slash", alice, alice, with(footer, func(r *nodewire.Request) { r.Source.URI, r.Key = "s3://public-data/p", "a" }),
			with(footer, func(r *nodewire.Request) { r.Source.URI, r.Key = "s3://public-data/p/", "a" }), true},
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

// A shared source is a store's bucket and a prefix of whole segments;
// anything else is refused when the agent starts, saying how to write it.
func TestASharedSourceIsABucketAndAPrefix(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want sharedPrefix
		err  bool
	}{
		{in: "s3://public-data/", want: sharedPrefix{scheme: "s3", host: "public-data"}},
		{in: "s3://public-data", want: sharedPrefix{scheme: "s3", host: "public-data"}},
		{in: "S3://Public-Data/web", want: sharedPrefix{scheme: "s3", host: "public-data", path: "web/"}},
		{in: "gs://b/a/./c/../d/", want: sharedPrefix{scheme: "gs", host: "b", path: "a/d/"}},
		{in: "s3://datasets/?endpoint=minio.internal:9000", want: sharedPrefix{scheme: "s3", host: "datasets", endpoint: "https://minio.internal:9000"}},
		{in: "s3://datasets/?endpoint=http://10.0.0.5:9000/", want: sharedPrefix{scheme: "s3", host: "datasets", endpoint: "http://10.0.0.5:9000"}},
		{in: "s3://datasets/?region=x", err: true},
		{in: "s3://datasets/?endpoint=a&endpoint=b", err: true},
		{in: "public-data/", err: true},
		{in: "s3:///web/", err: true},
		{in: "s3://user@public-data/", err: true},
		{in: "s3://public-data/#x", err: true},
	} {
		got, err := parseShared(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("%q: %+v, %v; want %+v (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
	if _, err := NewAgent(Options{Dir: t.TempDir(), Auth: anyPod{}, Log: slog.New(slog.DiscardHandler), SharedSources: []string{"public-data"}}); err == nil ||
		!strings.Contains(err.Error(), "scheme://bucket/prefix/") {
		t.Errorf("an agent with a shared source of no scheme: %v", err)
	}
}

// The second round's: "az://acct/scratch/../datasets/" is container
// scratch to Azure and datasets once cleaned; a request names its prefix
// plainly or is refused.
func TestARequestNamesItsPrefixPlainly(t *testing.T) {
	ok := nodewire.Request{Source: nodewire.Source{URI: "az://acct/datasets/p/", Credentials: map[string][]byte{"k": []byte("v")}},
		Part: nodewire.Part{Key: "x", Size: 1, Hash: "sha256:" + strings.Repeat("00", 32)}}
	for _, tt := range []struct {
		uri  string
		want string // "": taken
	}{
		{"az://acct/datasets/p/", ""},
		{"s3://b/", ""},
		{"s3://b", ""},
		{"az://acct/scratch/../datasets/p/", "segments"},
		{"s3://b/a/./c/", "segments"},
		{"s3://b/a//c/", "segments"},
		{"s3:///p/", "not scheme://bucket/prefix/"},
	} {
		r := ok
		r.Source.URI = tt.uri
		err := r.Check()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v; want %q", tt.uri, err, tt.want)
		}
	}
}

// An entry's address is who may read it, the store, and the bytes: it
// differs with the namespace, the Secret's keys, the identity, the store
// and the hash, and not with what a shared source's readers bring.
func TestAnEntrysAddressSaysWhoMayReadIt(t *testing.T) {
	a := &Agent{key: []byte("k"), shared: []sharedPrefix{{scheme: "s3", host: "public", endpoint: "https://minio:9000"}}}
	base := nodewire.Request{Source: nodewire.Source{URI: "s3://b/p/", Endpoint: "minio:9000", Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("id"), "AWS_SECRET_ACCESS_KEY": []byte("s")}},
		Part: nodewire.Part{Key: "x.mds", Size: 10, Hash: "xxh64:00ff"}}
	owner := Caller{Namespace: "ml", ServiceAccount: "trainer"}
	addr := func(c Caller, f func(*nodewire.Request)) string {
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
		f    func(*nodewire.Request)
	}{
		{"another namespace", Caller{Namespace: "other", ServiceAccount: "trainer"}, nil},
		{"another secret key", owner, func(r *nodewire.Request) { r.Source.Credentials["AWS_SECRET_ACCESS_KEY"] = []byte("t") }},
		{"a workload identity", owner, func(r *nodewire.Request) {
			r.Source.Credentials, r.Source.Identity = nil, &nodewire.Identity{Token: "a", RoleARN: "arn"}
		}},
		{"another endpoint", owner, func(r *nodewire.Request) { r.Source.Endpoint = "minio-2:9000" }},
		{"another bucket", owner, func(r *nodewire.Request) { r.Source.URI = "s3://c/p/" }},
		{"another key", owner, func(r *nodewire.Request) { r.Key = "y.mds" }},
		{"another hash", owner, func(r *nodewire.Request) { r.Hash = "xxh64:00fe" }},
		{"a range of the object", owner, func(r *nodewire.Request) { r.Range = true }},
		{"a version", owner, func(r *nodewire.Request) { r.Version = "xxh64:0001" }},
	} {
		if addr(tt.c, tt.f) == same {
			t.Errorf("%s: the same address", tt.name)
		}
	}
	// A workload identity's entries are its ServiceAccount's.
	id := func(r *nodewire.Request) {
		r.Source.Credentials, r.Source.Identity = nil, &nodewire.Identity{Token: "a", RoleARN: "arn"}
	}
	rotated := func(r *nodewire.Request) {
		r.Source.Credentials, r.Source.Identity = nil, &nodewire.Identity{Token: "b", RoleARN: "arn"}
	}
	if addr(owner, id) != addr(owner, rotated) || addr(owner, id) == addr(Caller{Namespace: "ml", ServiceAccount: "other"}, id) {
		t.Error("a workload identity's address changes with its token, or not with its ServiceAccount")
	}
	// sha256 names content: one address for the bytes wherever they are
	// in the store; xxh64 does not.
	sha := func(key string) func(*nodewire.Request) {
		return func(r *nodewire.Request) { r.Key, r.Hash = key, "sha256:"+strings.Repeat("ab", 32) }
	}
	if addr(owner, sha("x.mds")) != addr(owner, sha("copy/x.mds")) {
		t.Error("a sha256-hashed shard has two addresses")
	}
	// Shared: every namespace and key reads the same entry of a shard a
	// collision-resistant hash checks; of an xxh64 one, each its own.
	shared := func(r *nodewire.Request) { sha("x.mds")(r); r.Source.URI = "s3://public/" }
	if addr(owner, shared) != addr(Caller{Namespace: "other"}, func(r *nodewire.Request) { shared(r); r.Source.Credentials = map[string][]byte{"x": []byte("y")} }) {
		t.Error("a shared source's entry differs by reader")
	}
	weak := func(r *nodewire.Request) { r.Source.URI = "s3://public/" }
	if addr(owner, weak) == addr(Caller{Namespace: "other"}, weak) {
		t.Error("a shared source's xxh64 entry is shared")
	}
}
