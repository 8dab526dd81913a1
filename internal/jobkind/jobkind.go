// Package jobkind holds the kinds of training jobs shardfeed wires, one row
// each, as Kueue's job integrations do: where a kind's pod templates are,
// how many pods it runs, where each pod's rank comes from, and what the
// operator may read of it. The webhooks, kubectl shardfeed why and the
// generator of the markers and the chart's rules (hack/jobkinds) range over
// the rows; a platform declares its own kinds without a rebuild (Parse,
// the chart's jobKinds).
package jobkind

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Kind is one kind of training job.
type Kind struct {
	Group, Version, Kind string
	// Resource is the kind's plural, for RBAC and the webhook's rules.
	Resource string
	// Templates are the paths of the object's pod templates (Path).
	Templates []Path
	// Replicas are the fields whose sum is the job's pod count, where the
	// pods' controller is an object of this kind (Owns).
	Replicas []Replicas
	// Owns: the kind's pods have an object of it as their controller,
	// which the pod webhook reads (get) for the job's size.
	Owns bool
	// Queued: a queue (Kueue) admits the kind by its templates' requests,
	// so the queued-jobs webhook reserves the sidecar's in them.
	Queued bool
	// LabelAt says where a user puts the dataset label (kubectl shardfeed
	// why's advice).
	LabelAt string
	// Rank places a pod of the kind: its rank and the job's pod count;
	// claimed is false for a pod whose rank this kind does not give.
	Rank func(pod *corev1.Pod, owner Owner, declaredPods int) (p Placement, claimed bool, err error)
	// Procs, where set, is the processes the kind starts in the pod
	// (claimed false: not a pod of the kind).
	Procs func(pod *corev1.Pod) (procs int, claimed bool, err error)
}

// Replicas is one field counted in a job's pods: its value, or Default
// where the field is missing but the object that would hold it is there
// (a replica type a PyTorchJob has, without a count). Leading replicas
// rank before the others (a PyTorchJob's masters).
type Replicas struct {
	Path    Path
	Default int64
	Leading bool
}

// Owner is what the pod webhook found out about a pod's controller.
type Owner struct {
	// Group and Kind are the controller's; Kind is "" for a bare pod.
	Group string
	Kind  string
	Name  string
	UID   string
	// Replicas is the job's pod count as its object says (0: unknown, or
	// a kind the registry does not size).
	Replicas int
	// Masters are the leading replicas (a PyTorchJob's masters).
	Masters int
	// Sized: the object was read (Replicas and Masters are what it says).
	Sized bool
}

// Placement is where a pod stands in its job.
type Placement struct {
	// Rank is the pod's index, or RankField the field of the pod it is in
	// (the downward API reads it, as for an Indexed Job's pods).
	Rank      int
	RankField string
	// Pods is the job's pod count (0: unknown).
	Pods int
}

// Refusal is a pod that cannot be wired: what is wrong and how to fix it.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refuse(format string, args ...any) error {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// Registry is the kinds the operator wires: the built-in ones and a
// platform's own, which come first (their pods are claimed by their
// controller, before any built-in kind reads the pod's labels).
type Registry struct {
	kinds []*Kind
}

// Builtin is the registry of the kinds shardfeed wires out of the box.
func Builtin() *Registry { return &Registry{kinds: builtins()} }

// With is the registry with more kinds, each a kind none before it is.
func (r *Registry) With(kinds ...*Kind) (*Registry, error) {
	out := &Registry{kinds: append(append([]*Kind(nil), kinds...), r.all()...)}
	seen := map[string]bool{}
	for _, k := range out.kinds {
		kind, resource := "kind "+k.Group+"/"+k.Kind, "resource "+k.Group+"/"+k.Resource
		if seen[kind] || seen[resource] {
			return nil, fmt.Errorf("job kind %s (group %s, resource %s) is declared twice: a kind, and its resource, has one row", k.Kind, k.Group, k.Resource)
		}
		seen[kind], seen[resource] = true, true
	}
	return out, nil
}

// Kinds are the registry's rows, a platform's own first.
func (r *Registry) Kinds() []*Kind { return r.all() }

func (r *Registry) all() []*Kind {
	if r == nil {
		return builtins()
	}
	return r.kinds
}

// Lookup is the row of group and kind, nil if the registry has none.
func (r *Registry) Lookup(group, kind string) *Kind {
	for _, k := range r.all() {
		if k.Group == group && k.Kind == kind {
			return k
		}
	}
	return nil
}

// Named is the row a user means by a kind's name, plural or short name
// (job, Jobs, sts), nil if none.
func (r *Registry) Named(name string) *Kind {
	n := strings.ToLower(name)
	for _, k := range r.all() {
		if n == strings.ToLower(k.Kind) || n == k.Resource || (n == "sts" && k.Kind == "StatefulSet") {
			return k
		}
	}
	return nil
}

// Place is the pod's placement by the first kind that claims it;
// claimed is false where none does (ranks then come at rendezvous).
func (r *Registry) Place(pod *corev1.Pod, owner Owner, declaredPods int) (Placement, bool, error) {
	for _, k := range r.all() {
		if k.Rank == nil {
			continue
		}
		if p, ok, err := k.Rank(pod, owner, declaredPods); ok || err != nil {
			return p, ok, err
		}
	}
	return Placement{}, false, nil
}

// Procs is the processes the first kind that knows says the pod runs.
func (r *Registry) Procs(pod *corev1.Pod) (int, bool, error) {
	for _, k := range r.all() {
		if k.Procs == nil {
			continue
		}
		if n, ok, err := k.Procs(pod); ok || err != nil {
			return n, ok, err
		}
	}
	return 0, false, nil
}

// MaxPods bounds a job's pod count as an object says it (a sum of fields
// a job's author writes).
const MaxPods = 1 << 20

// Size reads the job's pod count and leading replicas from its object.
func (k *Kind) Size(obj map[string]any) (replicas, leading int, err error) {
	for _, r := range k.Replicas {
		parent, field := r.Path.parent()
		holder, ok := parent.lookup(obj)
		if !ok {
			continue
		}
		n := r.Default
		if v, has := holder[field]; has && v != nil {
			if n, ok = asInt(v); !ok || n < 0 {
				return 0, 0, fmt.Errorf("%s %s: expected a non-negative integer, not %v", k.Kind, r.Path, v)
			}
		}
		if n > MaxPods || replicas+int(n) > MaxPods {
			return 0, 0, fmt.Errorf("%s %s: the job's pods would be more than %d", k.Kind, r.Path, MaxPods)
		}
		replicas += int(n)
		if r.Leading {
			leading += int(n)
		}
	}
	return replicas, leading, nil
}

// PodTemplates are the object's pod templates, in place: a reservation
// added to one is in obj. Map entries come in their keys' order.
func (k *Kind) PodTemplates(obj map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range k.Templates {
		out = append(out, p.templates(obj)...)
	}
	return out
}

// RBAC is the rule the operator needs on the kind: get, where it reads
// its objects (Owns); ok is false otherwise.
func (k *Kind) RBAC() (group, resource string, ok bool) {
	return k.Group, k.Resource, k.Owns
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
