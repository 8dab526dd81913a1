package controllers

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// streamCredentials returns what the operator reads a stream's index with:
// its Secret's data (read through the API, never cached or logged), or its
// workload identity, or neither (the policy then allows the manager's own
// chain, or refused the stream before).
func (r *TrainingDatasetReconciler) streamCredentials(ctx context.Context, ns string, s datav1alpha1.Stream) (map[string][]byte, *store.Identity, error) {
	if wi := s.Source.WorkloadIdentity; wi != nil {
		// One token for the reconcile's reads (they are bounded well
		// inside its lifetime), requested first so that a missing grant
		// is reported as such, not as the cloud's refusal.
		token, err := r.serviceAccountToken(ctx, ns, s)
		if err != nil {
			return nil, nil, err
		}
		return nil, workloadidentity.Identity(s.Source, func(context.Context) (string, error) { return token, nil }), nil
	}
	ref := s.Source.CredentialsSecretRef
	if ref == nil {
		return nil, nil, nil
	}
	keys, ok := stores.SecretKeysOf(s.Source.URI)
	if !ok {
		return nil, nil, &credentialsError{fmt.Errorf("stream %q: %s takes no credentials Secret: drop credentialsSecretRef", s.Name, s.Source.URI)}
	}
	// Missing and incomplete read the same: the dataset's readers need
	// not be the Secret's, and learn only that it cannot be used.
	unusable := &credentialsError{fmt.Errorf("stream %q: Secret %s/%s (credentialsSecretRef) does not exist or lacks keys: it needs %s", s.Name, ns, ref.Name, keys.Describe)}
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, unusable
		}
		return nil, nil, fmt.Errorf("stream %q: reading Secret %s: %w", s.Name, ref.Name, err)
	}
	if !keys.Complete(secret.Data) {
		return nil, nil, unusable
	}
	return secret.Data, nil, nil
}

// tokenExpiry is the lifetime of the tokens the operator requests: the
// API server's minimum, for reads that take seconds.
const tokenExpiry = 600

// serviceAccountToken requests a token of the stream's ServiceAccount for
// its cloud audience. The manager's ClusterRole cannot
// do it: the namespace grants create on serviceaccounts/token for that one
// ServiceAccount to the manager (docs/security.md), so a dataset's author
// borrows no identity the namespace's owner did not lend.
func (r *TrainingDatasetReconciler) serviceAccountToken(ctx context.Context, ns string, s datav1alpha1.Stream) (string, error) {
	name := s.Source.WorkloadIdentity.ServiceAccountName
	audience := workloadidentity.Audience(s.Source)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To(int64(tokenExpiry))}}
	err := r.SubResource("token").Create(ctx, sa, req)
	switch {
	case apierrors.IsForbidden(err):
		return "", &credentialsError{fmt.Errorf("stream %q: the operator may not request tokens for ServiceAccount %s/%s (workloadIdentity): grant its ServiceAccount create on serviceaccounts/token for %q in namespace %s with a Role and RoleBinding (docs/security.md, workload identity)",
			s.Name, ns, name, name, ns)}
	case apierrors.IsNotFound(err):
		return "", &credentialsError{fmt.Errorf("stream %q: ServiceAccount %s/%s (workloadIdentity.serviceAccountName) does not exist: create it, federated with the cloud (docs/stores.md)",
			s.Name, ns, name)}
	case err != nil:
		return "", fmt.Errorf("stream %q: requesting a token for ServiceAccount %s/%s: %w", s.Name, ns, name, err)
	}
	return req.Status.Token, nil
}

// resolveIdentity returns s's source with its workload identity as the
// ServiceAccount's annotations name it (workloadidentity.Resolve): its
// owner, not the dataset's author, decides the role or application its
// tokens are exchanged for. The ServiceAccount is read directly (the
// manager may get, not list or watch, ServiceAccounts: they hold no
// secrets, and caching every one of the cluster would cost memory).
func (r *TrainingDatasetReconciler) resolveIdentity(ctx context.Context, ns string, s *datav1alpha1.Stream) (datav1alpha1.Source, error) {
	wi := s.Source.WorkloadIdentity
	if wi == nil {
		return s.Source, nil
	}
	var sa corev1.ServiceAccount
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: wi.ServiceAccountName}, &sa); {
	case apierrors.IsNotFound(err):
		return s.Source, &credentialsError{fmt.Errorf("stream %q: ServiceAccount %s/%s (workloadIdentity.serviceAccountName) does not exist: create it, federated with the cloud (docs/stores.md)",
			s.Name, ns, wi.ServiceAccountName)}
	case err != nil:
		return s.Source, fmt.Errorf("stream %q: reading ServiceAccount %s/%s: %w", s.Name, ns, wi.ServiceAccountName, err)
	}
	src, err := workloadidentity.Resolve(s.Source, &sa)
	if err != nil {
		return s.Source, &credentialsError{fmt.Errorf("stream %q: %w", s.Name, err)}
	}
	return src, nil
}

// identitiesOf is what a plan's workload identities resolved to, for
// appliedPlan.
func identitiesOf(spec *datav1alpha1.TrainingDatasetSpec) string {
	var b strings.Builder
	for _, s := range spec.Streams {
		if wi := s.Source.WorkloadIdentity; wi != nil {
			fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00%s\x00", s.Name, wi.RoleARN, wi.ClientID, wi.TenantID, wi.ServiceAccountEmail)
		}
	}
	return b.String()
}
