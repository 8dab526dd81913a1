package jobkind

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/shardfeed/shardfeed/internal/strictjson"
)

// Declared is a platform's own job kind, as the chart's jobKinds values
// (or the manager's --job-kinds) give it: a CRD whose controller creates
// the training pods itself, each with its index in a label or annotation.
type Declared struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// PodTemplates are the paths of the object's pod templates (Path), for
	// the queued-jobs webhook and the advice of kubectl shardfeed why.
	PodTemplates []Path `json:"podTemplates"`
	// Replicas are the fields whose sum is the job's pod count.
	Replicas []Path `json:"replicas"`
	// Rank names the label or annotation of each pod holding its index.
	Rank DeclaredRank `json:"rank"`
	// Queued: a queue admits the kind by its templates' requests.
	Queued bool `json:"queued,omitempty"`
}

// DeclaredRank is where a declared kind's pods hold their index: exactly
// one of the two.
type DeclaredRank struct {
	Label      string `json:"label,omitempty"`
	Annotation string `json:"annotation,omitempty"`
}

// Declarations bound what Parse reads: a list, not a data set.
const (
	MaxDeclaredBytes = 64 << 10
	MaxDeclared      = 32
	// maxTemplates, maxCEL: the queued-jobs webhook's match condition
	// stays well within the API server's limit on an expression (100,000).
	maxTemplates     = 4
	maxReplicaFields = 8
	maxCEL           = 50_000
	// maxGroup leaves room in the webhook's name for the plural (63).
	maxGroup = 163
)

var kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// Parse reads a platform's job kinds, a JSON or YAML list of Declared,
// and refuses what is not one, saying what and how to fix it.
func Parse(data []byte) ([]*Kind, error) {
	if len(data) > MaxDeclaredBytes {
		return nil, fmt.Errorf("job kinds: %d bytes, more than %d: declare fewer kinds", len(data), MaxDeclaredBytes)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("job kinds: not YAML or JSON: %w", err)
	}
	var decls []Declared
	if err := strictjson.Decode(js, &decls); err != nil {
		return nil, fmt.Errorf("job kinds: %w (a list of {group, version, kind, resource, podTemplates, replicas, rank: {label | annotation}, queued})", err)
	}
	if len(decls) > MaxDeclared {
		return nil, fmt.Errorf("job kinds: %d declared, more than %d", len(decls), MaxDeclared)
	}
	kinds := make([]*Kind, 0, len(decls))
	for i := range decls {
		k, err := decls[i].kind()
		if err != nil {
			return nil, fmt.Errorf("job kinds[%d] (%s): %w", i, decls[i].Kind, err)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// kind checks the declaration and makes its row.
func (d *Declared) kind() (*Kind, error) {
	if errs := validation.IsDNS1123Subdomain(d.Group); errs != nil || !strings.Contains(d.Group, ".") {
		return nil, fmt.Errorf("group %q: give the CRD's API group, a DNS name with a dot (training.example.com)", d.Group)
	}
	if errs := validation.IsDNS1035Label(d.Version); errs != nil {
		return nil, fmt.Errorf("version %q: give the CRD's served version (v1)", d.Version)
	}
	if !kindName.MatchString(d.Kind) {
		return nil, fmt.Errorf("kind %q: give the CRD's kind, as in its manifests (TrainRun)", d.Kind)
	}
	if errs := validation.IsDNS1123Label(d.Resource); errs != nil {
		return nil, fmt.Errorf("resource %q: give the CRD's plural, lower case (trainruns)", d.Resource)
	}
	// The queued-jobs webhook is named <resource>.<group>.queued-jobs.shardfeed.io,
	// at most 253 characters.
	if len(d.Group) > maxGroup {
		return nil, fmt.Errorf("group %q: %d characters, more than %d", d.Group, len(d.Group), maxGroup)
	}
	for _, b := range Builtin().Kinds() {
		if b.Group == d.Group {
			return nil, fmt.Errorf("group %s is the built-in %s's: declare only your own API groups", d.Group, b.Kind)
		}
	}
	if len(d.PodTemplates) == 0 || len(d.PodTemplates) > maxTemplates {
		return nil, fmt.Errorf("podTemplates: give the path of each pod template in the object (spec.template), 1 to %d of them", maxTemplates)
	}
	for _, p := range d.PodTemplates {
		if err := p.Check(false); err != nil {
			return nil, fmt.Errorf("podTemplates: %w", err)
		}
	}
	if n := len((&Kind{Templates: d.PodTemplates}).LabelledCEL("shardfeed.io/dataset")); n > maxCEL {
		return nil, fmt.Errorf("podTemplates: their match condition would be %d characters, more than the %d the API server takes: give shorter or fewer paths", n, maxCEL)
	}
	if len(d.Replicas) == 0 || len(d.Replicas) > maxReplicaFields {
		return nil, fmt.Errorf("replicas: give the field (or up to %d fields, summed) that says how many pods the job runs (spec.replicas)", maxReplicaFields)
	}
	replicas := make([]Replicas, 0, len(d.Replicas))
	for _, p := range d.Replicas {
		if err := p.Check(true); err != nil {
			return nil, fmt.Errorf("replicas: %w", err)
		}
		replicas = append(replicas, Replicas{Path: p})
	}
	rank, err := d.Rank.source()
	if err != nil {
		return nil, err
	}
	return &Kind{
		Group: d.Group, Version: d.Version, Kind: d.Kind, Resource: d.Resource,
		Templates: d.PodTemplates, Replicas: replicas, Owns: true, Queued: d.Queued,
		LabelAt: strings.Join(pathsText(d.PodTemplates), ", ") + " (metadata.labels)",
		Rank:    ownedRank(d.Group, d.Kind, rank),
	}, nil
}

func pathsText(paths []Path) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = string(p)
	}
	return out
}

// indexKey is the label or annotation holding a pod's index.
type indexKey struct {
	key        string
	annotation bool
}

func (d DeclaredRank) source() (indexKey, error) {
	switch {
	case (d.Label == "") == (d.Annotation == ""):
		return indexKey{}, fmt.Errorf("rank: give exactly one of label or annotation, naming where each pod holds its index (0 to pods-1)")
	case d.Label != "":
		if errs := validation.IsQualifiedName(d.Label); errs != nil {
			return indexKey{}, fmt.Errorf("rank.label %q: %s", d.Label, strings.Join(errs, "; "))
		}
		return indexKey{key: d.Label}, nil
	default:
		if errs := validation.IsQualifiedName(d.Annotation); errs != nil {
			return indexKey{}, fmt.Errorf("rank.annotation %q: %s", d.Annotation, strings.Join(errs, "; "))
		}
		return indexKey{key: d.Annotation, annotation: true}, nil
	}
}

// ownedRank places the pods whose controller is of the kind: the index
// in their label (annotation), of the object's replicas.
func ownedRank(group, kind string, at indexKey) func(*corev1.Pod, Owner, int) (Placement, bool, error) {
	where := "label"
	if at.annotation {
		where = "annotation"
	}
	return func(pod *corev1.Pod, owner Owner, pods int) (Placement, bool, error) {
		if owner.Group != group || owner.Kind != kind {
			return Placement{}, false, nil
		}
		m := pod.Labels
		if at.annotation {
			m = pod.Annotations
		}
		v, ok := m[at.key]
		rank, err := strconv.Atoi(v)
		if !ok || err != nil || rank < 0 {
			return Placement{}, true, refuse("%s pod without a valid %s %s (%q): its controller must give each pod its index, or set the annotations %s and %s", kind, where, at.key, v, AnnotationRank, AnnotationPods)
		}
		if pods == 0 {
			pods = owner.Replicas
		}
		if pods > 0 && rank >= pods {
			return Placement{}, true, refuse("%s pod with %s %s=%d outside its %d pods", kind, where, at.key, rank, pods)
		}
		return Placement{Rank: rank, Pods: pods}, true, nil
	}
}
