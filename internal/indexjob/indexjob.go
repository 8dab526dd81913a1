// Package indexjob builds the Kubernetes Jobs that index a dataset's
// streams in the cluster (spec.index). Every field of such a Job is
// decided here: the image, the command, the mounts and the identity are
// the operator's, and of the dataset only spec.index's documented fields
// reach the Job (resources, placement, priority, queue, lifetime). A
// dataset's author creates no Job and chooses nothing else of it.
package indexjob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexparts"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// Phase is a step of a stream's indexing; each is a Job of its own, the
// next created when the one before it completed.
type Phase string

// The phases, in order.
const (
	// Whole indexes a stream that is not indexed in parts (InParts) in
	// one pod.
	Whole Phase = "whole"
	// List lists the stream's objects once and plans the parts.
	List Phase = "list"
	// Parts indexes the parts, one pod per part (an Indexed Job).
	Parts Phase = "parts"
	// Merge merges the parts into the stream's index.
	Merge Phase = "merge"
	// Measure measures the filter's selection, the lengths and the token
	// counts of an indexed stream, a range of its shards a pod (an
	// Indexed Job); Join joins them beside the index, with the buckets
	// and packs.
	Measure Phase = "measure"
	Join    Phase = "join"
)

// Phases are the phases, in order.
var Phases = []Phase{Whole, List, Parts, Merge, Measure, Join}

// InParts says whether stream i is indexed in parts (the List, Parts and
// Merge phases): a stream whose index is of its objects one by one (as
// format.Registry.IndexesInParts says of its format); the others (a
// table's, a format's own index, objects indexed together, a
// hive-partitioned tree) are indexed in one pod (Whole).
func InParts(ds *datav1alpha1.TrainingDataset, i int) bool {
	s := ds.Spec.Streams[i]
	return s.Partitions == nil && slices.Contains(InPartsFormats, s.Format)
}

// InPartsFormats are the formats indexed in parts.
var InPartsFormats = []datav1alpha1.ShardFormat{datav1alpha1.FormatParquet, datav1alpha1.FormatJSONL, datav1alpha1.FormatCSV,
	datav1alpha1.FormatTSV, datav1alpha1.FormatArrow, datav1alpha1.FormatORC, datav1alpha1.FormatMegatron}

// Labels of an indexing Job and its pods.
const (
	LabelDataset = "shardfeed.io/indexing-dataset"
	LabelStream  = "shardfeed.io/indexing-stream"
	LabelPhase   = "shardfeed.io/indexing-phase"
	// LabelQueue is Kueue's: the LocalQueue that admits the Job.
	LabelQueue = "kueue.x-k8s.io/queue-name"
	// AnnotationMeasuring is a Measure or Join Job's Input.Measuring.
	AnnotationMeasuring = "shardfeed.io/measuring"
)

// Where an indexing pod finds what it reads.
const (
	// ManifestDir holds the dataset's manifest (ManifestKey) from the
	// ConfigMap the operator writes (ManifestConfigMap).
	ManifestDir = "/etc/shardfeed/dataset"
	ManifestKey = "dataset.yaml"
	// WriteCredentialsDir holds spec.index.writeCredentialsSecretRef's
	// keys; the streams' own are under sidecarconfig.CredentialsDir, one
	// folder per Secret, as in a sidecar.
	WriteCredentialsDir = "/var/run/shardfeed-write-credentials"
	// ContainerName is the indexing pods' one container.
	ContainerName = "index"
	// UID is the user and group the pods run as (the image's nonroot
	// user); the mounted Secrets are readable by the group (0440).
	UID = int64(65532)
)

// Input is what a Job is built from.
type Input struct {
	Dataset *datav1alpha1.TrainingDataset
	// Stream is the stream's index in spec.streams.
	Stream int
	Phase  Phase
	// Parts is the Parts phase's pods (the parts the listing cut), or the
	// Measure and Join phases' ranges of shards.
	Parts int32
	// Measuring names what the Measure and Join phases measure (the
	// index and the stream's filter, packing, bucketing and tokenize):
	// their Jobs carry it, so that a Job of an earlier measuring is told
	// from the one due.
	Measuring string
	// Run is the run the Parts and Merge phases index and merge: the one
	// the listing recorded under RunName.
	Run string
	// IfChanged makes the List phase a check of an indexed stream: it
	// cuts no run where the listing is the index's (spec.index.recheckEvery).
	IfChanged bool
	// Image is the operator's sidecar image (its own, or the dataset's
	// within the platform's allow-list): the pods receive credentials.
	Image       string
	PullSecrets []string
	// Audiences are the workload identity audiences the platform allows.
	Audiences []string
	// AllowedEndpoints and AllowCloudEndpoints are the platform's endpoint
	// policy, which the pods check every request and address against, as
	// sidecars do (sidecarconfig.EnvAllowedEndpoints).
	AllowedEndpoints    []string
	AllowCloudEndpoints bool
}

// MaxParts bounds an Indexed Job's completions here.
const MaxParts = 256

// ManifestConfigMap names the ConfigMap holding the dataset's manifest
// for its indexing pods.
func ManifestConfigMap(dataset string) string { return boundedName("-index", dataset) }

// JobName names a stream's Job of a phase: injective in the dataset, the
// stream and the phase, within a Job name's 63 characters (the Job's pods
// carry it in a label).
func JobName(dataset, stream string, phase Phase) string {
	return boundedName("-index-"+string(phase), dataset, stream)
}

// RunName is the name under which a stream's listing Job records its run
// (shardfeed index --record-run) for the operator to read: the namespace
// and the Job's name, unique among the datasets sharing an index store.
func RunName(ds *datav1alpha1.TrainingDataset, stream string) string {
	return ds.Namespace + "." + JobName(ds.Name, stream, List)
}

// boundedName is the parts joined by "-", cut to fit 63 characters with
// suffix, a hash of the parts (each length-prefixed, so that "a-b", "c"
// and "a", "b-c" differ) between them.
func boundedName(suffix string, parts ...string) string {
	const maxLen = 63
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p + ";"))
	}
	sum := hex.EncodeToString(h.Sum(nil))[:10]
	prefix := strings.Join(parts, "-")
	keep := min(len(prefix), maxLen-len(suffix)-len(sum)-1)
	return strings.TrimRight(prefix[:keep], "-.") + "-" + sum + suffix
}

// Build returns the Job of in's phase, or an error saying what of the
// dataset keeps it from running.
func Build(in Input) (*batchv1.Job, error) {
	ds := in.Dataset
	spec := ds.Spec.Index
	if spec == nil {
		return nil, errors.New("the dataset has no spec.index")
	}
	if in.Stream < 0 || in.Stream >= len(ds.Spec.Streams) {
		return nil, fmt.Errorf("no stream %d in spec.streams", in.Stream)
	}
	if in.Image == "" {
		return nil, errors.New("no image for the indexing pods")
	}
	s := ds.Spec.Streams[in.Stream]
	args, completions, err := phaseArgs(in, s.Name, spec)
	if err != nil {
		return nil, err
	}
	pod, err := podSpec(in, s, spec, args)
	if err != nil {
		return nil, err
	}
	var annotations map[string]string
	if in.Phase == Measure || in.Phase == Join {
		if in.Measuring == "" {
			return nil, errors.New("no measuring named for the measuring Jobs")
		}
		annotations = map[string]string{AnnotationMeasuring: in.Measuring}
	}
	labels := map[string]string{LabelDataset: ds.Name, LabelStream: s.Name, LabelPhase: string(in.Phase)}
	jobLabels := maps.Clone(labels)
	if spec.QueueName != "" {
		jobLabels[LabelQueue] = spec.QueueName
	}
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(ds.Name, s.Name, in.Phase), Namespace: ds.Namespace, Labels: jobLabels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))},
		},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions),
			Parallelism: ptr.To(completions),
			// A pod that fails is retried on its own part; the parts
			// written stay, so a retry goes on from them.
			BackoffLimitPerIndex:    ptr.To(int32(3)),
			CompletionMode:          ptr.To(batchv1.IndexedCompletion),
			TTLSecondsAfterFinished: ptr.To(ptr.Deref(spec.TTLSecondsAfterFinished, datav1alpha1.DefaultIndexJobTTL)),
			// Kueue admits a queued Job by unsuspending it.
			Suspend: ptr.To(spec.Suspend || spec.QueueName != ""),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
	return job, nil
}

// phaseArgs are the pods' arguments of in's phase and the Job's
// completions.
func phaseArgs(in Input, stream string, spec *datav1alpha1.IndexJob) ([]string, int32, error) {
	args := []string{"index", "-f", ManifestDir + "/" + ManifestKey, "--stream", stream,
		"--credentials-dir", sidecarconfig.CredentialsDir, "--write-credentials-dir", WriteCredentialsDir,
		"--concurrency", strconv.Itoa(int(ptr.Deref(spec.Concurrency, datav1alpha1.DefaultIndexConcurrency)))}
	if s := in.Dataset.Spec.Streams[in.Stream]; s.Source.WorkloadIdentity != nil {
		args = append(args, "--identity-dir", workloadidentity.TokenDir)
	}
	name := RunName(in.Dataset, stream)
	if in.Phase == Whole {
		// The index alone, in one run; the Measure Jobs measure beside it.
		return append(args, "--record-run", name, "--index-only"), 1, nil
	}
	if in.Phase == List {
		parts := ptr.Deref(spec.Parallelism, datav1alpha1.DefaultIndexParallelism)
		args = append(args, "--list-parts", strconv.Itoa(int(parts)), "--record-run", name)
		if in.IfChanged {
			args = append(args, "--if-changed")
		}
		return args, 1, nil
	}
	if in.Phase == Measure || in.Phase == Join {
		if in.Parts < 1 || in.Parts > MaxParts {
			return nil, 0, fmt.Errorf("%d ranges of shards to measure: 1 to %d", in.Parts, MaxParts)
		}
		args = append(args, "--measure-parts", strconv.Itoa(int(in.Parts)), "--record-run", name)
		if in.Phase == Join {
			return append(args, "--merge-parts"), 1, nil
		}
		if tokenizerConfigMap(in.Dataset, in.Stream) != "" {
			args = append(args, "--configmaps-dir", sidecarconfig.ConfigMapsDir)
		}
		return append(args, "--part", "$(JOB_COMPLETION_INDEX)"), in.Parts, nil
	}
	if err := indexparts.CheckRun(in.Run); err != nil {
		return nil, 0, fmt.Errorf("the listing recorded no run: %w", err)
	}
	switch in.Phase {
	case Parts:
		if in.Parts < 1 || in.Parts > MaxParts {
			return nil, 0, fmt.Errorf("the listing planned %d parts: 1 to %d", in.Parts, MaxParts)
		}
		// Each pod's part is its completion index (the Job controller
		// sets JOB_COMPLETION_INDEX).
		return append(args, "--part", "$(JOB_COMPLETION_INDEX)", "--run", in.Run, "--record-run", name), in.Parts, nil
	case Merge:
		// The index alone: what is measured beside it, the Measure Jobs
		// measure in parts.
		return append(args, "--merge-parts", "--run", in.Run, "--record-run", name, "--index-only"), 1, nil
	}
	return nil, 0, fmt.Errorf("no indexing phase %q", in.Phase)
}

func tokenizeOf(ds *datav1alpha1.TrainingDataset, i int) *datav1alpha1.Tokenize {
	if t := ds.Spec.Streams[i].Tokenize; t != nil {
		return t
	}
	return ds.Spec.Tokenize
}

// tokenizerConfigMap is the ConfigMap stream i's tokenizer is read from,
// "" where it is read from a store.
func tokenizerConfigMap(ds *datav1alpha1.TrainingDataset, i int) string {
	if t := tokenizeOf(ds, i); t != nil && t.Tokenizer.ConfigMapRef != nil {
		return t.Tokenizer.ConfigMapRef.Name
	}
	return ""
}

// PartsOf is the ranges a Measure or Join Job's measuring cut (its
// --measure-parts), nil for another Job.
func PartsOf(job *batchv1.Job) *int32 {
	for _, c := range job.Spec.Template.Spec.Containers {
		if i := slices.Index(c.Args, "--measure-parts"); i >= 0 && i+1 < len(c.Args) {
			if n, err := strconv.ParseInt(c.Args[i+1], 10, 32); err == nil && n > 0 && n <= MaxParts {
				return ptr.To(int32(n))
			}
		}
	}
	return nil
}

// MeasuringOf is what a Measure or Join Job measures (Input.Measuring).
func MeasuringOf(job *batchv1.Job) string { return job.Annotations[AnnotationMeasuring] }

// IsCheck says whether a List Job checks an indexed stream (--if-changed).
func IsCheck(job *batchv1.Job) bool {
	for _, c := range job.Spec.Template.Spec.Containers {
		if slices.Contains(c.Args, "--if-changed") {
			return true
		}
	}
	return false
}

// RunOf is the run a Parts or Merge Job indexes (its --run), "" for
// another Job.
func RunOf(job *batchv1.Job) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		if i := slices.Index(c.Args, "--run"); i >= 0 && i+1 < len(c.Args) && indexparts.CheckRun(c.Args[i+1]) == nil {
			return c.Args[i+1]
		}
	}
	return ""
}

// podSpec is the indexing pods' spec: the restricted Pod Security level,
// no API token, the stream's read credentials and the write credentials
// mounted read-only, and of the dataset spec.index's placement and
// resources only.
func podSpec(in Input, s datav1alpha1.Stream, spec *datav1alpha1.IndexJob, args []string) (corev1.PodSpec, error) {
	ds := in.Dataset
	volumes := []corev1.Volume{
		{Name: "manifest", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ManifestConfigMap(ds.Name)},
			Items:                []corev1.KeyToPath{{Key: ManifestKey, Path: ManifestKey}}}}},
		{Name: "write-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: spec.WriteCredentialsSecretRef.Name, DefaultMode: ptr.To(int32(0o440))}}},
		// The pods write nothing but to the store: a small scratch
		// folder for the CLI's temporary files.
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "manifest", MountPath: ManifestDir, ReadOnly: true},
		{Name: "write-credentials", MountPath: WriteCredentialsDir, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	serviceAccount := "default"
	if ref := s.Source.CredentialsSecretRef; ref != nil {
		volumes = append(volumes, corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: ref.Name, DefaultMode: ptr.To(int32(0o440))}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "credentials", MountPath: sidecarconfig.CredentialsDir + "/" + ref.Name, ReadOnly: true})
	}
	if wi := s.Source.WorkloadIdentity; wi != nil {
		// Checked here too: a dataset admitted past the validating
		// webhook must not get a token for an audience of its choosing.
		if err := workloadidentity.CheckAudience(s.Source.URI, workloadidentity.Audience(s.Source), in.Audiences); err != nil {
			return corev1.PodSpec{}, fmt.Errorf("spec.streams[%d] (%q): %w", in.Stream, s.Name, err)
		}
		serviceAccount = wi.ServiceAccountName
		volumes = append(volumes, corev1.Volume{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o440)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: workloadidentity.Audience(s.Source), ExpirationSeconds: ptr.To(int64(workloadidentity.TokenExpiry)), Path: s.Name}}}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "identity", MountPath: workloadidentity.TokenDir, ReadOnly: true})
	}
	if cm := tokenizerConfigMap(ds, in.Stream); cm != "" && in.Phase == Measure {
		// The tokenizer of a ConfigMap, as a sidecar mounts it.
		volumes = append(volumes, corev1.Volume{Name: "tokenizer", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "tokenizer", MountPath: sidecarconfig.ConfigMapsDir + "/" + cm, ReadOnly: true})
	}
	var env []corev1.EnvVar
	if len(in.AllowedEndpoints) > 0 || in.AllowCloudEndpoints {
		env = []corev1.EnvVar{{Name: sidecarconfig.EnvAllowedEndpoints, Value: strings.Join(in.AllowedEndpoints, ",")},
			{Name: sidecarconfig.EnvAllowCloudEndpoints, Value: strconv.FormatBool(in.AllowCloudEndpoints)}}
	}
	var pullSecrets []corev1.LocalObjectReference
	for _, name := range in.PullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           serviceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		ImagePullSecrets:             pullSecrets,
		NodeSelector:                 maps.Clone(spec.NodeSelector),
		Tolerations:                  append([]corev1.Toleration(nil), spec.Tolerations...),
		PriorityClassName:            spec.PriorityClassName,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(UID), RunAsGroup: ptr.To(UID), FSGroup: ptr.To(UID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: volumes,
		Containers: []corev1.Container{{
			Name:         ContainerName,
			Image:        in.Image,
			Command:      []string{"/shardfeed"},
			Args:         args,
			Env:          env,
			Resources:    *spec.Resources.DeepCopy(),
			VolumeMounts: mounts,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(UID),
				ReadOnlyRootFilesystem:   ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}, nil
}
