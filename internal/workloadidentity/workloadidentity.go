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
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/gcs"
	"github.com/shardfeed/shardfeed/internal/store/s3"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// TokenDir is where the webhook projects the sidecar's workload identity
// tokens, one file per stream, named after it.
const TokenDir = "/var/run/shardfeed-identity"

// TokenExpiry is the lifetime the projected and requested tokens ask for.
const TokenExpiry = 3600

// The audiences the clouds' workload identity expect by default.
const (
	AudienceAWS   = s3.Audience
	AudienceAzure = azure.Audience
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
	return stores.DefaultAudience(src.URI) // gs:// names its pool provider (the CRD requires it)
}

// CheckAudience refuses a token audience that is not the token exchange
// of the cloud of the store at uri: a token for any other audience is a
// credential wherever that audience is accepted (for the API server's, a
// credential of the ServiceAccount itself; for another cloud's, an
// identity there), and its receiver is the dataset author's choice.
// Allowed: the store's cloud's (AWS STS's for s3://, Entra's for az:// and
// abfss://, a Google pool provider's name for gs://), and the platform
// team's own (the chart's datasets.allowedAudiences), never one of the
// API server's.
func CheckAudience(uri, audience string, allowed []string) error {
	d, _, err := stores.Lookup(uri)
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(strings.ToLower(audience), "kubernetes.default"):
		return fmt.Errorf("workloadIdentity.audience %q is the Kubernetes API server's: a token for it is a credential of the ServiceAccount itself, which shardfeed never requests", audience)
	case d.AudienceAllowed != nil && d.AudienceAllowed(audience) || slices.Contains(allowed, audience):
		return nil
	}
	want := map[string]string{s3.Scheme: AudienceAWS + " (AWS STS)", azure.Scheme: AudienceAzure + " (Microsoft Entra)", azure.SchemeABFSS: AudienceAzure + " (Microsoft Entra)",
		"gs": "a Google pool provider's name (//iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>)"}[d.Scheme]
	if want == "" {
		return fmt.Errorf("workloadIdentity.audience %q: a %s:// store has no workload identity", audience, d.Scheme)
	}
	return fmt.Errorf("workloadIdentity.audience %q is not the token exchange of the cloud of %s: use %s, or ask the platform team to add it to the chart's datasets.allowedAudiences",
		audience, uri, want)
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

// The ServiceAccount annotations that name what its token is exchanged
// for, as the clouds' own webhooks read them (the EKS pod identity
// webhook, Azure workload identity, GKE). The ServiceAccount's owner sets
// them; a dataset's author, who may only name the ServiceAccount, cannot.
const (
	AnnotationAWSRoleARN        = "eks.amazonaws.com/role-arn"
	AnnotationAzureClientID     = "azure.workload.identity/client-id"
	AnnotationAzureTenantID     = "azure.workload.identity/tenant-id"
	AnnotationGCPServiceAccount = "iam.gke.io/gcp-service-account"
)

var (
	roleARN   = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)
	azureID   = regexp.MustCompile(`^[0-9a-zA-Z.-]{1,64}$`)
	gcpEmail  = regexp.MustCompile(`^[^@\s]{1,256}@[^@\s]{1,256}$`)
	checkedBy = map[string]*regexp.Regexp{AnnotationAWSRoleARN: roleARN,
		AnnotationAzureClientID: azureID, AnnotationAzureTenantID: azureID, AnnotationGCPServiceAccount: gcpEmail}
)

// Resolve returns a source with its workload identity as the
// ServiceAccount sa names it: the AWS role, the Entra application and
// tenant and the Google service account come from sa's annotations, which
// its owner controls. A value the dataset still names (the fields before
// the annotations decided) must equal the annotation; where the annotation
// is missing, the error gives the exact command that adds it, so a
// dataset written for the fields keeps working once its ServiceAccount is
// annotated (docs/security.md, migration).
func Resolve(src datav1alpha1.Source, sa *corev1.ServiceAccount) (datav1alpha1.Source, error) {
	wi := src.WorkloadIdentity
	if wi == nil {
		return src, nil
	}
	d, _, err := stores.Lookup(src.URI)
	if err != nil {
		return src, err
	}
	resolved := *wi
	// take sets *field from annotation key; required says the store
	// cannot exchange the token without it.
	take := func(field *string, key, what string, required bool) error {
		named, annotated := *field, sa.Annotations[key]
		var hint string
		if named != "" {
			hint = named
		} else {
			hint = "<" + what + ">"
		}
		add := fmt.Sprintf("kubectl annotate serviceaccount -n %s %s %s=%s", sa.Namespace, sa.Name, key, hint)
		switch {
		case annotated == "" && named != "":
			return fmt.Errorf("ServiceAccount %s/%s does not name the %s the dataset names (%s), and only its owner decides it now: %s (docs/security.md, migration)",
				sa.Namespace, sa.Name, what, named, add)
		case annotated == "" && required:
			return fmt.Errorf("ServiceAccount %s/%s does not name its %s: its owner sets it with %s", sa.Namespace, sa.Name, what, add)
		case annotated != "" && !checkedBy[key].MatchString(annotated):
			return fmt.Errorf("ServiceAccount %s/%s: annotation %s is not a valid %s: fix it", sa.Namespace, sa.Name, key, what)
		case named != "" && named != annotated:
			return fmt.Errorf("the dataset names %s %s, and ServiceAccount %s/%s (annotation %s) names another: drop the dataset's value, or make them equal",
				what, named, sa.Namespace, sa.Name, key)
		}
		*field = annotated
		return nil
	}
	switch d.Cloud {
	case s3.Cloud:
		err = take(&resolved.RoleARN, AnnotationAWSRoleARN, "AWS role ARN", true)
	case azure.Cloud:
		if err = take(&resolved.ClientID, AnnotationAzureClientID, "Entra client ID", true); err == nil {
			err = take(&resolved.TenantID, AnnotationAzureTenantID, "Entra tenant ID", true)
		}
	case gcs.Cloud: // without a service account the federated identity reads
		err = take(&resolved.ServiceAccountEmail, AnnotationGCPServiceAccount, "Google service account", false)
	default:
		err = fmt.Errorf("%s: a %s:// source takes no workload identity (it is a cloud's): remove workloadIdentity from the stream's source", src.URI, d.Scheme)
	}
	if err != nil {
		return src, err
	}
	src.WorkloadIdentity = &resolved
	return src, nil
}
