// Package nodecache is the node cache's agent (#58): the opt-in DaemonSet
// `shardfeed agent`, which keeps verified shards in a directory of its
// node and serves them over TLS to the sidecars of its node, fetching from
// the store those it lacks (and, named in a warm request, those a pod
// reads next). What the two say to each other is sidecar/nodecache/nodewire;
// the sidecars' side is sidecar/nodecache/nodeclient.
//
// The agent trusts no pod. It fills its cache itself, with the credentials
// a sidecar hands it for that one request (never stored, never logged),
// and checks each shard against the index's hash. An entry is addressed by
// who may read it (the caller's namespace and a keyed hash of its
// credentials, or its ServiceAccount and role for a workload identity), the
// store it came from and the shard's hash, so a pod reads only what its own
// credentials could read, and a pod that lies about a shard's bytes or
// hash fills nothing another pod reads. The sidecar checks every byte
// again, and reads the store itself when the agent is gone, slow or wrong.
package nodecache

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// Caller is who a request comes from, as its token says.
type Caller struct {
	Namespace      string
	ServiceAccount string
	Pod            string
	// Node is the caller's node where its token names it ("" if not).
	Node string
}

// Authenticator says who a bearer token belongs to; peer is the address
// the request came from (a budget of reviews per pod).
type Authenticator interface {
	Authenticate(ctx context.Context, token, peer string) (Caller, error)
}

// Options configure an Agent.
type Options struct {
	// Dir is the node's cache directory, kept across restarts.
	Dir string
	// LimitBytes is the node's byte budget for cached shards (0: none).
	LimitBytes int64
	// Node is the agent's node: a caller whose token names another node
	// is refused.
	Node string
	Auth Authenticator
	// AllowedEndpoints are the store endpoints the agent reaches beside
	// the clouds' own (store.Endpoints.Listed's entries; "*" any name),
	// and AllowCloudEndpoints allows the clouds' own hosts, each for its
	// own cloud's credentials. Neither: the clouds' own.
	AllowedEndpoints    []string
	AllowCloudEndpoints bool
	// SharedSources are URI prefixes ("s3://public-data/", whole path
	// segments) whose entries every pod of the node may read, whatever its
	// namespace and credentials: data the platform team marks as readable
	// by all. Only shards a collision-resistant hash checks are shared.
	SharedSources []string
	// Retry bounds the agent's requests to a store (default: 30 s).
	Retry store.Retry
	// MaxInFlight bounds the requests served at once; more are answered
	// 503 at once, and their sidecars read the store (default 64).
	// MaxInFlightPerPod bounds one pod's (default 8): more are answered
	// 429, so that one pod cannot hold every slot.
	MaxInFlight, MaxInFlightPerPod int
	// WriteIdle drops an answer none of whose bytes the caller took for
	// that long, freeing its slot (default 15 s).
	WriteIdle time.Duration
	// MaxWanted bounds the entries warm requests keep before plain
	// recency (default 65536), MaxWantedPerPod one pod's share of them
	// (default 8192: its oldest are let go first).
	MaxWanted, MaxWantedPerPod int
	// Open opens a request's store (default stores.Open).
	Open func(context.Context, store.Source) (store.Store, error)
	Log  *slog.Logger
	// WantedFor is how long the shards of a warm request are kept before
	// plain recency (default 10 minutes; a pod names its next ones again
	// as it reads).
	WantedFor time.Duration
	// WarmFillers bound the warm fills at once (default 4; one pod's, half
	// of them), WarmQueue the fills waiting (default 1024: more are
	// dropped; one pod's, WarmQueuePerPod, default 256), and WarmMaxAge how
	// long one waits before it is dropped, its credentials with it
	// (default 1 minute).
	WarmFillers, WarmQueue, WarmQueuePerPod int
	WarmMaxAge                              time.Duration
}

// Stats are the agent's counters.
type Stats struct {
	Requests int64
	// Hits were served from the node's cache; Fills fetched for the
	// request first.
	Hits, Fills int64
	// Refused requests failed authentication or were not servable;
	// Failed could not be filled (the store refused or failed).
	Refused, Failed int64
	// Discarded are entries found changed on disk since they were
	// verified, and filled again.
	Discarded int64
	// HitBytes are the bytes served from the cache, which no pod fetched:
	// the egress saved. FilledBytes were served as they were filled.
	HitBytes, FilledBytes int64
	// WarmRequests are the warm requests taken; WarmFills the shards they
	// had fetched, WarmFailed those the store refused or failed, and
	// WarmDropped those not fetched (the queue full, waiting too long, or
	// no room beside the shards wanted). WarmHits are hits on a shard a
	// warm fill fetched, LeadSeconds the time they were on the node before
	// (the pre-warm lead time, summed).
	WarmRequests, WarmFills, WarmFailed, WarmDropped, WarmHits int64
	LeadSeconds                                                float64
	// Wanted are the entries kept before plain recency now.
	Wanted int
	// ByNamespace are the counters of each caller namespace.
	ByNamespace map[string]NamespaceStats
	Cache       cache.Stats
}

// NamespaceStats are one namespace's counters.
type NamespaceStats struct {
	Hits, Fills         int64
	HitBytes, FillBytes int64
}

// Agent serves a node's cached shards.
type Agent struct {
	opts  Options
	cache *cache.Cache
	key   []byte // keys the hash of a request's credentials
	slots chan struct{}
	// admitting bounds the requests being authenticated at once.
	admitting chan struct{}
	podMu     sync.Mutex
	podSlots  map[string]int
	// podBytes are the bytes of each pod's answers in flight: the cache
	// cannot evict an entry while it is served.
	podBytes map[string]int64
	// peerAdmitting counts each address's requests being authenticated.
	peerAdmitting map[string]int
	// endpoints is where the agent's requests may go, every store's and
	// every address's.
	endpoints *store.Endpoints
	// shared are the prefixes of Options.SharedSources.
	shared []sharedPrefix

	mu    sync.Mutex
	stats Stats

	// sumMu guards filled (the entries filled since the agent started)
	// and the sums of unhashed entries.
	sumMu  sync.Mutex
	filled map[string]bool

	// wantMu guards wanted (the entries warm requests named, until when
	// they are kept), queued (those waiting for a warm fill) and warmed
	// (when a warm fill fetched each, until it is first served).
	wantMu sync.Mutex
	wanted map[string]want
	// wantedBy is each pod's wanted entries, oldest first; swept is when
	// the expired entries were last dropped.
	wantedBy map[string]*podWants
	swept    time.Time
	queued   map[string]bool
	warmed   map[string]time.Time
	warmQ    *warmQueue
	lead     prometheus.Histogram
}

// warmJob is a shard a warm request named that the node lacks.
type warmJob struct {
	req   nodewire.Request
	shard cache.Shard
	at    time.Time
	pod   string
}

// The agent's cache holds every entry in one stream, by address.
const entries = "shards"

// NewAgent opens the cache directory, keeping the verified entries of an
// earlier run (each is checked again when first read).
func NewAgent(opts Options) (*Agent, error) {
	if opts.Auth == nil {
		return nil, errors.New("node agent: an authenticator is required")
	}
	if opts.Open == nil {
		opts.Open = stores.Open
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	opts.MaxInFlightPerPod = cmp.Or(opts.MaxInFlightPerPod, nodewire.PodRequests)
	opts.WriteIdle = cmp.Or(opts.WriteIdle, 15*time.Second)
	opts.MaxWanted = cmp.Or(opts.MaxWanted, 65536)
	opts.MaxWantedPerPod = cmp.Or(opts.MaxWantedPerPod, 8192)
	opts.WantedFor = cmp.Or(opts.WantedFor, 10*time.Minute)
	opts.WarmFillers = cmp.Or(opts.WarmFillers, 4)
	opts.WarmQueue = cmp.Or(opts.WarmQueue, 1024)
	opts.WarmQueuePerPod = cmp.Or(opts.WarmQueuePerPod, nodewire.MaxWarmShards)
	opts.WarmMaxAge = cmp.Or(opts.WarmMaxAge, time.Minute)
	if opts.Retry.MaxElapsed == 0 {
		opts.Retry = store.Retry{MaxElapsed: 30 * time.Second, RequestTimeout: 5 * time.Minute}
	}
	opts.Log = cmp.Or(opts.Log, slog.Default())
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("node agent: cache directory: %w", err)
	}
	key, err := loadKey(filepath.Join(opts.Dir, "agent.key"))
	if err != nil {
		return nil, err
	}
	a := &Agent{opts: opts, key: key, slots: make(chan struct{}, opts.MaxInFlight), admitting: make(chan struct{}, 2*opts.MaxInFlight),
		podSlots: map[string]int{}, podBytes: map[string]int64{}, peerAdmitting: map[string]int{}, wanted: map[string]want{}, wantedBy: map[string]*podWants{}, queued: map[string]bool{}, warmed: map[string]time.Time{},
		warmQ: newWarmQueue(opts.WarmQueue, opts.WarmQueuePerPod, max(1, opts.WarmFillers/2)),
		lead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shardfeed_node_cache_prewarm_lead_seconds",
			Help:    "How long a shard a warm request had fetched was on the node before a pod first asked for it: the pre-warm lead time.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)})}
	// A fill finds room at once or not at all (507: its sidecar reads the
	// store): waiting for held entries would let one pod's slow reads
	// stall every other pod's fills, each holding a slot.
	c, err := cache.New(cache.Options{Dir: opts.Dir, LimitBytes: opts.LimitBytes, Parallel: 16, CorruptAttempts: 2, Keep: a.keep,
		FullTimeout: time.Millisecond},
		map[string]store.Store{entries: requestStore{}})
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	a.cache = c
	a.endpoints = stores.Policy(opts.AllowedEndpoints, opts.AllowCloudEndpoints || len(opts.AllowedEndpoints) == 0)
	for _, s := range opts.SharedSources {
		if s == "" {
			continue
		}
		p, err := parseShared(s)
		if err != nil {
			return nil, fmt.Errorf("node agent: %w", err)
		}
		a.shared = append(a.shared, p)
	}
	a.stats.ByNamespace = map[string]NamespaceStats{}
	a.filled = map[string]bool{}
	a.dropStaleSums()
	return a, nil
}

// loadKey reads the agent's key, or makes one: it keys the hashes of
// credentials in entries' addresses, so they cannot be guessed from a
// credential, and survives restarts so the entries do.
func loadKey(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) == 32 {
		return b, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, fmt.Errorf("node agent: writing its key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("node agent: writing its key: %w", err)
	}
	return key, nil
}

// Stats returns the counters.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.stats
	st.ByNamespace = make(map[string]NamespaceStats, len(a.stats.ByNamespace))
	for k, v := range a.stats.ByNamespace {
		st.ByNamespace[k] = v
	}
	st.Cache = a.cache.Stats()
	a.wantMu.Lock()
	now := time.Now()
	for _, w := range a.wanted {
		if now.Before(w.until) {
			st.Wanted++
		}
	}
	a.wantMu.Unlock()
	return st
}

func (a *Agent) count(f func(*Stats)) {
	a.mu.Lock()
	f(&a.stats)
	a.mu.Unlock()
}

// httpError is an answer with a status and a message for the caller.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers a shard request or a warm request.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != nodewire.ShardPath && r.URL.Path != nodewire.WarmPath {
		http.Error(w, "not found: the node agent answers POST "+nodewire.ShardPath+" and "+nodewire.WarmPath, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed: POST a request to "+r.URL.Path, http.StatusMethodNotAllowed)
		return
	}
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	if !a.admitPeer(peer) {
		http.Error(w, "too many requests from this address being authenticated at once: read the store", http.StatusTooManyRequests)
		return
	}
	select {
	case a.admitting <- struct{}{}:
	default:
		a.unadmitPeer(peer)
		http.Error(w, "the node agent is busy: read the store", http.StatusServiceUnavailable)
		return
	}
	admitted := false
	defer func() {
		if !admitted {
			<-a.admitting
			a.unadmitPeer(peer)
		}
	}()
	// admitted lets go of the admission slot once the caller is known and
	// holds a slot of its pod's: reading and serving the request count
	// against the pod's share (and serving against the agent's slots).
	r = r.WithContext(context.WithValue(r.Context(), admittedKey{}, func() {
		if !admitted {
			admitted = true
			<-a.admitting
			a.unadmitPeer(peer)
		}
	}))
	serve := a.serve
	if r.URL.Path == nodewire.WarmPath {
		serve = a.warm
	} else {
		a.count(func(s *Stats) { s.Requests++ })
	}
	if err := serve(w, r); err != nil {
		status := http.StatusBadGateway
		var he *httpError
		if errors.As(err, &he) {
			status = he.status
		}
		if status == http.StatusBadGateway {
			a.count(func(s *Stats) { s.Failed++ })
		} else {
			a.count(func(s *Stats) { s.Refused++ })
		}
		a.opts.Log.Info("A request was not served", "path", r.URL.Path, "status", status, "reason", err.Error())
		http.Error(w, err.Error(), status)
	}
}

// authenticate says who sent the request: a pod of this node.
func (a *Agent) authenticate(r *http.Request) (Caller, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return Caller{}, refuse(http.StatusUnauthorized, "no bearer token: present the pod's projected ServiceAccount token of audience %q", nodewire.Audience)
	}
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	caller, err := a.opts.Auth.Authenticate(r.Context(), token, peer)
	if errors.Is(err, ErrTooManyReviews) {
		return Caller{}, refuse(http.StatusTooManyRequests, "%v: read the store", err)
	}
	if err != nil {
		return Caller{}, refuse(http.StatusUnauthorized, "the token was not accepted: %v", err)
	}
	if caller.Node != "" && a.opts.Node != "" && caller.Node != a.opts.Node {
		return Caller{}, refuse(http.StatusForbidden, "pod %s/%s runs on node %q, and this agent serves node %q", caller.Namespace, caller.Pod, caller.Node, a.opts.Node)
	}
	return caller, nil
}

// checkable is a request the agent checks before it does anything: a
// nodewire.Request or nodewire.WarmRequest.
type checkable interface{ Check() error }

// bodyTimeout bounds the reading of a request's body (256 KiB at most):
// a pod that trickles one holds its share of slots no longer.
const bodyTimeout = 5 * time.Second

// admit authenticates the caller (from the headers alone), takes one of
// its pod's slots, and reads its request (what, for the refusal) into
// req, checked, src being the store req names (its Source, once read):
// refused with why, before any store is opened. release gives the pod's
// slot back once the request is answered.
func (a *Agent) admit(w http.ResponseWriter, r *http.Request, what string, req checkable, src *nodewire.Source) (Caller, func(), error) {
	caller, err := a.authenticate(r)
	if err != nil {
		return Caller{}, nil, err
	}
	release, err := a.holdPod(caller)
	if err != nil {
		return Caller{}, nil, err
	}
	// From here the pod's own share bounds it: the admission slot (one of
	// those that bound the requests not yet authenticated) goes back.
	if done, ok := r.Context().Value(admittedKey{}).(func()); ok {
		done()
	}
	if err := a.read(w, r, what, req, src); err != nil {
		release()
		return Caller{}, nil, err
	}
	return caller, release, nil
}

// read reads and checks the request's body, within bodyTimeout, and the
// store it names (src, a field of req) against the endpoint policy.
func (a *Agent) read(w http.ResponseWriter, r *http.Request, what string, req checkable, src *nodewire.Source) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, nodewire.MaxRequestBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(req)
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return refuse(http.StatusBadRequest, "the request is not a %s request (JSON of at most %d bytes, sent within %s): %v", what, nodewire.MaxRequestBytes, bodyTimeout, err)
	}
	if err := req.Check(); err != nil {
		return refuse(http.StatusBadRequest, "%v", err)
	}
	if err := a.checkEndpoint(*src); err != nil {
		return refuse(http.StatusForbidden, "%v", err)
	}
	return nil
}

type admittedKey struct{}

// holdPod takes one of the caller's pod's slots, from its request's
// reading to its answer's end, refusing at once when it has none left;
// release gives it back.
func (a *Agent) holdPod(c Caller) (release func(), err error) {
	pod := c.Namespace + "/" + c.Pod
	a.podMu.Lock()
	defer a.podMu.Unlock()
	if a.podSlots[pod] >= a.opts.MaxInFlightPerPod {
		return nil, refuse(http.StatusTooManyRequests, "pod %s has %d requests in flight, the most one pod may: read the store", pod, a.opts.MaxInFlightPerPod)
	}
	a.podSlots[pod]++
	return func() {
		a.podMu.Lock()
		if a.podSlots[pod]--; a.podSlots[pod] <= 0 {
			delete(a.podSlots, pod)
		}
		a.podMu.Unlock()
	}, nil
}

// holdBytes counts size against the caller's pod's answers in flight, at
// most an eighth of the node's budget: entries being served cannot be
// evicted, so a pod reading slowly must not hold the node's room.
func (a *Agent) holdBytes(c Caller, size int64) (release func(), err error) {
	if a.opts.LimitBytes <= 0 {
		return func() {}, nil
	}
	pod := c.Namespace + "/" + c.Pod
	limit := max(a.opts.LimitBytes/8, size)
	a.podMu.Lock()
	defer a.podMu.Unlock()
	if a.podBytes[pod] > 0 && a.podBytes[pod]+size > limit {
		return nil, refuse(http.StatusTooManyRequests, "pod %s has %d bytes of answers in flight, the most one pod may hold of the node's %d: read the store", pod, a.podBytes[pod], a.opts.LimitBytes)
	}
	a.podBytes[pod] += size
	return func() {
		a.podMu.Lock()
		if a.podBytes[pod] -= size; a.podBytes[pod] <= 0 {
			delete(a.podBytes, pod)
		}
		a.podMu.Unlock()
	}, nil
}

// maxAdmittingPerPeer bounds one address's requests being authenticated
// at once: waiting on one slow review, they would hold every admission
// slot.
const maxAdmittingPerPeer = 16

func (a *Agent) admitPeer(peer string) bool {
	a.podMu.Lock()
	defer a.podMu.Unlock()
	if a.peerAdmitting[peer] >= maxAdmittingPerPeer {
		return false
	}
	a.peerAdmitting[peer]++
	return true
}

func (a *Agent) unadmitPeer(peer string) {
	a.podMu.Lock()
	if a.peerAdmitting[peer]--; a.peerAdmitting[peer] <= 0 {
		delete(a.peerAdmitting, peer)
	}
	a.podMu.Unlock()
}

// holdSlot takes one of the agent's serving slots, refusing at once when
// none is left; release gives it back.
func (a *Agent) holdSlot() (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return func() { <-a.slots }, nil
	default:
		return nil, refuse(http.StatusServiceUnavailable, "the node agent is busy: read the store")
	}
}

// copyOut writes n bytes of r to w, each write given WriteIdle: a caller
// that takes no byte for that long loses the answer (and its slots).
func (a *Agent) copyOut(w http.ResponseWriter, r io.Reader, n int64) (int64, error) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 256<<10)
	var done int64
	for done < n {
		k, err := r.Read(buf[:min(int64(len(buf)), n-done)])
		if k > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(a.opts.WriteIdle))
			m, werr := w.Write(buf[:k])
			done += int64(m)
			if werr != nil {
				return done, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (a *Agent) serve(w http.ResponseWriter, r *http.Request) error {
	var req nodewire.Request
	caller, release, err := a.admit(w, r, "shard", &req, &req.Source)
	if err != nil {
		return err
	}
	defer release()
	shard, err := a.entry(caller, req)
	if err != nil {
		return refuse(http.StatusBadRequest, "%v", err)
	}
	unbytes, err := a.holdBytes(caller, req.Size)
	if err != nil {
		return err
	}
	defer unbytes()
	unslot, err := a.holdSlot()
	if err != nil {
		return err
	}
	defer unslot()
	file, hit, err := a.acquire(r.Context(), req, shard)
	if err != nil {
		return err
	}
	defer a.cache.Release(shard)
	defer func() { _ = file.Close() }()
	how := nodewire.CacheFilled
	if hit {
		how = nodewire.CacheHit
	}
	w.Header().Set(nodewire.HeaderCache, how)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(req.Size, 10))
	lead, warmed := a.servedWarm(shard, hit)
	// Counted before the answer: a caller that has the headers sees it.
	a.count(func(s *Stats) {
		if warmed {
			s.WarmHits++
			s.LeadSeconds += lead.Seconds()
		}
		ns := s.ByNamespace[caller.Namespace]
		if hit {
			s.Hits++
			ns.Hits++
		} else {
			s.Fills++
			ns.Fills++
		}
		s.ByNamespace[caller.Namespace] = ns
	})
	n, err := a.copyOut(w, file, req.Size)
	if err != nil {
		a.opts.Log.Info("An answer was dropped", "namespace", caller.Namespace, "pod", caller.Pod, "sent", n, "of", req.Size, "reason", err.Error())
	}
	a.count(func(s *Stats) {
		ns := s.ByNamespace[caller.Namespace]
		if hit {
			s.HitBytes += n
			ns.HitBytes += n
		} else {
			s.FilledBytes += n
			ns.FillBytes += n
		}
		s.ByNamespace[caller.Namespace] = ns
	})
	return nil
}

// acquire holds the request's entry, filling it from the store if needed,
// and opens it checked: a file that changed on the node's disk since it
// was verified (the index's hash, or for an unhashed part the sum the
// agent took when it filled it) is discarded and filled again once. hit
// says the entry was on the node already.
func (a *Agent) acquire(ctx context.Context, req nodewire.Request, shard cache.Shard) (file *os.File, hit bool, err error) {
	src := storeSource(req.Source, a.opts.Retry, a.endpoints)
	open := func(ctx context.Context) (store.Store, error) { return a.opts.Open(ctx, src) }
	if !a.cache.Present(shard) {
		// A fill makes room before it reads, evicting other pods' entries:
		// the store first says the object is there and holds the bytes
		// asked for, so that a pod naming objects that are not (a hostile
		// tenant's flood of made-up keys and sizes) evicts nothing.
		st, err := confirmed(ctx, open, req)
		if err != nil {
			return nil, false, err
		}
		open = func(context.Context) (store.Store, error) { return st, nil }
	}
	for attempt := 0; ; attempt++ {
		f := &fill{open: open, key: req.Key, size: req.Size,
			filling: func() { a.filling(shard.Key) }}
		if req.Range {
			f.base, f.ranged = req.Offset, true
		}
		p, fetched, err := a.cache.AcquireFetched(withFill(ctx, f), shard)
		if err != nil {
			return nil, false, fillError(req, err)
		}
		file, err := a.checked(p, shard, fetched)
		if err == nil {
			return file, !fetched && attempt == 0, nil
		}
		a.cache.Release(shard)
		a.count(func(s *Stats) { s.Discarded++ })
		a.opts.Log.Warn("A node cache entry changed on disk since it was verified; filling it again", "entry", shard.Key, "reason", err.Error())
		if !a.cache.Discard(shard) || attempt > 0 {
			return nil, false, fmt.Errorf("%s%s: the node's copy is damaged (%w): read the store", req.Source.URI, req.Key, err)
		}
	}
}

// confirmed opens the request's store and checks that its object holds
// the bytes the request names.
func confirmed(ctx context.Context, open func(context.Context) (store.Store, error), req nodewire.Request) (store.Store, error) {
	st, err := open(ctx)
	if err != nil {
		return nil, err
	}
	obj, err := st.Stat(ctx, req.Key)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", req.Source.URI, req.Key, err)
	}
	if end := req.Offset + req.Size; obj.Size < end {
		return nil, fmt.Errorf("%s%s: the store's object has %d bytes, the request asks for bytes up to %d: the index is out of date, "+
			"or the request names bytes the store does not have", req.Source.URI, req.Key, obj.Size, end)
	}
	return st, nil
}

// checked opens an entry's file and checks its bytes: against the index's
// hash, or, for an unhashed part, the sum the agent took when it filled it
// (kept under .sums/ in its directory, across restarts).
//
// A shard this request just filled was checked against the index's hash
// by the cache as it came in: it is not read twice.
func (a *Agent) checked(p string, shard cache.Shard, filled bool) (*os.File, error) {
	want, err := checksum.Parse(shard.Hash)
	if err != nil {
		return nil, err
	}
	if filled && !want.IsZero() {
		return os.Open(p)
	}
	if want.IsZero() {
		if want, err = a.sumOf(p, shard.Key); err != nil {
			return nil, err
		}
	}
	file, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	h := want.New()
	if _, err := io.Copy(h, file); err != nil {
		_ = file.Close()
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		_ = file.Close()
		return nil, fmt.Errorf("%s %s on disk, %s when verified", want.Algo, got, want.Hex)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

// sumOf returns the sum of an unhashed entry: the one kept, or, for an
// entry this agent filled since it started, one taken now and kept. An
// entry of an earlier run without its sum is not believed.
func (a *Agent) sumOf(p, key string) (checksum.Sum, error) {
	a.sumMu.Lock()
	defer a.sumMu.Unlock()
	path := filepath.Join(a.opts.Dir, ".sums", filepath.Base(key))
	if b, err := os.ReadFile(path); err == nil {
		if sum, err := checksum.Parse(strings.TrimSpace(string(b))); err == nil && !sum.IsZero() {
			return sum, nil
		}
	}
	if !a.filled[key] {
		return checksum.Sum{}, errors.New("no sum was kept for it")
	}
	sum, err := sha256File(p)
	if err != nil {
		return checksum.Sum{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return checksum.Sum{}, err
	}
	if err := os.WriteFile(path+".tmp", []byte(sum.String()), 0o600); err != nil {
		return checksum.Sum{}, err
	}
	return sum, os.Rename(path+".tmp", path)
}

// dropStaleSums removes the kept sums of entries no longer on disk
// (evicted, or removed by hand), so they do not pile up across restarts.
func (a *Agent) dropStaleSums() {
	dir := filepath.Join(a.opts.Dir, ".sums")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".tmp")
		if len(name) < 2 || name != e.Name() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		if _, err := os.Stat(filepath.Join(a.opts.Dir, entries, name[:2], name)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func sha256File(p string) (checksum.Sum, error) {
	f, err := os.Open(p)
	if err != nil {
		return checksum.Sum{}, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return checksum.Sum{}, err
	}
	return checksum.Sum{Algo: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// filling notes that the entry is being filled by this agent: its bytes
// are the store's, so its sum may be taken.
func (a *Agent) filling(key string) {
	a.sumMu.Lock()
	a.filled[key] = true
	a.sumMu.Unlock()
}

// storeSource is the store.Source the agent opens for a request's source
// s: with its credentials alone, never the agent's own.
func storeSource(s nodewire.Source, retry store.Retry, endpoints *store.Endpoints) store.Source {
	src := store.Source{URI: s.URI, Endpoint: s.Endpoint, Region: s.Region, Insecure: s.Insecure,
		Credentials: maps.Clone(s.Credentials), Retry: retry, Endpoints: endpoints}
	if src.Credentials == nil && s.Identity == nil {
		src.Credentials = map[string][]byte{} // never the agent's own chain
	}
	if id := s.Identity; id != nil {
		token := id.Token
		src.Identity = &store.Identity{Audience: id.Audience, RoleARN: id.RoleARN, ServiceAccountEmail: id.ServiceAccountEmail,
			ClientID: id.ClientID, TenantID: id.TenantID,
			Token: func(context.Context) (string, error) { return token, nil }}
	}
	return src
}

// fillError says why a request's shard could not be filled, in the terms
// of the request (not of the agent's cache entry).
func fillError(req nodewire.Request, err error) error {
	var corrupt *cache.CorruptError
	if errors.As(err, &corrupt) {
		return fmt.Errorf("%s%s: the store's bytes are not those of %s (%s): the index is out of date, or the request names bytes the store does not have",
			req.Source.URI, req.Key, req.Hash, corrupt.Reason)
	}
	var full *cache.FullError
	if errors.As(err, &full) {
		return refuse(http.StatusInsufficientStorage, "%s%s: the node cache has no room for %d bytes (%d of its %d held by reads in flight)",
			req.Source.URI, req.Key, full.Need, full.Held, full.Limit)
	}
	return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("stream %q: ", entries)))
}

// checkEndpoint refuses a store host the platform does not allow for the
// source's cloud and account: the agent would send it the job's
// credentials from the node. Each request and each address it connects
// to are checked again as the store makes them.
func (a *Agent) checkEndpoint(s nodewire.Source) error {
	host, scheme := "", "https"
	if s.Endpoint != "" {
		u, err := store.EndpointURL(s.Endpoint, s.Insecure)
		if err != nil {
			return err
		}
		host, scheme = u.Host, u.Scheme
	} else {
		h, err := stores.DefaultHost(s.URI, s.Region)
		if err != nil {
			return err
		}
		host = h
	}
	gate, err := stores.Gate(a.endpoints, s.URI, store.UseStorage)
	if err != nil {
		return err
	}
	if err := gate.Check(scheme, host); err != nil {
		return fmt.Errorf("the node agent may not reach this endpoint: %w", err)
	}
	return nil
}

// entry is the cache entry of a request: its address says who may read
// it, from which store, and which bytes. The store is everything that
// selects the bytes: the scheme, the bucket or account, the endpoint or
// the host the source's region and partition give, and the region itself
// (a bucket's name is unique within a partition only).
func (a *Agent) entry(c Caller, r nodewire.Request) (cache.Shard, error) {
	sum, err := checksum.Parse(r.Hash)
	if err != nil {
		return cache.Shard{}, err
	}
	u, err := url.Parse(r.Source.URI)
	if err != nil {
		return cache.Shard{}, fmt.Errorf("source.uri %q: %w", r.Source.URI, err)
	}
	endpoint := normalEndpoint(r.Source.Endpoint, r.Source.Insecure)
	if endpoint == "" {
		// The host the region (and so the partition) reaches.
		if host, err := stores.DefaultHost(r.Source.URI, r.Source.Region); err == nil {
			endpoint = "https://" + strings.ToLower(host)
		}
	}
	h := sha256.New()
	field := func(s string) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		_, _ = io.WriteString(h, s)
	}
	field(a.group(c, r, u, sum))
	// The user part names abfss://'s container.
	field(strings.ToLower(u.Scheme) + "://" + u.User.String() + "@" + strings.ToLower(u.Host) + "@" + endpoint)
	field(strings.ToLower(strings.TrimSpace(r.Source.Region)))
	field(sum.String())
	field(strconv.FormatInt(r.Size, 10))
	field(r.Version)
	if !sum.CollisionResistant() {
		// A weak hash names no content on its own: the object does, as
		// the store reads it.
		field(store.CleanPrefix(u.Path) + r.Key)
		field(fmt.Sprintf("%t@%d", r.Range, r.Offset))
	}
	addr := hex.EncodeToString(h.Sum(nil))
	return cache.Shard{Stream: entries, Key: addr[:2] + "/" + addr, Size: r.Size, Hash: r.Hash}, nil
}

// group is who may read an entry: a shared source's readers are every pod,
// for the parts the index hashes with a collision-resistant hash (whoever
// filled them, from whichever store their credentials reached, the agent
// checked the bytes are those the hash names); otherwise, and for a part
// no such hash checks (a Parquet footer, an xxh64 shard), a namespace, and
// in it the holders of the same Secret's keys (keyed, so an address
// reveals nothing of them) or the same ServiceAccount taking the same
// workload identity.
func (a *Agent) group(c Caller, r nodewire.Request, u *url.URL, sum checksum.Sum) string {
	if sum.CollisionResistant() && slices.ContainsFunc(a.shared, func(p sharedPrefix) bool { return p.holds(u, r.Key, r.Source) }) {
		return "shared"
	}
	if id := r.Source.Identity; id != nil {
		return strings.Join([]string{"ns", c.Namespace, "sa", c.ServiceAccount, "identity", id.Audience, id.RoleARN, id.ServiceAccountEmail, id.ClientID, id.TenantID}, "\x00")
	}
	mac := hmac.New(sha256.New, a.key)
	keys := make([]string, 0, len(r.Source.Credentials))
	for k := range r.Source.Credentials {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := []byte(strings.TrimSpace(string(r.Source.Credentials[k])))
		_ = binary.Write(mac, binary.BigEndian, uint32(len(k)))
		_, _ = io.WriteString(mac, k)
		_ = binary.Write(mac, binary.BigEndian, uint32(len(v)))
		_, _ = mac.Write(v)
	}
	return "ns\x00" + c.Namespace + "\x00secret\x00" + hex.EncodeToString(mac.Sum(nil))
}

// sharedPrefix is a prefix of nodeCache.sharedSources: a store (the
// cloud's own, or the endpoint named), its scheme and bucket (or
// account), and a path within it, whole segments.
type sharedPrefix struct {
	scheme, host, path string
	// endpoint is the store's endpoint as normalEndpoint writes it, ""
	// for the cloud's own.
	endpoint string
}

// parseShared reads a shared source prefix, "scheme://bucket/prefix/",
// with "?endpoint=URL" for a store other than the cloud's own.
func parseShared(s string) (sharedPrefix, error) {
	u, err := url.Parse(s)
	if err != nil {
		return sharedPrefix{}, fmt.Errorf("shared source %q: %w", s, err)
	}
	q := u.Query()
	if u.Scheme == "" || u.Host == "" || u.User != nil || u.Fragment != "" || len(q) > 1 || (len(q) == 1 && len(q["endpoint"]) != 1) {
		return sharedPrefix{}, fmt.Errorf("shared source %q: write scheme://bucket/prefix/ (a whole bucket: scheme://bucket/), and ?endpoint=https://host:port for a store other than the cloud's own", s)
	}
	return sharedPrefix{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Host), path: store.CleanPrefix(u.Path),
		endpoint: normalEndpoint(q.Get("endpoint"), false)}, nil
}

// holds says whether key under the source src (u, parsed) is within the
// prefix, as the store reads it: the same store (a credential that names
// an endpoint of its own, an Azure connection string, is another store),
// scheme and bucket, and the prefix's whole segments ("s3://public/a/"
// holds nothing of "s3://public/ab/").
func (p sharedPrefix) holds(u *url.URL, key string, src nodewire.Source) bool {
	_, connectionString := src.Credentials[azure.ConnectionStringFile]
	return !connectionString && normalEndpoint(src.Endpoint, src.Insecure) == p.endpoint &&
		strings.EqualFold(u.Scheme, p.scheme) && strings.EqualFold(u.Host, p.host) && u.User == nil &&
		strings.HasPrefix(store.CleanPrefix(u.Path)+key, p.path)
}

// normalEndpoint writes an endpoint one way: lower case, with its scheme
// (https unless insecure and none given), no trailing slash.
func normalEndpoint(endpoint string, insecure bool) string {
	e := strings.ToLower(strings.TrimRight(strings.TrimSpace(endpoint), "/"))
	if e == "" || strings.Contains(e, "://") {
		return e
	}
	if insecure {
		return "http://" + e
	}
	return "https://" + e
}

// fill is what a request's cache miss reads: the object of the request,
// with its credentials, through the store opened for it alone.
type fill struct {
	open   func(context.Context) (store.Store, error)
	key    string
	base   int64
	size   int64
	ranged bool
	// filling, if set, hears that the fill reads the store.
	filling func()

	once sync.Once
	st   store.Store
	err  error
}

type fillKey struct{}

func withFill(ctx context.Context, f *fill) context.Context {
	return context.WithValue(ctx, fillKey{}, f)
}

// requestStore is the agent cache's one store: each read goes to the store
// of the request it is filled for (the context's fill).
type requestStore struct{}

var errNoFill = errors.New("node agent: a read outside a request")

func (requestStore) URI() string { return "node-cache:///" }

func (requestStore) Get(ctx context.Context, _ string, off, n int64) (io.ReadCloser, error) {
	f, ok := ctx.Value(fillKey{}).(*fill)
	if !ok {
		return nil, errNoFill
	}
	f.once.Do(func() {
		if f.filling != nil {
			f.filling()
		}
		f.st, f.err = f.open(ctx)
	})
	if f.err != nil {
		return nil, f.err
	}
	if f.ranged {
		// The cache asks one byte more of a whole object's end, to see it
		// grew; a range's next byte is another range's.
		if n < 0 || off+n > f.size {
			n = f.size - off
		}
		return f.st.Get(ctx, f.key, f.base+off, n)
	}
	return f.st.Get(ctx, f.key, off, n)
}

func (requestStore) Stat(context.Context, string) (store.Object, error) {
	return store.Object{}, errNoFill
}

func (requestStore) List(context.Context) ([]store.Object, error) { return nil, errNoFill }

func (requestStore) ListDir(context.Context, string) (store.Listing, error) {
	return store.Listing{}, errNoFill
}

func (requestStore) Put(context.Context, string, io.Reader, int64) error { return errNoFill }

func (requestStore) Delete(context.Context, string) error { return errNoFill }
