package gcs

import (
	"github.com/shardfeed/shardfeed/internal/store"
)

// Cloud is the name of Google's hosts in a policy (store.CloudHost.Cloud).
const Cloud = "google"

// CloudDomains are the domains Google owns for its APIs: plain HTTP is
// refused under them.
var CloudDomains = []string{"googleapis.com", "google.com"}

// CloudHosts are the hosts Google operates for Cloud Storage (its JSON
// and XML API, virtual-hosted buckets, regional endpoints and Private
// Service Connect endpoints) and for its token services (a key's
// assertion, Workload Identity Federation's STS, service account
// impersonation).
var CloudHosts = store.ExpandHosts(Cloud, []store.Partition{{Name: "google"}}, []store.CloudHost{
	{Use: store.UseStorage, Pattern: "storage.googleapis.com"},
	{Use: store.UseStorage, Pattern: "{bucket}.storage.googleapis.com"},
	{Use: store.UseStorage, Pattern: "storage.{label}.rep.googleapis.com"},
	{Use: store.UseStorage, Pattern: "storage-{label}.p.googleapis.com"},
	{Use: store.UseToken, Pattern: "oauth2.googleapis.com"},
	{Use: store.UseToken, Pattern: "accounts.google.com"},
	{Use: store.UseToken, Pattern: "sts.googleapis.com"},
	{Use: store.UseToken, Pattern: "iamcredentials.googleapis.com"},
})
