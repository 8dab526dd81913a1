//go:build integration

package manifests

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/testenv"
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
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	webhooks := []string{"Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
	helm := []string{filepath.Join(bin, "helm"), "template", "shardfeed", filepath.Join(root, "charts", "shardfeed"),
		"--namespace", "default"}
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
			name:  "helm chart",
			cmd:   helm,
			kinds: append([]string{"CustomResourceDefinition", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Deployment"}, webhooks...),
		},
		{
			// cert-manager's own kinds are only rendered: this API server
			// has no cert-manager.
			name: "helm chart with cert-manager and a ServiceMonitor",
			cmd: append(append([]string{}, helm...), "--set", "webhook.certManager.enabled=true",
				"--set", "metrics.serviceMonitor.enabled=true"),
			kinds: append([]string{"Certificate", "Issuer", "Deployment", "ServiceMonitor"}, webhooks...),
		},
	}
	// The manager's rules as controller-gen generates them from the
	// markers: one ClusterRole, and one Role in the operator's namespace.
	wantRules := map[string]any{}
	for _, obj := range render(t, []string{"cat", filepath.Join(root, "config", "rbac", "role.yaml")}) {
		wantRules[obj.GetKind()] = obj.Object["rules"]
	}
	if len(wantRules) != 2 || wantRules["ClusterRole"] == nil || wantRules["Role"] == nil {
		t.Fatalf("config/rbac/role.yaml holds %v, want a ClusterRole and a Role", wantRules)
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
				if want, ok := wantRules[obj.GetKind()]; ok && manager && !reflect.DeepEqual(obj.Object["rules"], want) {
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
