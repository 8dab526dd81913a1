package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// hostileNamespace is the node cache story's hostile tenant: one of the
// chart's nodeCache.namespaces, and one whose Pod Security level allows
// hostPath (privileged), the worst a platform may configure.
const hostileNamespace = "e2e-nodecache-hostile"

// HostileReport is what the hostile pod of the node cache story saw, and
// what the cluster told it.
type HostileReport struct {
	// HostPathRefused is the admission's refusal of a pod mounting the
	// agent's cache directory ("" if it was admitted).
	HostPathRefused string
	// FakeAgentRequests are the requests its own listener for the agent's
	// name was sent; Statuses the agent's answers to its requests for the
	// victim's shards (with keys that read nothing), Served those answered
	// with bytes and VictimBytes their bytes; RandomTokens the answers to
	// random tokens; Warm its warm requests' answers.
	FakeAgentRequests int64
	Statuses          map[int]int
	Served            int
	VictimBytes       int64
	RandomTokens      map[int]int
	Warm              struct{ Present, Queued, Dropped, Refused int }
	// Shards is how many of the victim's shards it asked for.
	Shards int
}

// hostileTenant runs the hostile pod beside e's job on the node: it tries
// to mount the agent's cache directory, listens as the agent, floods the
// agent, and warms garbage. It returns once the pod is done.
func (c *Cluster) hostileTenant(ctx context.Context, e *Env, agentCache string) (*HostileReport, error) {
	rep := &HostileReport{}
	if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostileNamespace}}); err == nil {
		if err := WaitFor(ctx, 3*time.Minute, "namespace "+hostileNamespace+" of an earlier run to go", func() (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: hostileNamespace}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			return rep, err
		}
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostileNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}); err != nil {
		return rep, err
	}
	// The way in of #58's design: a hostPath onto the agent's files.
	squat := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "squatter", Namespace: hostileNamespace}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "registry.local/shardfeed-trainer:e2e", ImagePullPolicy: corev1.PullNever}},
		Volumes:    []corev1.Volume{{Name: "agent", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: agentCache}}}}}}
	if err := c.Client.Create(ctx, squat); err != nil {
		rep.HostPathRefused = err.Error()
	}
	victim, err := victimRequests(e)
	if err != nil {
		return rep, err
	}
	rep.Shards = len(victim)
	raw, err := json.Marshal(victim)
	if err != nil {
		return rep, err
	}
	var svc corev1.Service
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "shardfeed-node-agent"}, &svc); err != nil {
		return rep, err
	}
	env := []corev1.EnvVar{{Name: "E2E_HOSTILE", Value: "1"},
		{Name: "E2E_AGENT_ADDR", Value: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(sidecarconfig.NodeAgentPort))},
		{Name: "E2E_AGENT_NAME", Value: "shardfeed-node-agent." + operatorNS + ".svc"},
		{Name: "E2E_AGENT_TOKEN", Value: "/var/run/hostile/token"},
		{Name: "E2E_VICTIM", Value: string(raw)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: hostileNamespace}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{Name: "hostile", Image: "registry.local/shardfeed-trainer:e2e", ImagePullPolicy: corev1.PullNever,
			Env: env, VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/hostile", ReadOnly: true}},
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
				AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		// Any pod may ask for a token of the agent's audience.
		Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: nodewire.Audience, ExpirationSeconds: ptr.To(int64(600)), Path: "token"}}}}}}},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}}
	if err := c.Client.Create(ctx, pod); err != nil {
		return rep, err
	}
	err = WaitFor(ctx, 5*time.Minute, "the hostile pod to finish", func() (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		if pod.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the hostile pod failed")
		}
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})
	logs, _ := c.Cmd(ctx, "kubectl", "logs", "-n", hostileNamespace, "hostile")
	if err != nil {
		return rep, fmt.Errorf("%w; its log:\n%s", err, logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if _, js, ok := strings.Cut(line, "HOSTILE "); ok {
			return rep, json.Unmarshal([]byte(js), rep)
		}
	}
	return rep, fmt.Errorf("the hostile pod printed no report:\n%s", logs)
}

// victimRequests are a request for each of e's token shards (MDS files),
// with the hash the victim's index names and keys that read nothing.
func victimRequests(e *Env) ([]nodewire.Request, error) {
	dir := filepath.Join(e.dir, "data", "tokens")
	files, err := filepath.Glob(filepath.Join(dir, "*.mds"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no MDS shards in %s (%d): %w", dir, len(files), err)
	}
	src := nodewire.Source{URI: "s3://" + e.Bucket + "/tokens/", Endpoint: e.MinIO.URL(), Insecure: true,
		Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("hostile"), "AWS_SECRET_ACCESS_KEY": []byte("not-the-victims-key")}}
	var out []nodewire.Request
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sum, err := checksum.Of("xxh64", b)
		if err != nil {
			return nil, err
		}
		out = append(out, nodewire.Request{Source: src, Part: nodewire.Part{Key: filepath.Base(f), Size: int64(len(b)), Hash: sum.String()}})
	}
	return out, nil
}
