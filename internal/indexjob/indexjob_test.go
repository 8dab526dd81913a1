package indexjob

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexparts/jobrecords"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

func dataset(index *datav1alpha1.IndexJob) *datav1alpha1.TrainingDataset {
	return &datav1alpha1.TrainingDataset{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", UID: "uid-1"},
		Spec: datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{
				{Name: "pages", Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: "s3://data/pages/",
					CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "reader"}}},
				{Name: "chat", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "s3://data/chat/",
					WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "s3-reader"}}},
			},
			Index: index,
			// What a dataset's author sets elsewhere reaches no Job.
			Sidecar: datav1alpha1.SidecarSpec{Image: "evil.example/sidecar:1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}},
		},
	}
}

func minimal() *datav1alpha1.IndexJob {
	return &datav1alpha1.IndexJob{WriteCredentialsSecretRef: datav1alpha1.SecretReference{Name: "writer"}}
}

func TestEachPhaseRunsItsStepOfTheStreamWithTheOperatorsImage(t *testing.T) {
	for _, tc := range []struct {
		phase       Phase
		parts       int32
		completions int32
		wantArgs    []string
	}{
		{Whole, 0, 1, []string{"--record-run", "team-a." + JobName("web", "pages", List), "--index-only"}},
		{List, 0, 1, []string{"--list-parts", "4", "--record-run", "team-a." + JobName("web", "pages", List)}},
		{Parts, 7, 7, []string{"--part", "$(JOB_COMPLETION_INDEX)", "--run", testRun, "--record-run", "team-a." + JobName("web", "pages", List)}},
		{Merge, 7, 1, []string{"--merge-parts", "--run", testRun, "--record-run", "team-a." + JobName("web", "pages", List), "--index-only"}},
		{Measure, 5, 5, []string{"--measure-parts", "5", "--record-run", "team-a." + JobName("web", "pages", List), "--part", "$(JOB_COMPLETION_INDEX)"}},
		{Join, 5, 1, []string{"--measure-parts", "5", "--record-run", "team-a." + JobName("web", "pages", List), "--merge-parts"}},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			job, err := Build(Input{Dataset: dataset(minimal()), Stream: 0, Phase: tc.phase, Parts: tc.parts, Run: testRun, Measuring: "m1",
				Image: "ghcr.io/shardfeed/shardfeed:0.1.0"})
			if err != nil {
				t.Fatal(err)
			}
			measuring := tc.phase == Measure || tc.phase == Join
			if got := MeasuringOf(job); (got == "m1") != measuring {
				t.Errorf("the Job's measuring is %q", got)
			}
			if got := PartsOf(job); (got != nil && *got == 5) != measuring {
				t.Errorf("the Job's measuring parts are %v", got)
			}
			if job.Name != JobName("web", "pages", tc.phase) || job.Namespace != "team-a" {
				t.Errorf("the Job is %s/%s", job.Namespace, job.Name)
			}
			if o := job.OwnerReferences; len(o) != 1 || o[0].UID != "uid-1" || o[0].Kind != "TrainingDataset" || !ptr.Deref(o[0].Controller, false) {
				t.Errorf("the Job's owner is %+v, want the dataset as its controller", o)
			}
			if *job.Spec.Completions != tc.completions || *job.Spec.Parallelism != tc.completions {
				t.Errorf("completions %d, parallelism %d; want %d", *job.Spec.Completions, *job.Spec.Parallelism, tc.completions)
			}
			c := job.Spec.Template.Spec.Containers[0]
			if c.Image != "ghcr.io/shardfeed/shardfeed:0.1.0" || !slices.Equal(c.Command, []string{"/shardfeed"}) {
				t.Errorf("the container runs %s %v", c.Image, c.Command)
			}
			head := []string{"index", "-f", ManifestDir + "/" + ManifestKey, "--stream", "pages"}
			if !slices.Equal(c.Args[:len(head)], head) || !slices.Equal(c.Args[len(c.Args)-len(tc.wantArgs):], tc.wantArgs) {
				t.Errorf("args %q, want %q … %q", c.Args, head, tc.wantArgs)
			}
			if got := job.Spec.Template.Labels; got[LabelDataset] != "web" || got[LabelStream] != "pages" || got[LabelPhase] != string(tc.phase) {
				t.Errorf("the pods' labels are %v", got)
			}
		})
	}
}

// A dataset's author shapes the Job through spec.index's fields alone:
// a dataset setting every one of them gives the Job of a minimal one with
// those fields, and nothing else, changed.
func TestOnlySpecIndexsDocumentedFieldsReachTheJob(t *testing.T) {
	rich := minimal()
	rich.Parallelism = ptr.To(int32(9))
	rich.Concurrency = ptr.To(int32(64))
	rich.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	rich.NodeSelector = map[string]string{"pool": "cpu"}
	rich.Tolerations = []corev1.Toleration{{Key: "cpu-only", Operator: corev1.TolerationOpExists}}
	rich.PriorityClassName = "batch-low"
	rich.TTLSecondsAfterFinished = ptr.To(int32(60))
	in := Input{Dataset: dataset(minimal()), Phase: List, Image: "img"}
	base, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Dataset = dataset(rich)
	got, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	want := base.DeepCopy()
	pod := &want.Spec.Template.Spec
	pod.NodeSelector = map[string]string{"pool": "cpu"}
	pod.Tolerations = rich.Tolerations
	pod.PriorityClassName = "batch-low"
	pod.Containers[0].Resources = rich.Resources
	args := pod.Containers[0].Args
	args[slices.Index(args, "--concurrency")+1] = "64"
	args[slices.Index(args, "--list-parts")+1] = "9"
	want.Spec.TTLSecondsAfterFinished = ptr.To(int32(60))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the Job of a dataset setting every field of spec.index differs from the minimal one's beyond them:\n got %+v\nwant %+v", got.Spec, want.Spec)
	}
}

func TestThePodsAreRestrictedAndHoldNoAPIToken(t *testing.T) {
	job, err := Build(Input{Dataset: dataset(minimal()), Stream: 0, Phase: Parts, Parts: 2, Run: testRun, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	if !ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod's security context is %+v", pod.SecurityContext)
	}
	if ptr.Deref(pod.AutomountServiceAccountToken, true) || ptr.Deref(pod.EnableServiceLinks, true) || pod.HostNetwork || pod.HostPID || pod.ServiceAccountName != "default" {
		t.Error("the pod mounts an API token, takes service links, shares the node's namespaces or runs as another ServiceAccount")
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the container's security context is %+v", sc)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/tmp" && !m.ReadOnly {
			t.Errorf("%s is mounted writable", m.MountPath)
		}
	}
	secrets := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
		if v.Projected != nil {
			t.Errorf("the pod of a stream read with a Secret projects a token: %+v", v)
		}
	}
	if !reflect.DeepEqual(secrets, map[string]string{"write-credentials": "writer", "credentials": "reader"}) {
		t.Errorf("the pod mounts the Secrets %v: want the stream's reader and spec.index's writer alone", secrets)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == sidecarconfig.CredentialsDir+"/reader" }) {
		t.Errorf("the stream's Secret is not where --credentials-dir reads it: %+v", c.VolumeMounts)
	}
}

// A tokenizer of a ConfigMap is mounted, read-only, where the Measure
// pods count the tokens (--configmaps-dir), and in no other phase's pods:
// the Join has the counts.
func TestTheMeasurePodsReadTheTokenizersConfigMap(t *testing.T) {
	ds := dataset(minimal())
	ds.Spec.Tokenize = &datav1alpha1.Tokenize{Column: "text",
		Tokenizer: datav1alpha1.TokenizerFile{ConfigMapRef: &datav1alpha1.ConfigMapKey{Name: "llama-tok", Key: "tokenizer.json"}}}
	for _, phase := range Phases {
		job, err := Build(Input{Dataset: ds, Phase: phase, Parts: 2, Run: testRun, Measuring: "m", Image: "img"})
		if err != nil {
			t.Fatal(err)
		}
		pod := job.Spec.Template.Spec
		mounted := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == "llama-tok" })
		at := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == sidecarconfig.ConfigMapsDir+"/llama-tok" && m.ReadOnly
		})
		flag := slices.Contains(pod.Containers[0].Args, "--configmaps-dir")
		if want := phase == Measure; mounted != want || at != want || flag != want {
			t.Errorf("%s: the ConfigMap mounted %v, read-only at %s/llama-tok %v, --configmaps-dir %v; want %v", phase, mounted, sidecarconfig.ConfigMapsDir, at, flag, want)
		}
	}
}

func TestAStreamReadWithAWorkloadIdentityRunsAsItsServiceAccount(t *testing.T) {
	job, err := Build(Input{Dataset: dataset(minimal()), Stream: 1, Phase: List, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	var audiences []string
	for _, v := range pod.Volumes {
		if v.Projected != nil {
			for _, p := range v.Projected.Sources {
				audiences = append(audiences, p.ServiceAccountToken.Audience)
			}
		}
	}
	if pod.ServiceAccountName != "s3-reader" || !slices.Equal(audiences, []string{"sts.amazonaws.com"}) || ptr.Deref(pod.AutomountServiceAccountToken, true) {
		t.Errorf("runs as %q with tokens for %v (automount %v): want s3-reader, a token for AWS STS alone", pod.ServiceAccountName, audiences, pod.AutomountServiceAccountToken)
	}
	// The CLI finds the stream's token where it is mounted.
	args := pod.Containers[0].Args
	if i := slices.Index(args, "--identity-dir"); i < 0 || args[i+1] != workloadidentity.TokenDir {
		t.Errorf("args %q: want --identity-dir %s, where the token is mounted", args, workloadidentity.TokenDir)
	}
	if plain, _ := Build(Input{Dataset: dataset(minimal()), Stream: 0, Phase: List, Image: "img"}); slices.Contains(plain.Spec.Template.Spec.Containers[0].Args, "--identity-dir") {
		t.Error("a stream read with keys is given --identity-dir")
	}
	// An audience of the author's choosing is refused here too, even past
	// the validating webhook: the API server's would be a credential of
	// the ServiceAccount itself.
	ds := dataset(minimal())
	ds.Spec.Streams[1].Source.WorkloadIdentity.Audience = "https://kubernetes.default.svc"
	if _, err := Build(Input{Dataset: ds, Stream: 1, Phase: List, Image: "img"}); err == nil || !strings.Contains(err.Error(), "API server") {
		t.Errorf("a token for the API server's audience: error %v", err)
	}
}

func TestAQueuedOrSuspendedIndexStartsSuspended(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(*datav1alpha1.IndexJob)
		suspend bool
		queue   string
	}{
		{"plain", func(*datav1alpha1.IndexJob) {}, false, ""},
		{"suspended", func(x *datav1alpha1.IndexJob) { x.Suspend = true }, true, ""},
		{"queued, for Kueue to admit", func(x *datav1alpha1.IndexJob) { x.QueueName = "cpu-batch" }, true, "cpu-batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := minimal()
			tc.set(x)
			job, err := Build(Input{Dataset: dataset(x), Phase: Merge, Run: testRun, Image: "img"})
			if err != nil {
				t.Fatal(err)
			}
			if *job.Spec.Suspend != tc.suspend || job.Labels[LabelQueue] != tc.queue {
				t.Errorf("suspend %v, queue label %q; want %v, %q", *job.Spec.Suspend, job.Labels[LabelQueue], tc.suspend, tc.queue)
			}
			if _, onPods := job.Spec.Template.Labels[LabelQueue]; onPods {
				t.Error("the queue label is on the pods: Kueue reads it from the Job")
			}
		})
	}
}

func TestBuildRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"no spec.index", Input{Dataset: dataset(nil), Phase: List, Image: "img"}, "no spec.index"},
		{"no such stream", Input{Dataset: dataset(minimal()), Stream: 2, Phase: List, Image: "img"}, "no stream 2"},
		{"no image", Input{Dataset: dataset(minimal()), Phase: List}, "no image"},
		{"no parts", Input{Dataset: dataset(minimal()), Phase: Parts, Run: testRun, Image: "img"}, "0 parts"},
		{"too many parts", Input{Dataset: dataset(minimal()), Phase: Parts, Parts: MaxParts + 1, Run: testRun, Image: "img"}, "257 parts"},
		{"no run", Input{Dataset: dataset(minimal()), Phase: Merge, Parts: 2, Image: "img"}, "recorded no run"},
		{"a run that is no run", Input{Dataset: dataset(minimal()), Phase: Parts, Parts: 2, Run: "../../x", Image: "img"}, "recorded no run"},
		{"no such phase", Input{Dataset: dataset(minimal()), Phase: "all", Run: testRun, Image: "img"}, `no indexing phase "all"`},
		{"a measuring unnamed", Input{Dataset: dataset(minimal()), Phase: Measure, Parts: 2, Image: "img"}, "no measuring named"},
		{"no ranges", Input{Dataset: dataset(minimal()), Phase: Join, Measuring: "m", Image: "img"}, "0 ranges of shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestNamesAreValidAndInjective(t *testing.T) {
	long := strings.Repeat("d", 253)
	seen := map[string]string{}
	for _, tc := range [][2]string{{"a-b", "c"}, {"a", "b-c"}, {long, "s"}, {long[:252], "s"}, {"web", "pages"}, {"web", strings.Repeat("s", 63)}} {
		for _, phase := range []Phase{List, Parts, Merge} {
			name := JobName(tc[0], tc[1], phase)
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("JobName(%.20s…, %s, %s) = %q: %v", tc[0], tc[1], phase, name, errs)
			}
			key := tc[0] + "/" + tc[1] + "/" + string(phase)
			if other, ok := seen[name]; ok {
				t.Errorf("%s and %s share the Job name %s", key, other, name)
			}
			seen[name] = key
		}
	}
	if ManifestConfigMap("a") == ManifestConfigMap("b") || len(ManifestConfigMap(long)) > 63 {
		t.Error("the manifest's ConfigMap names are not injective or too long")
	}
}

// testRun is a run as shardfeed index --list-parts names one.
const testRun = "0123456789abcdef"

func TestThePartsAndMergeJobsSayTheirRun(t *testing.T) {
	x := minimal()
	x.Parallelism = ptr.To(int32(7))
	list, err := Build(Input{Dataset: dataset(x), Phase: List, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range []Phase{Parts, Merge} {
		job, err := Build(Input{Dataset: dataset(x), Phase: phase, Parts: 7, Run: testRun, Image: "img"})
		if err != nil {
			t.Fatal(err)
		}
		if got := RunOf(job); got != testRun {
			t.Errorf("the %s Job's run is %q, want %s", phase, got, testRun)
		}
	}
	if got := RunOf(list); got != "" {
		t.Errorf("the list Job says it has run %q", got)
	}
	check, err := Build(Input{Dataset: dataset(x), Phase: List, Image: "img", IfChanged: true})
	if err != nil {
		t.Fatal(err)
	}
	if IsCheck(list) || !IsCheck(check) || !slices.Contains(check.Spec.Template.Spec.Containers[0].Args, "--if-changed") {
		t.Errorf("a listing is a check: %v; a check: %v", IsCheck(list), IsCheck(check))
	}
	if name := RunName(dataset(x), "pages"); jobrecords.CheckName(name) != nil {
		t.Errorf("RunName %q is not a name the CLI takes: %v", name, jobrecords.CheckName(name))
	}
}

func TestThePodsCheckEveryRequestAgainstThePlatformsEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		cloud   bool
		want    map[string]string
	}{
		{"none: none checked, as the manager", nil, false, map[string]string{}},
		{"listed and the clouds'", []string{"minio.storage:9000", "10.0.0.0/8"}, true,
			map[string]string{sidecarconfig.EnvAllowedEndpoints: "minio.storage:9000,10.0.0.0/8", sidecarconfig.EnvAllowCloudEndpoints: "true"}},
		{"the clouds' alone", nil, true, map[string]string{sidecarconfig.EnvAllowedEndpoints: "", sidecarconfig.EnvAllowCloudEndpoints: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := Build(Input{Dataset: dataset(minimal()), Phase: List, Image: "img", AllowedEndpoints: tc.allowed, AllowCloudEndpoints: tc.cloud})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range job.Spec.Template.Spec.Containers[0].Env {
				got[e.Name] = e.Value
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("env %v, want %v", got, tc.want)
			}
		})
	}
}

// A stream is indexed in parts exactly where its format's indexer says it
// can be (a hive tree never yet); the others in one pod.
func TestInPartsIsTheFormatsOwnWord(t *testing.T) {
	reg := formats.Default()
	kinds := append(reg.Kinds(format.IndexesObjects), reg.Kinds(format.IsTable)...)
	if len(kinds) < 10 {
		t.Fatalf("the registry has %d formats", len(kinds))
	}
	for _, kind := range kinds {
		for _, hive := range []bool{false, true} {
			ds := dataset(minimal())
			ds.Spec.Streams[0].Format = datav1alpha1.ShardFormat(kind)
			if hive {
				ds.Spec.Streams[0].Partitions = &datav1alpha1.Partitions{}
			}
			if got, want := InParts(ds, 0), reg.IndexesInParts(datav1alpha1.ShardFormat(kind), hive); got != want {
				t.Errorf("%s (hive %v): indexed in parts %v, its indexer says %v", kind, hive, got, want)
			}
		}
	}
}
