//go:build integration

package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// annotate sets (or, with "", removes) annotations of ServiceAccount
// ns/trainer, as its owner would.
func annotate(t *testing.T, ns string, annotations map[string]string) {
	const name = "trainer"
	t.Helper()
	var sa corev1.ServiceAccount
	if err := apiServer.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sa); err != nil {
		t.Fatal(err)
	}
	if sa.Annotations == nil {
		sa.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		if v == "" {
			delete(sa.Annotations, k)
		} else {
			sa.Annotations[k] = v
		}
	}
	if err := apiServer.Client.Update(context.Background(), &sa); err != nil {
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
	annotate(t, ns, map[string]string{workloadidentity.AnnotationAWSRoleARN: "arn:aws:iam::123456789012:role/data-reader"})
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

	// What the token is exchanged for is the ServiceAccount's to say: a
	// dataset naming an Entra application its ServiceAccount does not is
	// refused with the annotation to add, and a plan that carries another
	// identity than the ServiceAccount names now is not read with.
	unannotated := indexedJobPod(ns, job, 1, "web")
	unannotated.Spec.ServiceAccountName = "trainer"
	err = apiServer.Client.Create(ctx, unannotated)
	if err == nil || !strings.Contains(err.Error(), "kubectl annotate serviceaccount -n "+ns+" trainer azure.workload.identity/client-id=0000") {
		t.Fatalf("a pod whose ServiceAccount names no Entra application: %v, want a denial with the annotation to add", err)
	}
	annotate(t, ns, map[string]string{workloadidentity.AnnotationAzureClientID: "0000", workloadidentity.AnnotationAzureTenantID: "tenant",
		workloadidentity.AnnotationGCPServiceAccount: "reader@p.iam.gserviceaccount.com"})
	stale := indexedJobPod(ns, job, 1, "web")
	stale.Spec.ServiceAccountName = "trainer"
	err = apiServer.Client.Create(ctx, stale)
	if err == nil || !strings.Contains(err.Error(), `reads stream "gcs" with another identity than ServiceAccount `+ns+`/trainer names now`) {
		t.Fatalf("a pod whose plan reads with another identity than its ServiceAccount names: %v, want a denial", err)
	}
	annotate(t, ns, map[string]string{workloadidentity.AnnotationGCPServiceAccount: ""})

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

// fakeSTS stands in front of MinIO as the stream's endpoint: it answers
// AssumeRoleWithWebIdentity with MinIO's credentials, recording the role
// each exchange asked for, and passes every other request to MinIO.
type fakeSTS struct {
	mu    sync.Mutex
	roles []string
}

func (f *fakeSTS) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.roles)
}

func startFakeSTS(t *testing.T) (*fakeSTS, string) {
	t.Helper()
	target, err := url.Parse(minioServer.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	f := &fakeSTS{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/" {
			proxy.ServeHTTP(w, r)
			return
		}
		if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRoleWithWebIdentity" || r.PostForm.Get("WebIdentityToken") == "" {
			http.Error(w, "not an exchange", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.roles = append(f.roles, r.PostForm.Get("RoleArn"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		_, _ = fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult><Credentials>`+
			`<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><Expiration>%s</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`,
			minioServer.AccessKey, minioServer.SecretKey, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// Upgrade: a dataset written when it named the role itself
// (workloadIdentity.roleARN) is refused with the exact annotation to add,
// sends no token anywhere meanwhile, and reads again once the
// ServiceAccount's owner adds it; a dataset that names no role reads as
// the annotation says, and the plan the sidecars read with follows the
// annotation when its owner changes it.
func TestIntegrationAnOldWorkloadIdentityDatasetReadsOnceItsServiceAccountIsAnnotated(t *testing.T) {
	cfg := asManager(t)
	runManager(t, cfg, logr.Discard(), func(r *controllers.TrainingDatasetReconciler) {
		r.Policy, r.IndexRecheck = controllers.StorePolicy{}, time.Second
	})
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	serviceAccount(t, ns, "trainer")
	grantTokens(t, ns, "trainer")
	sts, endpoint := startFakeSTS(t)
	uri, _ := mdsStream(t, 300)
	const role = "arn:aws:iam::123456789012:role/data-reader"
	withIdentity := func(name string, wi datav1alpha1.WorkloadIdentity) *datav1alpha1.TrainingDataset {
		ds := dataset(ns, uri, "", 2, 4)
		ds.Name = name
		ds.Spec.Streams[0].Source.Endpoint = endpoint
		ds.Spec.Streams[0].Source.WorkloadIdentity = &wi
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	old := withIdentity("old", datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: role})
	got := waitFor(t, client.ObjectKeyFromObject(old), "Degraded for the missing annotation", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionDegraded)
		return c != nil && c.Reason == datav1alpha1.ReasonCredentials
	})
	add := "kubectl annotate serviceaccount -n " + ns + " trainer " + workloadidentity.AnnotationAWSRoleARN + "=" + role
	if msg := condition(got, datav1alpha1.ConditionDegraded).Message; !strings.Contains(msg, add) {
		t.Fatalf("Degraded says %q, want the annotation to add: %s", msg, add)
	}
	if asked := sts.asked(); len(asked) != 0 {
		t.Fatalf("STS was asked for %v before the ServiceAccount named a role", asked)
	}

	annotate(t, ns, map[string]string{workloadidentity.AnnotationAWSRoleARN: role})
	planRole := func(ds *datav1alpha1.TrainingDataset, want string) {
		t.Helper()
		waitFor(t, client.ObjectKeyFromObject(ds), "a plan read as "+want, func(d *datav1alpha1.TrainingDataset) bool {
			var cm corev1.ConfigMap
			if c := condition(d, datav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(ds.Name)}, &cm) != nil {
				return false
			}
			p, err := configmaps.PlanFromData(cm.Data)
			return err == nil && p.Spec.Streams[0].Source.WorkloadIdentity.RoleARN == want
		})
	}
	planRole(old, role)

	fresh := withIdentity("fresh", datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"})
	planRole(fresh, role)
	for _, r := range sts.asked() {
		if r != role {
			t.Fatalf("STS was asked for role %q, want only %q", r, role)
		}
	}

	// The owner moves the ServiceAccount to another role: the dataset
	// that names none follows it, the one that names the old one is
	// refused (it no longer agrees), and nothing more is asked of STS for
	// the old role.
	const next = "arn:aws:iam::123456789012:role/data-reader-v2"
	annotate(t, ns, map[string]string{workloadidentity.AnnotationAWSRoleARN: next})
	planRole(fresh, next)
	waitFor(t, client.ObjectKeyFromObject(old), "Degraded: the roles differ", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionDegraded)
		return c != nil && c.Reason == datav1alpha1.ReasonCredentials && strings.Contains(c.Message, "names another")
	})
}
