package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// APIServer is a real etcd and kube-apiserver with the shardfeed CRDs
// installed, and a client for them.
type APIServer struct {
	// Config reaches the API server with admin rights.
	Config *rest.Config
	// Client is a direct (uncached) client with the core and shardfeed types.
	Client client.Client
	// Scheme holds the core and shardfeed types.
	Scheme *runtime.Scheme

	env *envtest.Environment
}

// StartAPIServer starts etcd and kube-apiserver from bin/ and installs the
// CRDs of config/crd/bases.
func StartAPIServer() (*APIServer, error) {
	return StartAPIServerWithWebhooks(envtest.WebhookInstallOptions{})
}

// Webhooks returns where the test process must serve the webhooks
// installed with StartAPIServerWithWebhooks: host, port and the directory
// of the serving certificate envtest made.
func (a *APIServer) Webhooks() (host string, port int, certDir string) {
	o := a.env.WebhookInstallOptions
	return o.LocalServingHost, o.LocalServingPort, o.LocalServingCertDir
}

// InstallMutatingWebhook creates cfg (as a chart renders it) with each
// webhook's client config pointed at the test process, where the webhooks
// of StartAPIServerWithWebhooks are served, by its service path; the
// configuration is deleted when the test ends. The API server takes it up
// within moments, not at once.
func (a *APIServer) InstallMutatingWebhook(t testing.TB, cfg *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	o := a.env.WebhookInstallOptions
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		if cc.Service == nil || cc.Service.Path == nil {
			t.Fatalf("webhook %s has no service path", cfg.Webhooks[i].Name)
		}
		url := fmt.Sprintf("https://%s%s", net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort)), *cc.Service.Path)
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: o.LocalServingCAData}
	}
	ctx := context.Background()
	if err := a.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Client.Delete(ctx, cfg); err != nil {
			t.Errorf("deleting webhook configuration %s: %v", cfg.Name, err)
		}
	})
}

// StartAPIServerWithWebhooks is StartAPIServer with webhook configurations
// that point at the test process (envtest rewrites their client configs).
func StartAPIServerWithWebhooks(webhooks envtest.WebhookInstallOptions) (*APIServer, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := binary(name); err != nil {
			return nil, err
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		WebhookInstallOptions: webhooks,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", dir, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client for the test API server: %w", err)
	}
	return &APIServer{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// RawGet reads path from the API server with admin rights (e.g.
// /metrics); the caller closes the body.
func (a *APIServer) RawGet(ctx context.Context, path string) (io.ReadCloser, error) {
	cs, err := kubernetes.NewForConfig(a.Config)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().RESTClient().Get().AbsPath(path).Stream(ctx)
}

// Stop stops the API server and etcd and removes their data.
func (a *APIServer) Stop() error {
	return a.env.Stop()
}

// Namespace creates a namespace for one test and deletes it when the test
// ends.
func (a *APIServer) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := a.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a test namespace: %v", err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller, so the namespace only
		// reaches Terminating; that is enough to keep tests apart.
		_ = a.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

// Kubeconfig writes a kubeconfig file with the API server's admin
// credentials, for processes the test starts.
func (a *APIServer) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := a.writeKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	return path
}
