// Package workloadidentity is how a stream reads as a ServiceAccount of its
// dataset's namespace: the token's audience per store, and where the
// webhook projects the token into the sidecar. The operator requests
// tokens only where the namespace's owner let it, by RBAC (create
// serviceaccounts/token for that ServiceAccount, in that namespace); the
// exchange with the cloud is the store's (internal/store: Identity).
package workloadidentity

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/s3"
)

// TokenDir is where the webhook projects the sidecar's workload identity
// tokens, one file per stream, named after it.
const TokenDir = "/var/run/shardfeed-identity"

// TokenExpiry is the lifetime the projected and requested tokens ask for.
const TokenExpiry = 3600

// The audiences the clouds' workload identity expect by default.
const (
	AudienceAWS   = "sts.amazonaws.com"
	AudienceAzure = "api://AzureADTokenExchange"
)

// Audience returns the token audience of a source's workload identity:
// the one it names, else the default of its store.
func Audience(src datav1alpha1.Source) string {
	if src.WorkloadIdentity == nil {
		return ""
	}
	if a := src.WorkloadIdentity.Audience; a != "" {
		return a
	}
	u, err := url.Parse(src.URI)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case s3.Scheme:
		return AudienceAWS
	case azure.Scheme, azure.SchemeABFSS:
		return AudienceAzure
	}
	return "" // gs:// names its pool provider (the CRD requires it)
}

// gcpProvider is the audience of a Google workload identity pool
// provider: its full resource name.
var gcpProvider = regexp.MustCompile(`^//iam\.googleapis\.com/projects/[0-9]{1,20}/locations/global/workloadIdentityPools/[a-z0-9-]{1,63}/providers/[a-z0-9-]{1,63}$`)

// CheckAudience refuses a token audience that is not a cloud's token
// exchange: a token for any other audience is a credential wherever that
// audience is accepted (for the API server's, a credential of the
// ServiceAccount itself), and its receiver is the dataset author's choice.
// Allowed: the AWS and Azure defaults, a Google pool provider's name, and
// the platform team's own (the chart's datasets.allowedAudiences), never
// one of the API server's.
func CheckAudience(audience string, allowed []string) error {
	switch {
	case strings.Contains(strings.ToLower(audience), "kubernetes.default"):
		return fmt.Errorf("workloadIdentity.audience %q is the Kubernetes API server's: a token for it is a credential of the ServiceAccount itself, which shardfeed never requests", audience)
	case audience == AudienceAWS || audience == AudienceAzure || gcpProvider.MatchString(audience) || slices.Contains(allowed, audience):
		return nil
	}
	return fmt.Errorf("workloadIdentity.audience %q is not a cloud's token exchange: use %s (AWS), %s (Azure), a Google pool provider's name (//iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>), or ask the platform team to add it to the chart's datasets.allowedAudiences",
		audience, AudienceAWS, AudienceAzure)
}

// Identity is the store identity of a source's workload identity, with the
// tokens token returns; nil for a source without one.
func Identity(src datav1alpha1.Source, token func(context.Context) (string, error)) *store.Identity {
	wi := src.WorkloadIdentity
	if wi == nil {
		return nil
	}
	return &store.Identity{Token: token, Audience: Audience(src), RoleARN: wi.RoleARN,
		ServiceAccountEmail: wi.ServiceAccountEmail, ClientID: wi.ClientID, TenantID: wi.TenantID}
}

// TokenPath is the projected token file of a stream in the sidecar.
func TokenPath(dir, stream string) string { return filepath.Join(dir, stream) }
