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

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/shardfeed/shardfeed/internal/budget"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// The keys of a pod-bound ServiceAccount token's extra information in a
// TokenReview's answer.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraNodeName = "authentication.kubernetes.io/node-name"
)

// TokenReviewer authenticates pods' tokens with the API server's
// TokenReview (the agent's one RBAC rule for it: create tokenreviews).
// Only a token bound to a pod and meant for the agent (audience
// nodewire.Audience) is accepted. An answer is remembered for TTL, so a
// pod's stream of requests costs one review a minute, not one per shard.
type TokenReviewer struct {
	config *rest.Config
	client *http.Client
	TTL    time.Duration

	// reviews bounds the reviews of tokens not seen: a pod sending random
	// tokens must not flood the API server (each is one TokenReview), nor
	// use up the reviews of the node's other pods.
	reviews *budget.PerSource

	mu   sync.Mutex
	seen map[[32]byte]reviewed
	// inFlight coalesces the reviews of one token: a sidecar asks for
	// many shards at once with the same token.
	inFlight singleflight.Group
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

// A peer's budget of new tokens: a pod shows one token at a time (the
// kubelet rotates it hourly), so a few a second are plenty; the node's
// pods together, 20 a second (50 at once).
const (
	peerRate  = 2
	peerBurst = 10
)

// maxPeers bounds the addresses whose budgets are remembered.
const maxPeers = 4096

// NewTokenReviewer reviews tokens with the API server of config.
func NewTokenReviewer(config *rest.Config) (*TokenReviewer, error) {
	client, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	client.Timeout = 10 * time.Second
	return &TokenReviewer{config: config, client: client, TTL: time.Minute, seen: map[[32]byte]reviewed{},
		reviews: budget.New(peerRate, peerBurst, maxPeers).WithTotal(20, 50)}, nil
}

// Authenticate reviews the token, which came from peer.
func (t *TokenReviewer) Authenticate(ctx context.Context, token, peer string) (Caller, error) {
	id := sha256.Sum256([]byte(token))
	t.mu.Lock()
	if r, ok := t.seen[id]; ok && time.Since(r.at) < t.TTL {
		t.mu.Unlock()
		return r.caller, r.err
	}
	t.mu.Unlock()
	type answer struct {
		caller Caller
		err    error
	}
	v, _, _ := t.inFlight.Do(string(id[:]), func() (any, error) {
		if !t.reviews.Allow(peer) {
			return answer{err: ErrTooManyReviews}, nil
		}
		// The review outlives one caller's going away: others may wait.
		caller, err := t.review(context.WithoutCancel(ctx), token)
		if errors.Is(err, context.Canceled) {
			return answer{caller, err}, nil
		}
		t.remember(id, caller, err)
		return answer{caller, err}, nil
	})
	a := v.(answer)
	return a.caller, a.err
}

// remember keeps a review's answer for TTL.
func (t *TokenReviewer) remember(id [32]byte, caller Caller, err error) {
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
}

func (t *TokenReviewer) review(ctx context.Context, token string) (Caller, error) {
	body, err := json.Marshal(authnv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Spec:     authnv1.TokenReviewSpec{Token: token, Audiences: []string{nodewire.Audience}},
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
	if !slices.Contains(st.Audiences, nodewire.Audience) {
		return Caller{}, fmt.Errorf("the token is not for audience %q", nodewire.Audience)
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
