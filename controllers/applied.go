package controllers

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// appliedPlan is what a reconcile applied for a dataset, to know when the
// next one has nothing to plan: jobs' states wake a dataset's reconcile at
// every commit, and reading its indexes and planning again each time was
// most of the manager's CPU at a cluster's scale.
type appliedPlan struct {
	uid         types.UID
	generation  int64
	fingerprint string
	operatorCA  string
	// identities are the workload identities the plan carries, as the
	// ServiceAccounts' annotations resolved them (identitiesOf): their
	// owners may change them with the plan's fingerprint unchanged.
	identities string
	data       dataDigest // of the plan ConfigMap as applied
	at         time.Time
}

// appliedPlans holds each dataset's appliedPlan in this replica (a new
// leader starts empty, so it plans every dataset once).
type appliedPlans struct {
	mu sync.Mutex
	m  map[types.NamespacedName]appliedPlan
}

func (p *appliedPlans) get(key types.NamespacedName) (appliedPlan, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.m[key]
	return a, ok
}

func (p *appliedPlans) remember(key types.NamespacedName, a appliedPlan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]appliedPlan{}
	}
	p.m[key] = a
}

func (p *appliedPlans) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// dataDigest is a digest of a ConfigMap's data.
type dataDigest [sha256.Size]byte

// dataSum is the digest of a ConfigMap's data, its keys in order.
func dataSum(data map[string]string) dataDigest {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		// Lengths first: no two maps share a digest by moving a boundary.
		var n [16]byte
		binary.LittleEndian.PutUint64(n[:8], uint64(len(k)))
		binary.LittleEndian.PutUint64(n[8:], uint64(len(data[k])))
		h.Write(n[:])
		h.Write([]byte(k))
		h.Write([]byte(data[k]))
	}
	var sum dataDigest
	h.Sum(sum[:0])
	return sum
}
