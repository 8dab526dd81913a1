package nodecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The keys of a pod-bound ServiceAccount token's extra information in a
// TokenReview's answer.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraNodeName = "authentication.kubernetes.io/node-name"
)

// TokenReviewer authenticates pods' tokens with the API server's
// TokenReview (the agent's one RBAC rule for it: create tokenreviews).
// Only a token bound to a pod and meant for the agent (audience Audience)
// is accepted. An answer is remembered for TTL, so a pod's stream of
// requests costs one review a minute, not one per shard.
type TokenReviewer struct {
	config *rest.Config
	client *http.Client
	TTL    time.Duration

	// limit bounds the reviews of tokens not seen: a pod sending random
	// tokens must not flood the API server (each is one TokenReview).
	limit *rate.Limiter

	mu   sync.Mutex
	seen map[[32]byte]reviewed
}

// ErrTooManyReviews is a token not reviewed because too many new tokens
// came at once; its sidecar reads the store.
var ErrTooManyReviews = errors.New("too many new tokens to review at once")

type reviewed struct {
	caller Caller
	err    error
	at     time.Time
}

// maxReviewed bounds the answers remembered.
const maxReviewed = 4096

// NewTokenReviewer reviews tokens with the API server of config.
func NewTokenReviewer(config *rest.Config) (*TokenReviewer, error) {
	client, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	client.Timeout = 10 * time.Second
	return &TokenReviewer{config: config, client: client, TTL: time.Minute, seen: map[[32]byte]reviewed{},
		limit: rate.NewLimiter(20, 50)}, nil
}

// Authenticate reviews the token.
func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (Caller, error) {
	id := sha256.Sum256([]byte(token))
	t.mu.Lock()
	if r, ok := t.seen[id]; ok && time.Since(r.at) < t.TTL {
		t.mu.Unlock()
		return r.caller, r.err
	}
	t.mu.Unlock()
	if !t.limit.Allow() {
		return Caller{}, ErrTooManyReviews
	}
	caller, err := t.review(ctx, token)
	if ctx.Err() != nil {
		return caller, err // the caller's going away says nothing of the token
	}
	t.mu.Lock()
	if len(t.seen) >= maxReviewed {
		for k, r := range t.seen {
			if time.Since(r.at) >= t.TTL || len(t.seen) >= maxReviewed {
				delete(t.seen, k)
			}
		}
	}
	t.seen[id] = reviewed{caller: caller, err: err, at: time.Now()}
	t.mu.Unlock()
	return caller, err
}

func (t *TokenReviewer) review(ctx context.Context, token string) (Caller, error) {
	body, err := json.Marshal(authnv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Spec:     authnv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}},
	})
	if err != nil {
		return Caller{}, err
	}
	host := strings.TrimSuffix(t.config.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, host+"/apis/authentication.k8s.io/v1/tokenreviews", bytes.NewReader(body))
	if err != nil {
		return Caller{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return Caller{}, fmt.Errorf("reviewing the token with the API server: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Caller{}, fmt.Errorf("reviewing the token with the API server: %w", err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Caller{}, fmt.Errorf("the API server answered the token review with %s (the agent's ServiceAccount needs create on tokenreviews)", resp.Status)
	}
	var review authnv1.TokenReview
	if err := json.Unmarshal(raw, &review); err != nil {
		return Caller{}, fmt.Errorf("the API server's token review answer: %w", err)
	}
	return callerOf(review.Status)
}

// callerOf reads a review's answer: a pod-bound ServiceAccount token for
// the agent's audience, or an error.
func callerOf(st authnv1.TokenReviewStatus) (Caller, error) {
	if !st.Authenticated {
		msg := st.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return Caller{}, errors.New(msg)
	}
	if !slices.Contains(st.Audiences, Audience) {
		return Caller{}, fmt.Errorf("the token is not for audience %q", Audience)
	}
	parts := strings.Split(st.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" || parts[2] == "" || parts[3] == "" {
		return Caller{}, fmt.Errorf("%q is not a ServiceAccount", st.User.Username)
	}
	pod := first(st.User.Extra[extraPodName])
	if pod == "" {
		return Caller{}, errors.New("the token is not bound to a pod: present the pod's projected ServiceAccount token")
	}
	return Caller{Namespace: parts[2], ServiceAccount: parts[3], Pod: pod, Node: first(st.User.Extra[extraNodeName])}, nil
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
