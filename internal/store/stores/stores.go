// Package stores is the registry of object stores by URI scheme: the one
// table every part of shardfeed (the reconciler, the sidecar, the CLI)
// opens a stream's store through. A new store is a package implementing
// store.Store and one row here.
package stores

import (
	"context"
	"net/url"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/gcs"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/store/s3"
)

// Default is every store shardfeed reads.
var Default = store.Registry{
	s3.Scheme:         s3.Open,
	gcs.Scheme:        gcs.Open,
	azure.Scheme:      azure.Open,
	azure.SchemeABFSS: azure.Open,
	local.Scheme:      local.Open,
}

// Open returns the store of a source from the Default registry.
func Open(ctx context.Context, src store.Source) (store.Store, error) {
	return Default.Open(ctx, src)
}

// secretKeys is what each store needs of a credentials Secret.
var secretKeys = map[string]store.SecretKeys{
	s3.Scheme:         s3.SecretKeys,
	gcs.Scheme:        gcs.SecretKeys,
	azure.Scheme:      azure.SecretKeys,
	azure.SchemeABFSS: azure.SecretKeys,
}

// SecretKeysOf returns what the store of uri needs of a credentials
// Secret; false for a URI whose store takes none (file://) or none known.
func SecretKeysOf(uri string) (store.SecretKeys, bool) {
	u, err := url.Parse(uri)
	if err != nil {
		return store.SecretKeys{}, false
	}
	k, ok := secretKeys[u.Scheme]
	return k, ok
}
