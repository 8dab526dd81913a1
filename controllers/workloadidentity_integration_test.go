//go:build integration

package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// managerUser is the identity the manager acts as in these tests, bound to
// the ClusterRole its markers generate (config/rbac/role.yaml) and nothing
// else, as the chart installs it.
const managerUser = "system:serviceaccount:shardfeed-system:shardfeed-test-manager"

func asManager(t *testing.T) *rest.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	var role rbacv1.ClusterRole
	for {
		var r rbacv1.ClusterRole
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Kind == "ClusterRole" {
			role = r
		}
	}
	if len(role.Rules) == 0 {
		t.Fatal("no ClusterRole in config/rbac/role.yaml")
	}
	ctx := context.Background()
	role.ObjectMeta = metav1.ObjectMeta{Name: "shardfeed-test-manager-wi"}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: managerUser}}}
	for _, obj := range []client.Object{&role, binding} {
		if err := apiServer.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser, Groups: []string{"system:authenticated"}}
	return cfg
}

// grantTokens is what a namespace's owner applies to lend ServiceAccount sa
// to shardfeed's index reads (docs/security.md).
func grantTokens(t *testing.T, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-token-" + sa, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{sa}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: managerUser}}}
	for _, obj := range []client.Object{role, binding} {
		if err := apiServer.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func serviceAccount(t *testing.T, ns, name string) {
	t.Helper()
	if err := apiServer.Client.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
}

// The operator reads a workload identity stream with a token of the
// dataset's ServiceAccount, requested on the real API server with the
// manager's own RBAC: refused until the namespace grants it for that
// ServiceAccount, and then for that one only. The exchange with the cloud
// is the one step no test here reaches (docs/stores.md); MinIO, which
// serves STS at its endpoint, refuses it without an identity provider.
func TestIntegrationWorkloadIdentityTokensOnlyWhereTheNamespaceLendsThem(t *testing.T) {
	cfg := asManager(t)
	runManager(t, cfg, logr.Discard(), func(r *controllers.TrainingDatasetReconciler) { r.Policy = controllers.StorePolicy{} })
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	serviceAccount(t, ns, "trainer")
	serviceAccount(t, ns, "admin")
	uri, _ := mdsStream(t, 300)
	ds := dataset(ns, uri, "", 2, 4)
	ds.Spec.Streams[0].Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: "arn:aws:iam::123456789012:role/data-reader"}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	degraded := func(reason string, says ...string) {
		t.Helper()
		got := waitFor(t, client.ObjectKeyFromObject(ds), reason, func(d *datav1alpha1.TrainingDataset) bool {
			c := condition(d, datav1alpha1.ConditionDegraded)
			return c != nil && c.Reason == reason
		})
		c := condition(got, datav1alpha1.ConditionDegraded)
		for _, s := range says {
			if !strings.Contains(c.Message, s) {
				t.Errorf("message %q does not say %q", c.Message, s)
			}
		}
	}
	degraded(datav1alpha1.ReasonCredentials, "may not request tokens for ServiceAccount "+ns+"/trainer", "Role and RoleBinding")

	grantTokens(t, ns, "trainer")
	degraded(datav1alpha1.ReasonIndexUnreachable, "workload identity: AWS STS (AssumeRoleWithWebIdentity) refused the ServiceAccount token")

	// The grant lends that ServiceAccount, for any audience the stream
	// names, and no other of the namespace.
	manager, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) (string, error) {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{workloadidentity.AudienceAWS}, ExpirationSeconds: ptr.To(int64(600))}}
		err := manager.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}, req)
		return req.Status.Token, err
	}
	if _, err := token("admin"); !apierrors.IsForbidden(err) {
		t.Fatalf("a token for another ServiceAccount of the namespace: %v, want 403", err)
	}
	jwt, err := token("trainer")
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: jwt, Audiences: []string{workloadidentity.AudienceAWS}}}
	if err := apiServer.Client.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:"+ns+":trainer" {
		t.Fatalf("the token is %+v, want the ServiceAccount %s/trainer", review.Status, ns)
	}
}

// A pod reads a workload identity stream with its own ServiceAccount's
// projected token, for the stream's audience, mounted in the sidecar
// alone; a pod running as another ServiceAccount is refused.
func TestIntegrationPodWebhookProjectsWorkloadIdentityTokens(t *testing.T) {
	serveWebhook(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	serviceAccount(t, ns, "trainer")
	audience := "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/k8s/providers/cluster"
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{
			{Name: "gcs", Source: datav1alpha1.Source{URI: "gs://data/a/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", Audience: audience}}},
			{Name: "azure", Source: datav1alpha1.Source{URI: "az://acct/data/b/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", ClientID: "0000", TenantID: "tenant"}}},
			{Name: "s3", Source: datav1alpha1.Source{URI: "s3://data/c/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}}},
		},
		NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	writePlan(t, ds, []configmaps.StreamDigest{{Name: "gcs", MaxShardBytes: 1 << 20}, {Name: "azure", MaxShardBytes: 1 << 20}, {Name: "s3", MaxShardBytes: 1 << 20}})
	job := createJob(t, ns, "train", 4)

	other := indexedJobPod(ns, job, 0, "web")
	err := apiServer.Client.Create(ctx, other)
	if err == nil || !strings.Contains(err.Error(), `reads with the workload identity of ServiceAccount "trainer", and the pod runs as "default"`) {
		t.Fatalf("a pod running as another ServiceAccount: %v, want a denial naming both", err)
	}

	// A dataset that names the API server's audience (admitted before the
	// check, or past the validating webhook) gets no pod a token for it.
	apiAudience := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "s3", Source: datav1alpha1.Source{URI: "s3://data/c/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{
			ServiceAccountName: "trainer", RoleARN: "arn:aws:iam::123456789012:role/r", Audience: "https://kubernetes.default.svc.cluster.local"}}}},
		NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, apiAudience); err != nil {
		t.Fatal(err)
	}
	writePlan(t, apiAudience, []configmaps.StreamDigest{{Name: "s3", MaxShardBytes: 1 << 20}})
	stolen := indexedJobPod(ns, createJob(t, ns, "steal", 1), 0, "api")
	stolen.Spec.ServiceAccountName = "trainer"
	err = apiServer.Client.Create(ctx, stolen)
	if err == nil || !strings.Contains(err.Error(), "is the Kubernetes API server's") {
		t.Fatalf("a pod of a dataset naming the API server's audience: %v, want a denial", err)
	}

	pod := indexedJobPod(ns, job, 1, "web")
	pod.Spec.ServiceAccountName = "trainer"
	if err := apiServer.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var projected *corev1.ProjectedVolumeSource
	for _, v := range pod.Spec.Volumes {
		if v.Name == inject.IdentityVolume {
			projected = v.Projected
		}
	}
	if projected == nil || len(projected.Sources) != 2 {
		t.Fatalf("identity volume %+v, want two projected tokens", projected)
	}
	want := map[string]string{"gcs": audience, "azure": workloadidentity.AudienceAzure}
	for _, s := range projected.Sources {
		if tok := s.ServiceAccountToken; tok == nil || want[tok.Path] != tok.Audience {
			t.Errorf("projected %+v, want the audiences %v by stream", s, want)
		}
	}
	for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == inject.IdentityVolume && m.MountPath == workloadidentity.TokenDir
		}
		if mounted != (c.Name == inject.SidecarName) {
			t.Errorf("container %s mounts the identity tokens: %v (only the sidecar may)", c.Name, mounted)
		}
	}
}
