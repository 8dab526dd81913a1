//go:build integration

package manifests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fourth security review's finding 1: training namespaces had to
// allow any hostPath, so a pod there could take the agent's place or
// write its entries. Training pods need none now; where a namespace of
// them allows hostPath anyway, the chart's ValidatingAdmissionPolicy pins
// it: no pod there mounts the agent's cache directory, the kubelet's
// directory (the agent's key), or a directory above them. Applied to a
// real API server, which runs the policy.
func TestIntegrationChartPinsHostPathInTheNodeCacheNamespaces(t *testing.T) {
	root, bin := dirs(t)
	ctx := context.Background()
	training, other := apiServer.Namespace(t), apiServer.Namespace(t)
	objs := render(t, []string{filepath.Join(bin, "helm"), "template", "shardfeed", filepath.Join(root, "charts", "shardfeed"),
		"--namespace", "shardfeed-system", "--kube-version", kubeVersion, "--show-only", "templates/node-agent-policy.yaml",
		"--set", "nodeCache.enabled=true", "--set", "nodeCache.namespaces={" + training + "}", "--set", "nodeCache.hostPath=/var/cache/shardfeed-agent",
		"--set", "nodeCache.admissionPolicy.allowedHostPaths={/mnt/nvme0,/var/cache}"})
	if len(objs) != 2 {
		t.Fatalf("the chart renders %d objects for the policy, want the policy and its binding", len(objs))
	}
	for _, obj := range objs {
		obj.SetName(obj.GetName() + "-" + training)
		if obj.GetKind() == "ValidatingAdmissionPolicyBinding" {
			if err := unstructured.SetNestedField(obj.Object, obj.GetName(), "spec", "policyName"); err != nil {
				t.Fatal(err)
			}
		}
		if err := apiServer.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("%s: %v", obj.GetKind(), err)
		}
		t.Cleanup(func() { _ = apiServer.Client.Delete(ctx, obj) })
	}
	pod := func(ns, path string, edit ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if path != "" {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}}
		}
		for _, e := range edit {
			e(p)
		}
		return p
	}
	withCaps := func(caps ...corev1.Capability) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}}}
		}
	}
	// The policy is enforced once the API server has loaded it.
	err := waitFor(20*time.Second, func() bool {
		return apiServer.Client.Create(ctx, pod(training, "/var/cache/shardfeed-agent")) != nil
	})
	if err != nil {
		t.Fatal("the policy was never enforced: a pod mounting the agent's cache directory was admitted for 20 s")
	}
	for _, tt := range []struct {
		name, ns, path string
		want           string // "": admitted
		edit           func(*corev1.Pod)
	}{
		{"the agent's cache directory", training, "/var/cache/shardfeed-agent", "reaches /var/cache/shardfeed-agent/", nil},
		{"an entry in it", training, "/var/cache/shardfeed-agent/shards/ab", "reaches /var/cache/shardfeed-agent/", nil},
		{"it with a trailing slash", training, "/var/cache/shardfeed-agent/", "reaches /var/cache/shardfeed-agent/", nil},
		{"a directory above it", training, "/var/cache", "reaches /var/cache/shardfeed-agent/", nil},
		{"the root", training, "/", "reaches /var/cache/shardfeed-agent/", nil},
		{"the kubelet's pods (the agent's key)", training, "/var/lib/kubelet/pods", "reaches /var/lib/kubelet/", nil},
		{"a path written with repeated slashes", training, "//var//cache/shardfeed-agent", "not written plainly", nil},
		{"a path written with a . element", training, "/var/./cache/shardfeed-agent", "not written plainly", nil},
		// The red team's: the node's root again through /proc, and paths
		// relative to whatever the runtime takes.
		{"the node's root through /proc/1/root", training, "/proc/1/root/var/cache/shardfeed-agent", "reaches /proc/", nil},
		{"the kubelet's through /proc/self/root", training, "/proc/self/root/var/lib/kubelet", "reaches /proc/", nil},
		{"/proc", training, "/proc", "reaches /proc/", nil},
		{"a relative path", training, "var/lib/kubelet", "not written plainly", nil},
		{".", training, ".", "not written plainly", nil},
		{"a sibling with the same prefix", training, "/var/cache/shardfeed-agent-other", "", nil},
		{"a node's local disk, allowed", training, "/mnt/nvme0/datasets", "", nil},
		// The second round's: the policy is an allowlist, and holds the
		// pods to the baseline level's rules on the node.
		{"a path no one allowed", training, "/var/log", "not under nodeCache.admissionPolicy.allowedHostPaths", nil},
		{"the container runtime's socket", training, "/run/containerd/containerd.sock", "not under", nil},
		{"a sibling of an allowed path", training, "/mnt/nvme01", "not under", nil},
		{"the node's process namespace", training, "", "process, IPC or network", func(p *corev1.Pod) { p.Spec.HostPID = true }},
		{"the node's network", training, "", "process, IPC or network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{"a privileged container", training, "", "privileged container", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}},
		{"an init container adding SYS_ADMIN", training, "", "not SYS_ADMIN", withCaps("NET_BIND_SERVICE", "SYS_ADMIN")},
		{"an init container adding SYS_PTRACE", training, "", "not SYS_PTRACE", withCaps("SYS_PTRACE")},
		{"a baseline capability", training, "", "", withCaps("NET_BIND_SERVICE")},
		{"a privileged pod of a namespace the node cache does not serve", other, "", "", func(p *corev1.Pod) { p.Spec.HostPID = true }},
		{"no hostPath", training, "", "", nil},
		{"a namespace the node cache does not serve", other, "/var/cache/shardfeed-agent", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var edits []func(*corev1.Pod)
			if tt.edit != nil {
				edits = append(edits, tt.edit)
			}
			err := apiServer.Client.Create(ctx, pod(tt.ns, tt.path, edits...))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatal("admitted")
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("refused with %v; want %q", err, tt.want)
			}
		})
	}
}

func waitFor(limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
