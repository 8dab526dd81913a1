//go:build integration

package manifests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/internal/version"
)

var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

func TestIntegrationInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	root, bin := dirs(t)
	webhooks := []string{"Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
	helm := []string{filepath.Join(bin, "helm"), "template", "shardfeed", filepath.Join(root, "charts", "shardfeed"),
		"--namespace", "default", "--kube-version", kubeVersion}
	tests := []struct {
		name  string
		cmd   []string
		kinds []string // kinds that must be among the rendered objects
	}{
		{
			name: "kustomize config/default",
			cmd:  []string{filepath.Join(bin, "kubectl"), "kustomize", filepath.Join(root, "config", "default")},
			kinds: append([]string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
				"Deployment"}, webhooks...),
		},
		{
			name: "helm chart",
			cmd:  helm,
			kinds: append([]string{"CustomResourceDefinition", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Deployment",
				"PodDisruptionBudget"}, webhooks...),
		},
		{
			// cert-manager's own kinds are only rendered: this API server
			// has no cert-manager.
			name: "helm chart with cert-manager and the monitoring",
			cmd: append(append([]string{}, helm...), "--set", "webhook.certManager.enabled=true",
				"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
				"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true"),
			kinds: append([]string{"Certificate", "Issuer", "Deployment", "ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}, webhooks...),
		},
		{
			name:  "helm chart with the node cache",
			cmd:   append(append([]string{}, helm...), "--set", "nodeCache.enabled=true", "--set", "nodeCache.namespaces={ml}", "--set", "nodeCache.sharedSources={s3://public-data/}"),
			kinds: append([]string{"DaemonSet", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"}, webhooks...),
		},
	}
	// The node agent's rules (docs/security.md, "The node agent"): it
	// reviews tokens and its metrics' clients, and reads nothing of the
	// cluster.
	agentRules := []any{map[string]any{"apiGroups": []any{"authentication.k8s.io"}, "resources": []any{"tokenreviews"}, "verbs": []any{"create"}},
		map[string]any{"apiGroups": []any{"authorization.k8s.io"}, "resources": []any{"subjectaccessreviews"}, "verbs": []any{"create"}}}
	// The manager's rules as controller-gen generates them from the
	// markers: one ClusterRole, and one Role in the operator's namespace.
	wantRules := map[string]any{}
	for _, obj := range render(t, []string{"cat", filepath.Join(root, "config", "rbac", "role.yaml")}) {
		wantRules[obj.GetKind()] = obj.Object["rules"]
	}
	if len(wantRules) != 2 || wantRules["ClusterRole"] == nil || wantRules["Role"] == nil {
		t.Fatalf("config/rbac/role.yaml holds %v, want a ClusterRole and a Role", wantRules)
	}
	// The hardening issue's bound: cluster-wide, the manager writes no
	// Roles, RoleBindings or Secrets (it grants nobody anything; the one
	// Secret it writes, its certificate's, is in its own namespace's Role).
	for _, r := range wantRules["ClusterRole"].([]any) {
		rule := r.(map[string]any)
		for _, res := range rule["resources"].([]any) {
			switch res {
			case "roles", "rolebindings", "clusterroles", "clusterrolebindings", "secrets", "*", "serviceaccounts/token":
				for _, v := range rule["verbs"].([]any) {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("the manager's ClusterRole may %s %s", v, res)
					}
				}
			}
		}
	}
	// The CRDs as controller-gen generates them: the chart's must be the
	// same but for the keep policy.
	wantCRDs := map[string]*unstructured.Unstructured{}
	crdFiles, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	for _, f := range crdFiles {
		for _, obj := range render(t, []string{"cat", f}) {
			wantCRDs[obj.GetName()] = obj
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, tt.cmd)
			seen := map[string]bool{}
			for _, obj := range objs {
				seen[obj.GetKind()] = true
				manager := strings.HasSuffix(obj.GetName(), "-manager")
				if obj.GetKind() == "ClusterRole" && strings.HasSuffix(obj.GetName(), "-node-agent") && !reflect.DeepEqual(obj.Object["rules"], agentRules) {
					t.Errorf("the node agent's ClusterRole has rules %v, want only %v", obj.Object["rules"], agentRules)
				}
				if want, ok := wantRules[obj.GetKind()]; ok && manager && !slices.Equal(ruleSet(obj.Object["rules"]), ruleSet(want)) {
					t.Errorf("%s %s has rules %v, the markers generate %v: update it (make manifests; the chart by hand)", obj.GetKind(), obj.GetName(), obj.Object["rules"], want)
				}
				if obj.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(tt.name, "helm") {
					annotations := obj.GetAnnotations()
					if annotations["helm.sh/resource-policy"] != "keep" {
						t.Errorf("the chart's CRD %s lacks helm.sh/resource-policy: keep (an uninstall would delete every dataset)", obj.GetName())
					}
					bare := obj.DeepCopy()
					delete(annotations, "helm.sh/resource-policy")
					bare.SetAnnotations(annotations)
					if want := wantCRDs[obj.GetName()]; want == nil || !reflect.DeepEqual(bare.Object, want.Object) {
						t.Errorf("the chart's CRD %s differs from config/crd/bases: run make manifests", obj.GetName())
					}
				}
				if obj.GetAPIVersion() == "cert-manager.io/v1" || obj.GetAPIVersion() == "monitoring.coreos.com/v1" {
					continue
				}
				// Server-side apply, as a user's kubectl apply --server-side
				// would; forced because envtest installed the CRD already.
				err := apiServer.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj),
					client.FieldOwner("shardfeed-manifests-test"), client.ForceOwnership)
				if err != nil {
					t.Errorf("%s %s/%s was rejected: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
			}
			for _, k := range tt.kinds {
				if !seen[k] {
					t.Errorf("no %s among the %d rendered objects", k, len(objs))
				}
			}
		})
	}
}

// render runs a command that prints YAML documents and decodes them.
// kubeVersion is the cluster version charts are rendered for (helm
// template's own default, 1.20, is below the chart's kubeVersion).
const kubeVersion = "1.36.0"

// What platform teams look for in a chart (the first-hour issue): a
// kubeVersion that refuses clusters without native sidecars, the values an
// umbrella chart and a private registry pass, Artifact Hub's annotations.
func TestIntegrationChartStatesItsNeedsAndTakesWhatPlatformsPass(t *testing.T) {
	root, bin := dirs(t)
	chart := filepath.Join(root, "charts", "shardfeed")
	objs := render(t, []string{filepath.Join(bin, "helm"), "template", "sf", chart, "--kube-version", kubeVersion,
		"--set", "global.imageRegistry=registry.corp", "--set", "imagePullSecrets[0].name=regcred",
		"--set", "sidecar.imagePullSecrets[0].name=sidecar-pull", "--set", "sidecar.imagePullSecrets[1].name=other",
		"--set", "nodeCache.enabled=true", "--set", "nodeCache.namespaces={ml}"})
	// Every pod the chart makes pulls with the secret: the manager's, the
	// node agent's and helm test's.
	for _, pods := range []struct {
		kind string
		path []string
	}{{"Deployment", []string{"spec", "template", "spec"}}, {"DaemonSet", []string{"spec", "template", "spec"}}, {"Pod", []string{"spec"}}} {
		found := byKind(objs, pods.kind)
		if len(found) == 0 {
			t.Errorf("the chart renders no %s", pods.kind)
		}
		for _, o := range found {
			secrets, _, _ := unstructured.NestedSlice(o.Object, append(pods.path, "imagePullSecrets")...)
			if fmt.Sprint(secrets) != "[map[name:regcred]]" {
				t.Errorf("%s %s pulls with imagePullSecrets %v, want [regcred]", pods.kind, o.GetName(), secrets)
			}
		}
	}
	// The sidecar's secrets go to the webhook, which adds them to the
	// pods it injects.
	if args := managerArgs(t, objs); !slices.Contains(args, "--sidecar-image-pull-secrets=sidecar-pull,other") {
		t.Errorf("the manager's arguments %q lack --sidecar-image-pull-secrets=sidecar-pull,other", args)
	}
	var stderr bytes.Buffer
	old := exec.Command(filepath.Join(bin, "helm"), "template", "sf", chart, "--kube-version", "1.28.0")
	old.Stderr = &stderr
	if err := old.Run(); err == nil || !strings.Contains(stderr.String(), "kubeVersion: >=1.29.0-0") {
		t.Errorf("a 1.28 cluster (no native sidecars by default): %v %s, want a refusal naming kubeVersion", err, stderr.String())
	}
	stderr.Reset()
	bad := exec.Command(filepath.Join(bin, "helm"), "template", "sf", chart, "--kube-version", kubeVersion, "--set", "imagePullSecrets[0].nam=x")
	bad.Stderr = &stderr
	if err := bad.Run(); err == nil || !strings.Contains(stderr.String(), "imagePullSecrets") {
		t.Errorf("a misspelt imagePullSecrets entry: %v %s, want the schema's refusal", err, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		KubeVersion string            `json:"kubeVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := sigyaml.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"artifacthub.io/license", "artifacthub.io/crds", "artifacthub.io/links", "artifacthub.io/operator"} {
		if meta.Annotations[key] == "" {
			t.Errorf("Chart.yaml has no annotation %s", key)
		}
	}
	var crds []map[string]string
	if err := sigyaml.Unmarshal([]byte(meta.Annotations["artifacthub.io/crds"]), &crds); err != nil || len(crds) != 1 || crds[0]["kind"] != "TrainingDataset" {
		t.Errorf("artifacthub.io/crds is not the TrainingDataset: %v %v", crds, err)
	}
}

// managerArgs are the manager container's arguments in the rendered chart.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range byKind(objs, "Deployment") {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, _ := c.(map[string]any); m["name"] == "manager" {
				args, _, _ := unstructured.NestedStringSlice(m, "args")
				return args
			}
		}
	}
	t.Fatal("the chart renders no manager container")
	return nil
}

func render(t *testing.T, cmd []string) []*unstructured.Unstructured {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdout, c.Stderr = &stdout, &stderr
	c.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := c.Run(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the output of %v: %v", cmd, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// TestIntegrationChartRunsSpreadReplicasWithABudgetAndThePolicy checks the
// rendered chart's defaults a platform team relies on (hardening issue,
// findings 2 and 8): two replicas, a soft anti-affinity so one node still
// runs both, a PodDisruptionBudget, the dataset policy passed to the
// manager, and an image pinned by digest when one is given.
func TestIntegrationChartRunsSpreadReplicasWithABudgetAndThePolicy(t *testing.T) {
	root, bin := dirs(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := render(t, []string{filepath.Join(bin, "helm"), "template", "sf", filepath.Join(root, "charts", "shardfeed"), "--namespace", "ops", "--kube-version", kubeVersion,
		"--set", "datasets.allowedEndpoints={minio.storage:9000,*.example.com}", "--set", "datasets.ambientCredentialsNamespaces={team-a}",
		"--set", "image.digest=" + digest, "--set", "sidecar.allowedImages={registry.team/sidecar:*}"})
	var deploy, pdb *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			deploy = o
		case "PodDisruptionBudget":
			pdb = o
		}
	}
	if deploy == nil || pdb == nil {
		t.Fatalf("rendered no Deployment (%v) or PodDisruptionBudget (%v)", deploy != nil, pdb != nil)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas"); fmt.Sprint(n) != "2" {
		t.Errorf("replicas %v, want 2", n)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); fmt.Sprint(n) != "1" {
		t.Errorf("the budget's minAvailable is %v, want 1", n)
	}
	pdbSel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	for k, v := range pdbSel {
		if podLabels[k] != v {
			t.Errorf("the budget selects %s=%s, the manager's pods have %v", k, v, podLabels)
		}
	}
	terms, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	required, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	if len(terms) != 1 || len(required) != 0 {
		t.Errorf("want one preferred (soft) anti-affinity term and no required one, got %v and %v", terms, required)
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args := fmt.Sprint(c["args"])
	for _, want := range []string{"--allowed-endpoints=minio.storage:9000,*.example.com", "--ambient-credentials-namespaces=team-a",
		"--max-index-bytes=16Mi", "--allowed-sidecar-images=registry.team/sidecar:*", "--store-request-timeout=10s", "--index-read-timeout=30s", "--max-concurrent-reconciles=4", "--enable-http2=false",
		"--sidecar-image=ghcr.io/shardfeed/shardfeed@" + digest} {
		if !strings.Contains(args, want) {
			t.Errorf("the manager's args %s lack %s", args, want)
		}
	}
	if c["image"] != "ghcr.io/shardfeed/shardfeed@"+digest {
		t.Errorf("image %v, want it pinned by digest", c["image"])
	}
}

// What platform teams set on a component that backs a failurePolicy: Fail
// webhook reaches the manager's pods; and every alert links its runbook,
// a section of docs/operations.md.
func TestIntegrationChartTakesWhatAPlatformSetsOnACriticalComponent(t *testing.T) {
	root, bin := dirs(t)
	objs := render(t, []string{filepath.Join(bin, "helm"), "template", "sf", filepath.Join(root, "charts", "shardfeed"), "--namespace", "ops", "--kube-version", kubeVersion,
		"--set", "priorityClassName=system-cluster-critical", "--set", "podLabels.team=ml", "--set", "podAnnotations.owner=platform",
		"--set", "manager.extraArgs={--store-request-timeout=20s}", "--set", "manager.extraEnv[0].name=HTTPS_PROXY",
		"--set", "manager.extraEnv[0].value=http://proxy:3128", "--set", "revisionHistoryLimit=3",
		"--set", "topologySpreadConstraints[0].maxSkew=1", "--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
		"--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway"})
	var deploy *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deploy = o
		}
	}
	if deploy == nil {
		t.Fatal("rendered no Deployment")
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deploy.Object, &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template
	c := pod.Spec.Containers[0]
	switch {
	case pod.Spec.PriorityClassName != "system-cluster-critical":
		t.Errorf("priorityClassName %q", pod.Spec.PriorityClassName)
	case pod.Labels["team"] != "ml" || pod.Annotations["owner"] != "platform":
		t.Errorf("pod labels %v, annotations %v", pod.Labels, pod.Annotations)
	case c.Args[len(c.Args)-1] != "--store-request-timeout=20s":
		t.Errorf("the extra argument is not last (it must win over the chart's): %v", c.Args)
	case len(c.Env) < 2 || c.Env[len(c.Env)-1].Name != "HTTPS_PROXY":
		t.Errorf("env %v", c.Env)
	case d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 3:
		t.Errorf("revisionHistoryLimit %v", d.Spec.RevisionHistoryLimit)
	case len(pod.Spec.TopologySpreadConstraints) != 1 || pod.Spec.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone":
		t.Errorf("topologySpreadConstraints %v", pod.Spec.TopologySpreadConstraints)
	}
	if sel := d.Spec.Selector.MatchLabels; sel["team"] != "" {
		t.Errorf("pod labels reached the selector (it is immutable): %v", sel)
	}

	alerts, err := os.ReadFile(filepath.Join(root, "charts", "shardfeed", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := sigyaml.Unmarshal(alerts, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule: no runbook
			}
			const base = "https://github.com/shardfeed/shardfeed/blob/main/docs/operations.md#"
			url := r.Annotations["runbook_url"]
			if url != base+strings.ToLower(r.Alert) || !strings.Contains(string(ops), "\n### "+r.Alert+"\n") {
				t.Errorf("alert %s: runbook_url %q, want %s%s and a section ### %s in docs/operations.md", r.Alert, url, base, strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
}

// TestIntegrationKustomizeDeploysTheChartsVersionNotLatest: config/default
// pins the manager's image to the chart's appVersion (finding 8).
func TestIntegrationKustomizeDeploysTheChartsVersionNotLatest(t *testing.T) {
	root, bin := dirs(t)
	chart, err := os.ReadFile(filepath.Join(root, "charts", "shardfeed", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var appVersion string
	for _, line := range strings.Split(string(chart), "\n") {
		if v, ok := strings.CutPrefix(line, "appVersion:"); ok {
			appVersion = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	for _, o := range render(t, []string{filepath.Join(bin, "kubectl"), "kustomize", filepath.Join(root, "config", "default")}) {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		image := fmt.Sprint(containers[0].(map[string]any)["image"])
		if image != "ghcr.io/shardfeed/shardfeed:"+appVersion {
			t.Errorf("kustomize deploys %s, want ghcr.io/shardfeed/shardfeed:%s (the chart's appVersion, never latest)", image, appVersion)
		}
		return
	}
	t.Fatal("kustomize rendered no Deployment")
}

// dirs returns the repository's root and its bin/ of tools.
func dirs(t *testing.T) (root, bin string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err = testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// TestIntegrationChartNetworkPoliciesAllowOnlyWhatTheManagerNeeds checks
// the optional NetworkPolicies as rendered (the local cluster's bridge CNI
// enforces none): the webhook port from the API server's CIDRs and from
// training pods only, metrics from the monitoring namespace only, egress to
// the API server, DNS and the listed stores only.
func TestIntegrationChartNetworkPoliciesAllowOnlyWhatTheManagerNeeds(t *testing.T) {
	root, bin := dirs(t)
	helm := []string{filepath.Join(bin, "helm"), "template", "shardfeed", filepath.Join(root, "charts", "shardfeed"), "--namespace", "default", "--kube-version", kubeVersion}
	if objs := render(t, helm); len(byKind(objs, "NetworkPolicy")) != 0 {
		t.Fatal("NetworkPolicies rendered by default: they are opt-in (a CNI must enforce them)")
	}
	// Enabled without the API server's addresses: refused, saying so.
	var stderr bytes.Buffer
	cmd := exec.Command(helm[0], append(helm[1:], "--set", "networkPolicy.enabled=true")...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "networkPolicy.apiServerCIDRs") {
		t.Errorf("enabled without apiServerCIDRs: %v %s", err, stderr.String())
	}
	objs := render(t, append(helm, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiServerCIDRs={10.0.0.1/32}",
		"--set", "networkPolicy.storeEgress[0].cidr=10.1.0.0/16", "--set", "networkPolicy.storeEgress[0].ports={9000}"))
	policies := byKind(objs, "NetworkPolicy")
	if len(policies) != 2 {
		t.Fatalf("%d NetworkPolicies, want an ingress and an egress one", len(policies))
	}
	var in, out networkingv1.NetworkPolicy
	for _, p := range policies {
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Object, &np); err != nil {
			t.Fatal(err)
		}
		if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "manager" {
			t.Errorf("%s selects %v, want the manager's pods", np.Name, np.Spec.PodSelector)
		}
		if strings.HasSuffix(np.Name, "-ingress") {
			in = np
		} else {
			out = np
		}
		if err := apiServer.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(p),
			client.FieldOwner("shardfeed-manifests-test"), client.ForceOwnership); err != nil {
			t.Errorf("NetworkPolicy %s was rejected: %v", p.GetName(), err)
		}
	}
	// Ingress: port → who.
	got := map[int32][]string{}
	for _, r := range in.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("an ingress rule from anywhere: %+v", r)
		}
		for _, p := range r.Ports {
			for _, f := range r.From {
				got[p.Port.IntVal] = append(got[p.Port.IntVal], peer(f))
			}
		}
	}
	managerPods := fmt.Sprint(map[string]string{"app.kubernetes.io/name": "shardfeed", "app.kubernetes.io/instance": "shardfeed", "app.kubernetes.io/component": "manager"})
	want := map[int32][]string{
		9443: {"cidr 10.0.0.1/32", "pods with shardfeed.io/dataset in namespaces {}", "pods " + managerPods + " in namespaces (own)"},
		8443: {"namespaces map[kubernetes.io/metadata.name:monitoring]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ingress %v, want %v", got, want)
	}
	// Egress: who → ports.
	egress := map[string][]int32{}
	for _, r := range out.Spec.Egress {
		if len(r.To) == 0 {
			t.Errorf("an egress rule to anywhere: %+v", r)
		}
		for _, to := range r.To {
			for _, p := range r.Ports {
				egress[peer(to)] = append(egress[peer(to)], p.Port.IntVal)
			}
		}
	}
	wantEgress := map[string][]int32{
		"cidr 10.0.0.1/32": {443, 6443},
		"pods map[k8s-app:kube-dns] in namespaces map[kubernetes.io/metadata.name:kube-system]": {53, 53},
		"cidr 10.1.0.0/16": {9000},
		"pods " + managerPods + " in namespaces (own)": {9443},
	}
	if !reflect.DeepEqual(egress, wantEgress) {
		t.Errorf("egress %v, want %v", egress, wantEgress)
	}
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// peer describes a NetworkPolicy peer.
func peer(p networkingv1.NetworkPolicyPeer) string {
	switch {
	case p.IPBlock != nil:
		return "cidr " + p.IPBlock.CIDR
	case p.PodSelector != nil && len(p.PodSelector.MatchExpressions) > 0:
		e := p.PodSelector.MatchExpressions[0]
		return fmt.Sprintf("pods with %s in namespaces %v", e.Key, selectorText(p.NamespaceSelector))
	case p.PodSelector != nil:
		return fmt.Sprintf("pods %v in namespaces %v", p.PodSelector.MatchLabels, selectorText(p.NamespaceSelector))
	case p.NamespaceSelector != nil:
		return fmt.Sprintf("namespaces %v", selectorText(p.NamespaceSelector))
	}
	return "anywhere"
}

func selectorText(s *metav1.LabelSelector) string {
	if s == nil {
		return "(own)"
	}
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return "{}"
	}
	return fmt.Sprint(s.MatchLabels)
}

// One image tag scheme everywhere (the first-hour issue): the chart's
// appVersion is the tag of the release image, the kustomize overlay
// deploys the same, and every reference to the release image in the docs,
// the chart, the manifests and the API's messages uses it.
func TestIntegrationOneImageTagSchemeEverywhere(t *testing.T) {
	root, _ := dirs(t)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := sigyaml.Unmarshal([]byte(read("charts/shardfeed/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	// One version of the source everywhere: VERSION (make dist's base),
	// the chart's and the Python package's.
	var chartVersion struct {
		Version string `json:"version"`
	}
	_ = sigyaml.Unmarshal([]byte(read("charts/shardfeed/Chart.yaml")), &chartVersion)
	base := strings.TrimSpace(read("VERSION"))
	py := regexp.MustCompile(`_BASE_VERSION = "([^"]+)"`).FindStringSubmatch(read("clients/python/src/shardfeed/__init__.py"))
	if chart.AppVersion != base || chartVersion.Version != base || len(py) != 2 || py[1] != base {
		t.Errorf("VERSION is %s, the chart's version %s and appVersion %s, the Python package's %v: make them one", base, chartVersion.Version, chart.AppVersion, py)
	}
	var kust struct {
		Images []struct{ Name, NewName, NewTag string } `json:"images"`
	}
	if err := sigyaml.Unmarshal([]byte(read("config/manager/kustomization.yaml")), &kust); err != nil {
		t.Fatal(err)
	}
	if len(kust.Images) != 1 || kust.Images[0].NewName != version.Repository || kust.Images[0].NewTag != chart.AppVersion {
		t.Errorf("config/manager/kustomization.yaml deploys %+v, want %s:%s (the chart's appVersion)", kust.Images, version.Repository, chart.AppVersion)
	}
	if !strings.Contains(read("charts/shardfeed/values.yaml"), "repository: "+version.Repository) {
		t.Errorf("the chart's image.repository is not %s", version.Repository)
	}
	ref := regexp.MustCompile(regexp.QuoteMeta(version.Repository) + `:([^\s"'` + "`" + `,)]+)`)
	var files []string
	for _, dir := range []string{"docs", "charts", "config", "api", "README.md"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".txt")) {
				files = append(files, p)
			}
			return nil
		})
	}
	found := 0
	for _, p := range files {
		b, _ := os.ReadFile(p)
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			found++
			if m[1] != chart.AppVersion && !strings.HasPrefix(m[1], "<") {
				t.Errorf("%s names %s: the release image's tag is the chart's appVersion, %s", p, m[0], chart.AppVersion)
			}
		}
	}
	if found == 0 {
		t.Fatal("no reference to the release image found: is the pattern broken?")
	}
}

// ruleSet is RBAC rules as a sorted list of their JSON: their order says
// nothing (the chart lists the job kinds' from internal/jobkind's rows).
func ruleSet(rules any) []string {
	list, _ := rules.([]any)
	out := make([]string, 0, len(list))
	for _, r := range list {
		b, _ := json.Marshal(r)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// The chart refuses the job kinds the manager would refuse to start with
// (its schema, and a kind declared twice), saying which: a platform finds
// out at helm install, not from a crash-looping manager.
func TestIntegrationChartRefusesJobKindsTheManagerWould(t *testing.T) {
	root, bin := dirs(t)
	kind := func(group, kind, resource, template, label string) string {
		return fmt.Sprintf("{group: %q, version: v1, kind: %q, resource: %q, podTemplates: [%q], replicas: [spec.n], rank: {label: %q}}",
			group, kind, resource, template, label)
	}
	tests := []struct {
		name, kinds, want string
	}{
		{"a built-in kind's group", kind("jobset.x-k8s.io", "A", "as", "spec.template", "i"), "/jobKinds/0/group"},
		{"a CEL reserved word", kind("a.example.com", "A", "as", "spec.in.template", "i"), "/jobKinds/0/podTemplates/0"},
		{"a field holding __", kind("a.example.com", "A", "as", "spec.a__b", "i"), "/jobKinds/0/podTemplates/0"},
		{"a bare []", kind("a.example.com", "A", "as", "spec.[].template", "i"), "/jobKinds/0/podTemplates/0"},
		{"a field of 64 characters", kind("a.example.com", "A", "as", "spec."+strings.Repeat("x", 64), "i"), "/jobKinds/0/podTemplates/0"},
		{"17 fields", kind("a.example.com", "A", "as", strings.TrimSuffix(strings.Repeat("a.", 17), "."), "i"), "/jobKinds/0/podTemplates/0"},
		{"a rank label that is no label", kind("a.example.com", "A", "as", "spec.template", "a b"), "/jobKinds/0/rank/label"},
		{"a group too long", kind(strings.Repeat("a", 60)+"."+strings.Repeat("b", 60)+"."+strings.Repeat("c", 50), "A", "as", "spec.template", "i"), "/jobKinds/0/group"},
		{"one resource twice", kind("a.example.com", "A", "runs", "spec.template", "i") + ", " + kind("a.example.com", "B", "runs", "spec.template", "i"), "declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := filepath.Join(t.TempDir(), "values.yaml")
			doc := "jobKinds: [" + tt.kinds + "]\n"
			if err := os.WriteFile(values, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(bin, "helm"), "template", "sf", filepath.Join(root, "charts", "shardfeed"), "--kube-version", kubeVersion, "-f", values)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("helm template: %v %s, want a refusal naming %s", err, stderr.String(), tt.want)
			}
			// The manager refuses the same declaration.
			var declared struct {
				JobKinds json.RawMessage `json:"jobKinds"`
			}
			if err := sigyaml.Unmarshal([]byte(doc), &declared); err != nil {
				t.Fatal(err)
			}
			kinds, err := jobkind.Parse(declared.JobKinds)
			if err == nil {
				_, err = jobkind.Builtin().With(kinds...)
			}
			if err == nil {
				t.Error("the manager takes what the chart refuses")
			}
		})
	}
}
