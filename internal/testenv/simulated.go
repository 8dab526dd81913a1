package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The annotation and label of the nodes KWOK simulates, and the taint that
// keeps every pod but the simulation's off them.
const (
	KWOKNodeAnnotation = "kwok.x-k8s.io/node"
	KWOKNodeLabel      = "type"
	KWOKNodeValue      = "kwok"
)

// Simulated is the rest of a cluster's control plane beside an APIServer,
// with nodes that KWOK simulates: kube-controller-manager (Jobs,
// StatefulSets, garbage collection, namespaces, ServiceAccounts),
// kube-scheduler, and KWOK, which runs the pods bound to its nodes (their
// status, not their containers) and deletes them when asked (no kubelet
// waits out a grace period). The nodes keep no leases: nothing watches
// their heartbeats.
type Simulated struct {
	procs []*serverProcess
	dir   string
}

// StartSimulated starts them against a and registers nodes simulated
// nodes, each of 64 CPUs, 512 GiB and 256 pods.
func StartSimulated(ctx context.Context, a *APIServer, nodes int) (*Simulated, error) {
	dir, err := os.MkdirTemp("", "shardfeed-simulated-")
	if err != nil {
		return nil, err
	}
	s := &Simulated{dir: dir}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := a.writeKubeconfig(kubeconfig); err != nil {
		return nil, s.fail(err)
	}
	start := func(name string, args ...string) error {
		port, err := freePort()
		if err != nil {
			return err
		}
		bin, err := binary(name)
		if err != nil {
			return err
		}
		args = append(args, "--kubeconfig="+kubeconfig)
		ready := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
		if name == "kwok" {
			args = append(args, fmt.Sprintf("--server-address=127.0.0.1:%d", port))
		} else {
			// The component serves HTTPS: a plain request's 400 says it is up.
			args = append(args, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--leader-elect=false",
				"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
		}
		p, err := startProcess(ctx, name, exec.Command(bin, args...), 60*time.Second, ready)
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		return nil
	}
	if err := start("kube-controller-manager", "--controllers=job-controller,statefulset-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller",
		"--concurrent-job-syncs=10", "--concurrent-gc-syncs=20", "--kube-api-qps=200", "--kube-api-burst=400"); err != nil {
		return nil, s.fail(err)
	}
	if err := start("kube-scheduler", "--kube-api-qps=200", "--kube-api-burst=400"); err != nil {
		return nil, s.fail(err)
	}
	stages, err := binary("kwok-stages.yaml")
	if err != nil {
		return nil, s.fail(err)
	}
	if err := start("kwok", "--config="+stages, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KWOKNodeAnnotation+"=fake", "--node-lease-duration-seconds=0"); err != nil {
		return nil, s.fail(err)
	}
	if err := createNodes(ctx, a, nodes); err != nil {
		return nil, s.fail(err)
	}
	if err := waitNodesReady(ctx, a, nodes); err != nil {
		return nil, s.fail(err)
	}
	// KWOK syncs each node's pods once after it takes the node on (some
	// seconds for a thousand nodes): a canary pod run and deleted first
	// keeps that out of what the tests measure.
	if err := canary(ctx, a); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// canary runs a pod on a simulated node and deletes it.
func canary(ctx context.Context, a *APIServer) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kwok-canary", Namespace: metav1.NamespaceDefault}, Spec: corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "c", Image: "canary"}},
		NodeSelector: map[string]string{KWOKNodeLabel: KWOKNodeValue}, Tolerations: []corev1.Toleration{KWOKToleration()},
	}}
	if err := a.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("the simulated nodes' canary pod: %w", err)
	}
	deleted := false
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err := a.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		switch {
		case apierrors.IsNotFound(err) && deleted:
			return nil
		case err != nil:
			return fmt.Errorf("the simulated nodes' canary pod: %w", err)
		case pod.Status.Phase == corev1.PodRunning && !deleted:
			if err := a.Client.Delete(ctx, pod); err != nil {
				return fmt.Errorf("deleting the simulated nodes' canary pod: %w", err)
			}
			deleted = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("KWOK did not run and delete a canary pod within 3 minutes (phase %s, deleted %v)", pod.Status.Phase, deleted)
		}
	}
}

// waitNodesReady waits until KWOK reports every node Ready, without the
// not-ready taint.
func waitNodesReady(ctx context.Context, a *APIServer, n int) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var list corev1.NodeList
		if err := a.Client.List(ctx, &list, client.MatchingLabels{KWOKNodeLabel: KWOKNodeValue}); err != nil {
			return err
		}
		ready := 0
		for _, node := range list.Items {
			if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) &&
				slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
				}) {
				ready++
			}
		}
		if ready == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d simulated nodes ready and schedulable after 3 minutes", ready, n)
		}
		time.Sleep(time.Second)
	}
}

// createNodes registers the simulated nodes kwok-0, kwok-1, ….
func createNodes(ctx context.Context, a *APIServer, n int) error {
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kwok-%d", i),
				Annotations: map[string]string{KWOKNodeAnnotation: "fake"},
				Labels:      map[string]string{KWOKNodeLabel: KWOKNodeValue, corev1.LabelHostname: fmt.Sprintf("kwok-%d", i)}},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: KWOKNodeAnnotation, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Allocatable: nodeResources(), Capacity: nodeResources()},
		}
		if err := a.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering simulated node %s: %w", node.Name, err)
		}
		// The API server taints a new node not-ready until the node
		// lifecycle controller sees it ready; that controller, which also
		// evicts the pods of nodes whose heartbeats stop, is not run (the
		// simulated nodes never fail, and their heartbeats would be most
		// of the API server's load), so the taint is lifted here.
		if i := slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }); i >= 0 {
			node.Spec.Taints = slices.Delete(node.Spec.Taints, i, i+1)
			if err := a.Client.Update(ctx, node); err != nil {
				return fmt.Errorf("lifting simulated node %s's not-ready taint: %w", node.Name, err)
			}
		}
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("256")}
}

// KWOKToleration lets a pod onto the simulated nodes.
func KWOKToleration() corev1.Toleration {
	return corev1.Toleration{Key: KWOKNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// Stop stops the components and removes their files.
func (s *Simulated) Stop() error {
	for i := len(s.procs) - 1; i >= 0; i-- {
		_ = s.procs[i].stop()
	}
	return os.RemoveAll(s.dir)
}

func (s *Simulated) fail(err error) error {
	_ = s.Stop()
	return err
}

// writeKubeconfig writes a kubeconfig with the API server's admin
// credentials to path.
func (a *APIServer) writeKubeconfig(path string) error {
	c := a.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing a kubeconfig: %w", err)
	}
	return nil
}
