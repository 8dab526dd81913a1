// Package nodewire is what a sidecar and its node's agent say to each
// other (the node cache, #58): the agent's paths and headers, the JSON of
// a shard request and of a warm request, and the checks the agent makes
// of each before it does anything. The agent (sidecar/nodecache) and the
// sidecar's client of it (sidecar/nodecache/nodeclient) both import it;
// it imports neither.
package nodewire

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
)

// The agent's API: one POST of a Request to ShardPath, with the pod's
// projected ServiceAccount token (audience Audience) as a bearer token,
// answered with the shard's bytes.
const (
	ShardPath = "/v1/shard"
	// Audience is the audience of the token a sidecar presents: a token
	// for the agent is no good to the API server's other clients.
	Audience = sidecarconfig.NodeAgentAudience
	// HeaderCache says where the agent's answer came from: CacheHit (the
	// node held it) or CacheFilled (the agent fetched it for this request).
	HeaderCache = "Shardfeed-Node-Cache"
	CacheHit    = "hit"
	CacheFilled = "filled"
	// MaxRequestBytes caps a request's body: a source, its credentials
	// (a service account's JSON key is a few KiB) and a key.
	MaxRequestBytes = 256 << 10
	// WarmPath takes a WarmRequest, with the same token: the shards a pod
	// reads next. It is answered at once (202, a WarmAnswer); the agent
	// fetches the absent ones in the background and keeps them all before
	// plain recency for a while (the agent's Options.WantedFor).
	WarmPath = "/v1/warm"
	// MaxWarmShards bounds the shards of one WarmRequest.
	MaxWarmShards = 256
	// PodRequests is how many shard requests of one pod the agent serves
	// at once by default (429 beyond), and how many a sidecar sends.
	PodRequests = 8
)

// WarmRequest names shards of one source that a pod reads next, in the
// order it reads them: the agent fetches those it lacks ahead of the
// pod's requests, with the credentials given for this request only (held
// in memory until its fills are done or dropped, never written).
type WarmRequest struct {
	Source Source `json:"source"`
	Shards []Part `json:"shards"`
}

// WarmAnswer says what the agent made of a WarmRequest: how many shards
// it holds already, how many it queued to fetch, and how many it dropped
// (its queue full, or no room beside the shards its pods read next).
type WarmAnswer struct {
	Present int `json:"present"`
	Queued  int `json:"queued"`
	Dropped int `json:"dropped"`
}

// Requests are the warm request's shards as shard requests.
func (w WarmRequest) Requests() []Request {
	out := make([]Request, len(w.Shards))
	for i, s := range w.Shards {
		out[i] = Request{Source: w.Source, Part: s}
	}
	return out
}

// Check refuses a warm request the agent cannot serve safely, saying why.
func (w WarmRequest) Check() error {
	if len(w.Shards) == 0 || len(w.Shards) > MaxWarmShards {
		return fmt.Errorf("a warm request names %d shards: 1 to %d", len(w.Shards), MaxWarmShards)
	}
	for _, r := range w.Requests() {
		if err := r.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Request asks the agent for one shard: Part of an object of Source.
type Request struct {
	Source Source `json:"source"`
	Part
}

// Part is the bytes of a shard: [Offset, Offset+Size) of the object Key
// under a source's prefix when Range is set, else the whole object of
// Size bytes, which must hash to Hash.
type Part struct {
	Key    string `json:"key"`
	Range  bool   `json:"range,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Size   int64  `json:"size"`
	Hash   string `json:"hash,omitempty"`
	// Version, for a part the index does not hash (a Parquet footer), is
	// a hash of the object's that changes with it: the entry is keyed by
	// it, and kept as the store gave it.
	Version string `json:"version,omitempty"`
}

// Source is the store a shard is read from and the credentials to read it
// with, for this request only.
type Source struct {
	URI      string `json:"uri"`
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
	// Credentials are the keys of the job's Secret (store.Source's).
	Credentials map[string][]byte `json:"credentials,omitempty"`
	// Identity is a workload identity: the pod's token for the cloud and
	// the role it takes.
	Identity *Identity `json:"identity,omitempty"`
}

// Identity is a workload identity with its current token.
type Identity struct {
	Token               string `json:"token"`
	Audience            string `json:"audience,omitempty"`
	RoleARN             string `json:"roleARN,omitempty"`
	ServiceAccountEmail string `json:"serviceAccountEmail,omitempty"`
	ClientID            string `json:"clientID,omitempty"`
	TenantID            string `json:"tenantID,omitempty"`
}

// Check refuses a request the agent cannot serve safely, saying why.
func (r Request) Check() error {
	if r.Source.URI == "" {
		return errors.New("source.uri is empty")
	}
	if strings.HasPrefix(r.Source.URI, "file:") {
		return fmt.Errorf("source %s: the node agent reads object stores, not files (it would read its own node's filesystem)", r.Source.URI)
	}
	u, err := url.Parse(r.Source.URI)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("source.uri %q is not scheme://bucket/prefix/", r.Source.URI)
	}
	// Stores read a prefix's segments differently ("a/../b" is a container
	// "a" to Azure, cleaned away elsewhere): an entry's address must name
	// what the store reads, so only a plain prefix is taken.
	if p := "/" + strings.Trim(u.Path, "/") + "/"; p != "//" && (strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../")) {
		return fmt.Errorf("source.uri %q: write its prefix without empty, \".\" or \"..\" segments", r.Source.URI)
	}
	if r.Key == "" || strings.HasPrefix(r.Key, "/") || path.Clean(r.Key) != r.Key || r.Key == ".." || strings.HasPrefix(r.Key, "../") {
		return fmt.Errorf("key %q is not a plain relative path", r.Key)
	}
	if r.Size < 0 || r.Offset < 0 {
		return fmt.Errorf("%s: size %d and offset %d must not be negative", r.Key, r.Size, r.Offset)
	}
	sum, err := checksum.Parse(r.Hash)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Key, err)
	}
	version, err := checksum.Parse(r.Version)
	if err != nil {
		return fmt.Errorf("%s: version: %w", r.Key, err)
	}
	if sum.IsZero() && version.IsZero() {
		return fmt.Errorf("%s: no hash and no version: the node cache keeps only shards an index hashes (shardfeed index --hash)", r.Key)
	}
	if len(r.Source.Credentials) == 0 && r.Source.Identity == nil {
		return fmt.Errorf("source %s: no credentials: the node agent reads only with the job's own (a Secret or a workload identity), never its own", r.Source.URI)
	}
	if id := r.Source.Identity; id != nil && id.Token == "" {
		return fmt.Errorf("source %s: the workload identity's token is empty", r.Source.URI)
	}
	return nil
}
