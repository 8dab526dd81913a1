// Package stores is the registry of object stores by URI scheme: the one
// table every part of shardfeed (the reconciler, the sidecar, the CLI)
// opens a stream's store through and looks a store's facts up in. A new
// store is a package implementing store.Store with its store.Descriptor,
// and one row in Descriptors.
package stores

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/gcs"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/store/s3"
)

// Descriptors are every store shardfeed reads, one per scheme.
var Descriptors = []store.Descriptor{s3.Descriptor, gcs.Descriptor, azure.Descriptor, azure.DescriptorABFSS, local.Descriptor}

// Default opens the Descriptors' stores.
var Default = registry(Descriptors)

func registry(ds []store.Descriptor) store.Registry {
	r := store.Registry{}
	for _, d := range ds {
		r[d.Scheme] = d.Open
	}
	return r
}

// Open returns the store of a source from the Default registry.
func Open(ctx context.Context, src store.Source) (store.Store, error) {
	return Default.Open(ctx, src)
}

// Lookup returns the descriptor of the store of uri, and the URI parsed;
// a scheme no store reads is an error that lists those that are read.
func Lookup(uri string) (store.Descriptor, *url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return store.Descriptor{}, nil, fmt.Errorf("source URI %q: %w", uri, err)
	}
	i := slices.IndexFunc(Descriptors, func(d store.Descriptor) bool { return d.Scheme == u.Scheme })
	if i < 0 {
		schemes := make([]string, len(Descriptors))
		for j, d := range Descriptors {
			schemes[j] = d.Scheme + "://"
		}
		return store.Descriptor{}, nil, fmt.Errorf("source URI %q: scheme %q is not supported: use %s", uri, u.Scheme, strings.Join(schemes, ", "))
	}
	return Descriptors[i], u, nil
}

// Root returns the URI of the bucket (or container) uri is in, ending in
// "/": s3://bucket/, gs://bucket/, az://account/container/,
// abfss://container@account.dfs.core.windows.net/, or file:/// for a local
// path; a scheme no store reads is an error.
func Root(uri string) (string, error) {
	d, u, err := Lookup(uri)
	if err != nil {
		return "", err
	}
	if d.Root == nil {
		return "", fmt.Errorf("%s:// has no root: its descriptor says none (internal/store/stores)", d.Scheme)
	}
	return d.Root(u)
}

// SameStore reports whether a and b are in one store: the same scheme and
// the same account where the store's credentials are an account's
// (Azure's), so that the credentials and endpoint of one read both.
func SameStore(a, b string) (bool, error) {
	da, ua, err := Lookup(a)
	if err != nil {
		return false, err
	}
	db, ub, err := Lookup(b)
	if err != nil {
		return false, err
	}
	if da.Scheme != db.Scheme {
		return false, nil
	}
	return da.Account == nil || da.Account(ua) == db.Account(ub), nil
}

// SecretKeysOf returns what the store of uri needs of a credentials
// Secret; false for a URI whose store takes none (file://) or none known.
func SecretKeysOf(uri string) (store.SecretKeys, bool) {
	d, _, err := Lookup(uri)
	if err != nil || d.SecretKeys.Complete == nil {
		return store.SecretKeys{}, false
	}
	return d.SecretKeys, true
}

// DefaultHost returns the host the store of uri reaches when its source
// names no endpoint (in region, where the store's cloud has regions); an
// unknown scheme, a region of no partition, or a store that reaches no
// network, is an error.
func DefaultHost(uri, region string) (string, error) {
	d, u, err := Lookup(uri)
	if err != nil {
		return "", err
	}
	if d.DefaultHost == nil {
		return "", fmt.Errorf("source URI %q: a %s:// store reaches no network", uri, d.Scheme)
	}
	return d.DefaultHost(u, region)
}

// Policy is the platform's endpoint policy: the hosts it lists, and,
// where clouds is set, every store's cloud hosts (which it knows either
// way, to keep each to its own cloud's credentials).
func Policy(listed []string, clouds bool) *store.Endpoints {
	p := &store.Endpoints{Listed: listed, CloudAllowed: clouds}
	seen := map[string]bool{}
	for _, d := range Descriptors {
		if d.Cloud == "" || seen[d.Cloud] { // az:// and abfss:// share Azure's hosts
			continue
		}
		seen[d.Cloud] = true
		p.Domains = append(p.Domains, d.CloudDomains...)
		p.Cloud = append(p.Cloud, d.CloudHosts...)
	}
	return p
}

// Gate returns the gate of a source's requests of use u under policy:
// its store's cloud, bound to the account its URI names.
func Gate(policy *store.Endpoints, uri string, u store.Use) (*store.Gate, error) {
	d, parsed, err := Lookup(uri)
	if err != nil {
		return nil, err
	}
	account := ""
	if d.Account != nil {
		account = d.Account(parsed)
	}
	return policy.Gate(d.Cloud, u, account), nil
}

// DefaultAudience returns the token audience of a workload identity of
// the store of uri that names none; "" for a store whose sources name
// their own, or an unknown scheme.
func DefaultAudience(uri string) string {
	d, _, err := Lookup(uri)
	if err != nil {
		return ""
	}
	return d.Audience
}
