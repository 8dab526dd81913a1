package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
)

// DatasetWebhookPath is where the TrainingDataset validating webhook is
// served.
const DatasetWebhookPath = "/validate-data-shardfeed-io-v1alpha1-trainingdataset"

// DatasetValidator checks what the CRD schema and its CEL rules cannot: an
// image reference's grammar, the sidecar's resources (requests within
// limits, known resource names: otherwise every pod of the job would be
// rejected later with a less clear message), and, as warnings, Secrets
// that do not exist yet (to those who may read them) and streams that
// read the same data twice.
type DatasetValidator struct {
	// Reader reads the referenced Secrets (directly: they are not cached).
	Reader client.Reader
	// Access asks the API server whether the requester may get a Secret;
	// a warning about a Secret goes only to those who may (nil: to no
	// one).
	Access authorizationv1client.SubjectAccessReviewInterface
	// Policy refuses at apply time the sources the reconciler would
	// refuse (file://, endpoints off the allow-list, the operator's own
	// identity where it is not allowed).
	Policy StorePolicy
	// Images refuses a spec.sidecar.image the platform does not allow.
	Images inject.ImagePolicy
}

// +kubebuilder:webhook:path=/validate-data-shardfeed-io-v1alpha1-trainingdataset,mutating=false,failurePolicy=fail,sideEffects=None,groups=data.shardfeed.io,resources=trainingdatasets,verbs=create;update,versions=v1alpha1,name=trainingdatasets.shardfeed.io,admissionReviewVersions=v1,timeoutSeconds=10

var _ admission.Validator[*datav1alpha1.TrainingDataset] = (*DatasetValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *DatasetValidator) ValidateCreate(ctx context.Context, ds *datav1alpha1.TrainingDataset) (admission.Warnings, error) {
	return v.validate(ctx, nil, ds)
}

// ValidateUpdate implements admission.Validator: a schedule's phases
// already passed may not change.
func (v *DatasetValidator) ValidateUpdate(ctx context.Context, old, ds *datav1alpha1.TrainingDataset) (admission.Warnings, error) {
	return v.validate(ctx, old, ds)
}

// ValidateDelete implements admission.Validator; the webhook is not called
// on delete (its marker names create and update).
func (v *DatasetValidator) ValidateDelete(context.Context, *datav1alpha1.TrainingDataset) (admission.Warnings, error) {
	return nil, nil
}

// validate checks a TrainingDataset as created, or as updated from old:
// what is wrong denies it, with the fix; warnings go to the requester.
func (v *DatasetValidator) validate(ctx context.Context, old, ds *datav1alpha1.TrainingDataset) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	problems := Validate(&ds.Spec)
	if old != nil {
		problems = append(problems, LatePhases(old, ds)...)
	}
	// An image that does not parse is reported once, by Validate.
	if err := v.Images.Check(ds.Spec.Sidecar.Image); err != nil && len(problems) == 0 {
		problems = append(problems, err.Error())
	}
	for i, st := range ds.Spec.Streams {
		if err := v.Policy.Check(req.Namespace, i, st); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("TrainingDataset %s: %s", ds.Name, strings.Join(problems, "; "))
	}
	warnings, err := v.warnings(ctx, req.Namespace, req.UserInfo, ds)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return warnings, nil
}

// Validate returns what is wrong with spec beyond its schema, each with
// the fix.
func Validate(spec *datav1alpha1.TrainingDatasetSpec) []string {
	var problems []string
	if img := spec.Sidecar.Image; img != "" {
		if _, err := reference.ParseNormalizedNamed(img); err != nil {
			problems = append(problems, fmt.Sprintf("spec.sidecar.image %q is not an image reference (%v): write registry/repository:tag or @sha256:digest, e.g. ghcr.io/shardfeed/shardfeed:v0.1.0", img, err))
		}
	}
	for i, st := range spec.Streams {
		problems = append(problems, partitionProblems(i, st.Partitions)...)
		if err := streams.CheckIndexURI(st.Source); err != nil {
			problems = append(problems, fmt.Sprintf("spec.streams[%d].%v", i, err))
		}
		if st.Filter != "" {
			if err := expr.Check(st.Filter); err != nil {
				problems = append(problems, fmt.Sprintf("spec.streams[%d].filter: %v", i, err))
			}
		}
	}
	problems = append(problems, indexProblems(spec)...)
	res := spec.Sidecar.Resources
	for _, list := range []struct {
		field string
		list  corev1.ResourceList
	}{{"requests", res.Requests}, {"limits", res.Limits}} {
		for name := range list.list {
			if !containerResource(name) {
				problems = append(problems, fmt.Sprintf("spec.sidecar.resources.%s.%s is not a container resource: use cpu, memory, ephemeral-storage or hugepages-<size>", list.field, name))
			}
		}
	}
	for name, req := range res.Requests {
		if limit, ok := res.Limits[name]; ok && req.Cmp(limit) > 0 {
			problems = append(problems, fmt.Sprintf("spec.sidecar.resources.requests.%s (%s) is above its limit (%s): every pod would be rejected; raise the limit or lower the request",
				name, req.String(), limit.String()))
		}
	}
	if len(res.Claims) > 0 {
		problems = append(problems, "spec.sidecar.resources.claims is not supported: the sidecar needs no dynamic resources; remove it")
	}
	return problems
}

// LatePhases returns the phases an update appends to spec.schedule that
// start before a job's committed step (status.jobs): those steps are
// trained, so a phase there would change batches a job already trained.
func LatePhases(old, ds *datav1alpha1.TrainingDataset) []string {
	if old.Spec.Schedule == nil || ds.Spec.Schedule == nil || old.Status.StepsPerEpoch < 1 {
		return nil
	}
	K := old.Status.StepsPerEpoch
	var committed int64
	var job string
	for _, j := range old.Status.Jobs {
		if g := j.Epoch*K + j.Step; g > committed {
			committed, job = g, j.Job
		}
	}
	var problems []string
	for i := len(old.Spec.Schedule.Phases); i < len(ds.Spec.Schedule.Phases); i++ {
		ph := ds.Spec.Schedule.Phases[i]
		first := ph.StartStep
		if first < committed {
			problems = append(problems, fmt.Sprintf("spec.schedule.phases[%d] starts at global step %d, before job %q's committed step %d (epoch %d step %d of %d): start it at step %d or later",
				i, first, job, committed, committed/K, committed%K, K, committed))
		}
	}
	return problems
}

// partitionProblems checks a stream's partitions: its selection parses
// (its columns are checked by shardfeed index, which reads the tree) and
// its columns have distinct names.
func partitionProblems(i int, p *datav1alpha1.Partitions) []string {
	if p == nil {
		return nil
	}
	var problems []string
	if p.Select != "" {
		if err := expr.Check(p.Select); err != nil {
			problems = append(problems, fmt.Sprintf("spec.streams[%d].partitions.select: %v", i, err))
		}
	}
	seen := map[string]bool{}
	for _, c := range p.Columns {
		if seen[c.Name] {
			problems = append(problems, fmt.Sprintf("spec.streams[%d].partitions.columns names %q twice: each partition column once, in the tree's order", i, c.Name))
		}
		seen[c.Name] = true
	}
	return problems
}

func containerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// warnings are what kubectl shows without refusing: a Secret may be
// created after the dataset (the reconciler then waits for it). Whether a
// Secret exists and what keys it has is said only to a requester who may
// get it: a dataset author who may not would learn it otherwise.
func (v *DatasetValidator) warnings(ctx context.Context, ns string, user authenticationv1.UserInfo, ds *datav1alpha1.TrainingDataset) ([]string, error) {
	var out []string
	seen := map[string]string{}
	for _, s := range ds.Spec.Streams {
		if other, dup := seen[s.Source.URI]; dup {
			out = append(out, fmt.Sprintf("streams %q and %q read the same source %s: their samples count twice", other, s.Name, s.Source.URI))
		}
		seen[s.Source.URI] = s.Name
		ref := s.Source.CredentialsSecretRef
		keys, ok := stores.SecretKeysOf(s.Source.URI)
		if ref == nil || !ok {
			continue
		}
		if may, err := v.mayGetSecret(ctx, user, ns, ref.Name); err != nil || !may {
			continue // the reconciler's condition says it, to the dataset's readers
		}
		var secret corev1.Secret
		err := v.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &secret)
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, fmt.Sprintf("stream %q: Secret %s/%s does not exist yet: create it with %s", s.Name, ns, ref.Name, keys.Describe))
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s/%s: %w", ns, ref.Name, err)
		case !keys.Complete(secret.Data):
			out = append(out, fmt.Sprintf("stream %q: Secret %s/%s lacks %s", s.Name, ns, ref.Name, keys.Describe))
		}
	}
	return out, nil
}

// mayGetSecret asks the API server whether user may get Secret ns/name.
func (v *DatasetValidator) mayGetSecret(ctx context.Context, user authenticationv1.UserInfo, ns, name string) (bool, error) {
	if v.Access == nil {
		return false, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vs := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(vs)
	}
	review, err := v.Access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: name},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// indexProblems are what is wrong with spec.index: the streams it names
// must be the dataset's.
func indexProblems(spec *datav1alpha1.TrainingDatasetSpec) []string {
	x := spec.Index
	if x == nil {
		return nil
	}
	var problems []string
	for _, name := range x.Streams {
		if !slices.ContainsFunc(spec.Streams, func(s datav1alpha1.Stream) bool { return s.Name == name }) {
			problems = append(problems, fmt.Sprintf("spec.index.streams names %q, which is no stream of spec.streams", name))
		}
	}
	return problems
}
