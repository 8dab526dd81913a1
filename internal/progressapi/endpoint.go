// Package progressapi is the operator's HTTPS endpoint of the progress
// API, a security boundary: the sidecars register, commit and report
// skipped shards through it, each only for its own pod's job.
package progressapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/budget"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/planner"
)

// Endpoint is the operator's side of the progress API
// (internal/progress.Remote is the sidecar's): a sidecar registers, commits
// and reports skipped shards with its pod's projected ServiceAccount token
// (audience progress.Audience). The token names its pod (TokenReview); the
// pod's sidecar container, as the webhook wrote it at admission (a pod's
// containers never change after), names the dataset, job, attempt and
// generation. The request body carries only what the sidecar computed, so
// a pod moves its own job's progress and nothing else, whatever its
// ServiceAccount, and pods need no access to the API server at all.
type Endpoint struct {
	// Reviews authenticates the tokens.
	Reviews authenticationv1client.TokenReviewInterface
	// Pods reads the token's pod (directly: it may be seconds old).
	Pods client.Reader
	// ConfigMaps reads and writes the jobs' states, compare-and-swap on the
	// resourceVersion: several replicas serve the endpoint.
	ConfigMaps corev1client.ConfigMapsGetter
	Log        logr.Logger
	// ReadsFlush is how long the sidecars' reads reports of a job are
	// summed before they are written into its state (default
	// DefaultReadsFlush).
	ReadsFlush time.Duration

	// identities caches who a token is for a minute (like the API
	// server's own token cache): a commit is a TokenReview and a pod read
	// only once a minute.
	mu         sync.Mutex
	identities map[[sha256.Size]byte]*identity
	// refused remembers a refused token briefly, and reviews bounds the
	// TokenReviews each source may cause: a token the operator does not
	// know costs a request to the API server, and anything that reaches
	// the endpoint can send one.
	refused     map[[sha256.Size]byte]refusal
	reviews     *budget.PerSource
	reviewsOnce sync.Once

	// pending are the reads reports not yet written (reads.go).
	readsMu sync.Mutex
	pending map[readsKey]*pendingReads
}

// refusal is a token's refusal, until it expires.
type refusal struct {
	err     error
	expires time.Time
}

// Bounds on the TokenReviews of unknown tokens: a refusal is remembered
// for refusedTTL, and a source (an address) causes at most reviewsPerSecond
// reviews, reviewBurst at once; the tables hold at most maxSources and
// maxIdentities entries.
const (
	refusedTTL       = 10 * time.Second
	reviewsPerSecond = 20
	reviewBurst      = 40
	maxSources       = 10000
)

// identityTTL bounds how long a token's identity is trusted without a new
// TokenReview (a deleted pod's token stops working within it).
const identityTTL = time.Minute

// maxIdentities bounds the cache (one entry per live token).
const maxIdentities = 100000

type identity struct {
	namespace string
	pod       string
	contract  sidecarconfig.Config
	expires   time.Time
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;update

// Register adds the endpoint's handlers to mux (the webhook server's, so
// that the endpoint has its certificate and its Service).
func (e *Endpoint) Register(mux interface {
	Register(path string, h http.Handler)
}) {
	mux.Register(progress.PathRegister, e.handler(http.MethodPost, e.register))
	mux.Register(progress.PathCommit, e.handler(http.MethodPost, e.commit))
	mux.Register(progress.PathSkip, e.handler(http.MethodPost, e.skip))
	mux.Register(progress.PathState, e.handler(http.MethodGet, e.state))
	mux.Register(progress.PathReads, e.handler(http.MethodPost, e.reads))
	// A sidecar of another version: say what this operator serves.
	mux.Register("/progress/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeEndpoint(w, http.StatusNotFound, progress.ErrorResponse{Error: fmt.Sprintf(
			"no endpoint %s: this operator serves the progress API %s (%s*)", req.URL.Path, progress.APIVersion, progress.APIPrefix)})
	}))
}

// endpointError is a refusal with its status.
type endpointError struct {
	status int
	msg    string
}

func (e *endpointError) Error() string { return e.msg }

func refuse(status int, format string, a ...any) error {
	return &endpointError{status: status, msg: fmt.Sprintf(format, a...)}
}

type endpointFunc func(ctx context.Context, who *identity, req *http.Request) (*configmaps.State, error)

func (e *Endpoint) handler(method string, fn endpointFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != method {
			writeEndpoint(w, http.StatusMethodNotAllowed, progress.ErrorResponse{Error: "use " + method})
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
		defer cancel()
		who, err := e.authenticate(ctx, req)
		var st *configmaps.State
		if err == nil {
			st, err = fn(ctx, who, req)
		}
		if err == nil {
			writeEndpoint(w, http.StatusOK, st)
			return
		}
		status := http.StatusInternalServerError
		var ee *endpointError
		switch {
		case errors.As(err, &ee):
			status = ee.status
		case errors.Is(err, progress.ErrRefused):
			status = http.StatusConflict
		case errors.Is(err, progress.ErrNoState):
			status = http.StatusConflict
			err = fmt.Errorf("%w: the operator creates a job's state when it admits the job's first pod; this pod was admitted without it (was the webhook off?) or its dataset was deleted", err)
		case transientAPIError(err):
			status = http.StatusServiceUnavailable
		}
		if status >= 500 {
			e.Log.Error(err, "Progress request failed", "path", req.URL.Path)
		}
		writeEndpoint(w, status, progress.ErrorResponse{Error: err.Error()})
	})
}

func transientAPIError(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)
}

func writeEndpoint(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authenticate resolves the request's token to its pod's sidecar contract.
func (e *Endpoint) authenticate(ctx context.Context, req *http.Request) (*identity, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, refuse(http.StatusUnauthorized, "no bearer token: the sidecar sends its projected ServiceAccount token (audience %q)", progress.Audience)
	}
	key := sha256.Sum256([]byte(token))
	if who := e.cached(key); who != nil {
		return who, nil
	}
	if err := e.refusedBefore(key); err != nil {
		return nil, err
	}
	if !e.mayReview(req.RemoteAddr) {
		return nil, refuse(http.StatusTooManyRequests, "too many requests with tokens the operator has not seen from %s: retry later", budget.Source(req.RemoteAddr))
	}
	who, err := e.review(ctx, token)
	var ee *endpointError
	if errors.As(err, &ee) && (ee.status == http.StatusUnauthorized || ee.status == http.StatusForbidden) {
		e.rememberRefusal(key, err)
	}
	if err != nil {
		return nil, err
	}
	e.remember(key, who)
	return who, nil
}

// review resolves a token the operator has not seen (TokenReview, then its
// pod).
func (e *Endpoint) review(ctx context.Context, token string) (*identity, error) {
	review, err := e.Reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: token, Audiences: []string{progress.Audience}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	if !review.Status.Authenticated {
		return nil, refuse(http.StatusUnauthorized, "the token is not a valid ServiceAccount token for audience %q", progress.Audience)
	}
	user := review.Status.User
	namespace, ok := serviceAccountNamespace(user.Username)
	podName, podUID := first(user.Extra["authentication.kubernetes.io/pod-name"]), first(user.Extra["authentication.kubernetes.io/pod-uid"])
	if !ok || podName == "" || podUID == "" {
		return nil, refuse(http.StatusForbidden, "the token of %q is not bound to a pod: the sidecar sends the projected token the webhook mounts", user.Username)
	}
	var pod corev1.Pod
	if err := e.Pods.Get(ctx, client.ObjectKey{Namespace: namespace, Name: podName}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refuse(http.StatusUnauthorized, "pod %s/%s of the token no longer exists", namespace, podName)
		}
		return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, podName, err)
	}
	if pod.UID != types.UID(podUID) {
		return nil, refuse(http.StatusUnauthorized, "pod %s/%s of the token was replaced by another of the same name", namespace, podName)
	}
	who := &identity{namespace: namespace, pod: podName, expires: time.Now().Add(identityTTL)}
	if who.contract, err = inject.SidecarContract(&pod); err != nil {
		return nil, refuse(http.StatusForbidden, "pod %s/%s: %v", namespace, podName, err)
	}
	return who, nil
}

// refusedBefore returns a token's refusal if it is still remembered.
func (e *Endpoint) refusedBefore(key [sha256.Size]byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.refused[key]
	if !ok || time.Now().After(r.expires) {
		return nil
	}
	return r.err
}

// rememberRefusal keeps a refusal for refusedTTL; a full table first drops
// the expired, and stays full rather than grow.
func (e *Endpoint) rememberRefusal(key [sha256.Size]byte, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refused == nil {
		e.refused = map[[sha256.Size]byte]refusal{}
	}
	now := time.Now()
	if len(e.refused) >= maxIdentities {
		for k, r := range e.refused {
			if now.After(r.expires) {
				delete(e.refused, k)
			}
		}
		if len(e.refused) >= maxIdentities {
			return
		}
	}
	e.refused[key] = refusal{err: err, expires: now.Add(refusedTTL)}
}

// mayReview takes one review from the source's budget.
func (e *Endpoint) mayReview(remoteAddr string) bool {
	e.reviewsOnce.Do(func() { e.reviews = budget.New(reviewsPerSecond, reviewBurst, maxSources) })
	return e.reviews.Allow(remoteAddr)
}

func (e *Endpoint) cached(key [sha256.Size]byte) *identity {
	e.mu.Lock()
	defer e.mu.Unlock()
	who := e.identities[key]
	if who == nil || time.Now().After(who.expires) {
		return nil
	}
	return who
}

// remember caches who; a full cache first drops the expired entries, and
// stays full (every request is then reviewed) rather than grow.
func (e *Endpoint) remember(key [sha256.Size]byte, who *identity) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.identities == nil {
		e.identities = map[[sha256.Size]byte]*identity{}
	}
	if len(e.identities) >= maxIdentities {
		now := time.Now()
		for k, v := range e.identities {
			if now.After(v.expires) {
				delete(e.identities, k)
			}
		}
		if len(e.identities) >= maxIdentities {
			return
		}
	}
	e.identities[key] = who
}

func serviceAccountNamespace(username string) (string, bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", false
	}
	ns, _, ok := strings.Cut(rest, ":")
	return ns, ok && ns != ""
}

func first(v authenticationv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// store is the job's state ConfigMap; it must exist (the webhook made it).
func (e *Endpoint) store(who *identity) *progress.ConfigMapStore {
	st := progress.NewConfigMapStore(e.ConfigMaps, who.namespace, who.contract.Dataset, who.contract.Job)
	st.MustExist = true
	st.Outage = 10 * time.Second // the sidecar retries: answer 503 rather than hold the request
	return st
}

func (e *Endpoint) job(who *identity, plan string, steps int64) progress.Job {
	c := who.contract
	return progress.Job{Dataset: c.Dataset, Job: c.Job, Attempt: c.Attempt, Generation: c.Generation, Steps: steps,
		Fingerprint: fingerprintSum(plan), SidecarImage: c.Image, Admitted: true}
}

func fingerprintSum(sum string) planner.Fingerprint { return planner.Fingerprint{Sum: sum} }

func (e *Endpoint) register(ctx context.Context, who *identity, req *http.Request) (*configmaps.State, error) {
	var r progress.RegisterRequest
	if err := progress.DecodeRequest(req.Body, &r); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v: send %s", err, `{"fingerprint": {...}, "steps": N}`)
	}
	if r.Fingerprint.Sum == "" || r.Steps < 1 || r.Pods < 0 || r.WorldSize < 0 || r.DataParallelSize < 0 {
		return nil, refuse(http.StatusBadRequest, "a registration names the plan's fingerprint and its steps per epoch (at least 1)")
	}
	j := e.job(who, r.Fingerprint.Sum, r.Steps)
	j.Fingerprint, j.Pods, j.WorldSize, j.DataParallel = r.Fingerprint, r.Pods, r.WorldSize, r.DataParallelSize
	if len(r.Phases) > 1000 {
		return nil, refuse(http.StatusBadRequest, "a registration names at most 1000 schedule phases, got %d", len(r.Phases))
	}
	for _, h := range r.Phases {
		if len(h) > 80 {
			return nil, refuse(http.StatusBadRequest, "a schedule phase's hash has at most 80 characters")
		}
	}
	if r.PhaseStarts != nil && len(r.PhaseStarts) != len(r.Phases) {
		return nil, refuse(http.StatusBadRequest, "a registration names a start step for each schedule phase, or none")
	}
	j.Phases, j.PhaseStarts = r.Phases, r.PhaseStarts
	st, err := progress.Register(ctx, e.store(who), j)
	if err == nil {
		e.Log.V(1).Info("Registered", "namespace", who.namespace, "pod", who.pod, "job", j.Job, "attempt", j.Attempt, "generation", j.Generation)
	}
	return st, err
}

func (e *Endpoint) commit(ctx context.Context, who *identity, req *http.Request) (*configmaps.State, error) {
	var r progress.CommitRequest
	if err := progress.DecodeRequest(req.Body, &r); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v: send %s", err, `{"plan": SUM, "steps": N, "epoch": E, "step": K}`)
	}
	if r.Plan == "" || r.Steps < 1 {
		return nil, refuse(http.StatusBadRequest, "a commit names the plan's fingerprint and its steps per epoch (at least 1)")
	}
	return progress.Apply(ctx, e.store(who), e.job(who, r.Plan, r.Steps), progress.Commit{Epoch: r.Epoch, Step: r.Step, Resumed: r.Resumed})
}

func (e *Endpoint) skip(ctx context.Context, who *identity, req *http.Request) (*configmaps.State, error) {
	var r progress.SkipRequest
	if err := progress.DecodeRequest(req.Body, &r); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	if r.Stream == "" || r.Shard == "" || r.Samples < 0 {
		return nil, refuse(http.StatusBadRequest, "a skipped shard names its stream and shard")
	}
	r.Attempt = who.contract.Attempt
	return progress.RecordAdmittedSkip(ctx, e.store(who), e.job(who, "", 0), r)
}

func (e *Endpoint) state(ctx context.Context, who *identity, _ *http.Request) (*configmaps.State, error) {
	return e.store(who).Load(ctx)
}
