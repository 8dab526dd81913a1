//go:build integration

package scale_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/progress"
)

const operatorNS = "shardfeed-system"

// replica is one manager process, as the chart deploys it (leader
// election on: every replica serves the webhooks and the progress
// endpoint, the leader reconciles).
type replica struct {
	cmd     *exec.Cmd
	log     string
	webhook int // port
	metrics int // port
}

// startReplicas runs n manager replicas behind the proxy l, which spreads
// the API server's webhook calls and the sidecars' progress calls over
// them as a Service does.
func startReplicas(t *testing.T, n int, l net.Listener) []*replica {
	t.Helper()
	kubeconfig := apiServer.Kubeconfig(t)
	certDir := t.TempDir()
	var reps []*replica
	for i := range n {
		r := &replica{webhook: freePort(t), metrics: freePort(t), log: filepath.Join(t.TempDir(), fmt.Sprintf("manager-%d.log", i))}
		probes := freePort(t)
		r.cmd = exec.Command(managerBinary, "--namespace="+operatorNS, "--cert-mode=self", "--webhook-hosts=127.0.0.1",
			fmt.Sprintf("--webhook-port=%d", r.webhook), "--cert-dir="+filepath.Join(certDir, strconv.Itoa(i)),
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", r.metrics), "--metrics-secure=false", "--leader-elect",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes), "--sidecar-image=registry.local/shardfeed:scale",
			"--progress-url=https://127.0.0.1:443", "--ambient-credentials-namespaces=", "--allowed-endpoints=127.0.0.1")
		if dir := os.Getenv("SCALE_PPROF"); dir != "" {
			pprof := freePort(t)
			r.cmd.Args = append(r.cmd.Args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprof))
			// Once every replica serves.
			defer func() {
				go profile(fmt.Sprintf("http://127.0.0.1:%d", pprof), filepath.Join(dir, fmt.Sprintf("replica-%d", i)))
			}()
		}
		r.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		f, err := os.Create(r.log)
		if err != nil {
			t.Fatal(err)
		}
		r.cmd.Stdout, r.cmd.Stderr = f, f
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
			_ = f.Close()
			if t.Failed() {
				b, _ := os.ReadFile(r.log)
				t.Logf("manager %d log (last 4 KiB):\n%s", i, tail(b, 4096))
			}
		})
		waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", probes))
		reps = append(reps, r)
	}
	go proxy(l, reps)
	return reps
}

// profile saves the replica's CPU profile in 10-second pieces, prefix-N.pprof,
// until the replica stops (SCALE_PPROF=dir; `go tool pprof -top
// dir/replica-0-*` adds them up).
func profile(url, prefix string) {
	for k := 0; ; k++ {
		resp, err := http.Get(url + "/debug/pprof/profile?seconds=10") //nolint:noctx // ends with the replica
		if err != nil {
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			_ = os.WriteFile(fmt.Sprintf("%s-%03d.pprof", prefix, k), b, 0o644)
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(url) //nolint:gosec,noctx // a local probe
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not ready after 90 s: %v", url, err)
		}
	}
}

// listen is the proxy's listener, closed at the test's end.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// proxied counts the connections the proxy has forwarded: each one a TLS
// handshake in a replica.
var proxied atomic.Int64

// proxy forwards each connection l accepts to the next replica in turn,
// until l is closed.
func proxy(l net.Listener, reps []*replica) {
	func() {
		for i := 0; ; i++ {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				// Out of file descriptors, say: wait, as net/http's
				// server does, rather than stop serving.
				log.Printf("scale proxy: %v", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			proxied.Add(1)
			go func(c net.Conn, r *replica) {
				defer func() { _ = c.Close() }()
				up, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.webhook))
				if err != nil {
					return
				}
				defer func() { _ = up.Close() }()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}(c, reps[i%len(reps)])
		}
	}()
}

// installWebhooks creates the chart's pod webhook configuration, reaching
// the replicas through addr (this API server has no Service network),
// without a caBundle: the replicas fill it in.
func installWebhooks(t *testing.T, addr string) {
	t.Helper()
	url := "https://" + addr + controllers.PodWebhookPath
	notOperator := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{operatorNS}}}}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-pod-injection"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "pods.shardfeed.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inject.LabelDataset, Operator: metav1.LabelSelectorOpExists}}},
			NamespaceSelector: notOperator, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun), AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy), TimeoutSeconds: ptr.To[int32](10),
		}},
	}
	if err := apiServer.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// waitCABundle waits until a replica has published its CA.
func waitCABundle(t *testing.T) {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-pod-injection"}}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := apiServer.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), cfg); err == nil && len(cfg.Webhooks[0].ClientConfig.CABundle) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica published its CA into the pod webhook's configuration")
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// usage is what the replicas have used: CPU seconds, and per replica the
// peak resident memory (VmHWM).
type usage struct {
	cpu  float64
	peak []int64 // bytes
}

func (u usage) maxPeak() int64 {
	var m int64
	for _, p := range u.peak {
		m = max(m, p)
	}
	return m
}

func measure(t *testing.T, reps []*replica) usage {
	t.Helper()
	var u usage
	for _, r := range reps {
		pid := r.cmd.Process.Pid
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th, in clock ticks (100 per second on Linux).
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		ut, _ := strconv.ParseFloat(fields[11], 64)
		st, _ := strconv.ParseFloat(fields[12], 64)
		u.cpu += (ut + st) / 100
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				u.peak = append(u.peak, kb<<10)
			}
		}
		_ = f.Close()
	}
	return u
}

// metrics sums, over the replicas, the samples of the Prometheus counters
// named name whose labels contain every one of match.
func metrics(t *testing.T, reps []*replica, name string, match ...string) float64 {
	t.Helper()
	var sum float64
	for _, r := range reps {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", r.metrics)) //nolint:gosec,noctx // a local endpoint
		if err != nil {
			t.Fatal(err)
		}
		sum += sumSamples(resp.Body, name, match...)
		_ = resp.Body.Close()
	}
	return sum
}

// sumSamples reads a Prometheus text exposition.
func sumSamples(r io.Reader, name string, match ...string) float64 {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// apiServerMetric sums the API server's own samples of name matching match.
func apiServerMetric(t *testing.T, name string, match ...string) float64 {
	t.Helper()
	rc, err := apiServer.RawGet(context.Background(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	return sumSamples(rc, name, match...)
}

// loadGenerator replays the sidecars' progress calls: one registration per
// sidecar start and the commits of each job's rank 0, through the real
// client (progress.Remote) with each pod's own bound token.
type loadGenerator struct {
	addr     string // the replicas' proxy
	ca       string // file
	sidecars map[string]*sidecar
	mu       sync.Mutex
	errs     []error
}

// remote is a sidecar's client, with its token in a file of dir as the
// kubelet projects it.
func (g *loadGenerator) remote(dir, token string) (*progress.Remote, error) {
	f, err := os.CreateTemp(dir, "token-")
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(token); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return progress.NewRemote(progress.Remote{URL: "https://" + g.addr, CAFile: g.ca, TokenFile: f.Name(), Outage: 30 * time.Second})
}

func (g *loadGenerator) fail(err error) {
	g.mu.Lock()
	g.errs = append(g.errs, err)
	g.mu.Unlock()
}
