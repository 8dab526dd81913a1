package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/planner"
)

func newPlanCommand(c *cluster) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "plan DATASET",
		Short: "Summarize a TrainingDataset's plan: streams, samples, steps per epoch, the cache a pod needs, its conditions and jobs",
		Args:  cobra.ExactArgs(1),
		RunE: c.runE(func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: use text or json", output)
			}
			s, err := readPlan(ctx, cl, ns, args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			return writePlan(cmd.OutOrStdout(), s)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// planSummary is what `plan` shows of a dataset.
type planSummary struct {
	Dataset         string                     `json:"dataset"`
	Namespace       string                     `json:"namespace"`
	Fingerprint     string                     `json:"fingerprint,omitempty"`
	Samples         int64                      `json:"samples"`
	NumSplits       int32                      `json:"numSplits"`
	GlobalBatchSize int64                      `json:"globalBatchSize"`
	StepsPerEpoch   int64                      `json:"stepsPerEpoch"`
	Streams         []configmaps.StreamDigest  `json:"streams,omitempty"`
	MinCacheBytes   map[int]int64              `json:"minCacheBytes,omitempty"`
	Conditions      []metav1.Condition         `json:"conditions,omitempty"`
	Jobs            []datav1alpha1.JobProgress `json:"jobs,omitempty"`
	// Indexed and Indexing are the operator's indexing (spec.index).
	Indexed  string                        `json:"indexed,omitempty"`
	Indexing []datav1alpha1.StreamIndexing `json:"indexing,omitempty"`
	spec     datav1alpha1.TrainingDatasetSpec
	// inputs are the plan's fingerprint with its inputs (the plan
	// ConfigMap's), to name what changed for a job on another plan.
	inputs planner.Fingerprint
}

// readPlan reads a dataset and its plan ConfigMap. A dataset not planned
// yet (no plan ConfigMap) is summarized from its status, its conditions
// saying why.
func readPlan(ctx context.Context, cl client.Client, ns, name string) (*planSummary, error) {
	ds := &datav1alpha1.TrainingDataset{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("TrainingDataset %s/%s not found (kubectl get tds -A lists them)", ns, name)
		}
		return nil, err
	}
	s := &planSummary{Dataset: name, Namespace: ns, Fingerprint: ds.Status.PlanFingerprint, Samples: ds.Status.Samples,
		NumSplits: ds.Spec.NumSplits, GlobalBatchSize: ds.Spec.GlobalBatchSize, StepsPerEpoch: ds.Status.StepsPerEpoch,
		Conditions: ds.Status.Conditions, Jobs: ds.Status.Jobs, Indexed: ds.Status.Indexed, Indexing: ds.Status.Indexing, spec: ds.Spec}
	cmName := ds.Status.PlanConfigMap
	if cmName == "" {
		cmName = configmaps.PlanName(name)
	}
	cm := &corev1.ConfigMap{}
	switch err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, cm); {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return nil, err
	}
	p, err := configmaps.PlanFromData(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("plan ConfigMap %s/%s: %w", ns, cmName, err)
	}
	s.Fingerprint, s.Streams, s.MinCacheBytes, s.spec, s.inputs = p.Fingerprint.Sum, p.Streams, p.MinCacheBytes, p.Spec, p.Fingerprint
	s.NumSplits, s.GlobalBatchSize = p.Spec.NumSplits, p.Spec.GlobalBatchSize
	return s, nil
}

func writePlan(out io.Writer, s *planSummary) error {
	r := &report{w: out}
	r.printf("TrainingDataset %s/%s\n", s.Namespace, s.Dataset)
	if s.Fingerprint == "" {
		r.println("  not planned yet: see its conditions below")
	} else {
		r.printf("  plan %s\n", s.Fingerprint)
	}
	r.printf("  %d samples, %d splits, global batch %d, %d steps per epoch\n", s.Samples, s.NumSplits, s.GlobalBatchSize, s.StepsPerEpoch)
	if len(s.Streams) > 0 {
		r.println("\nStreams:")
		rows := [][]string{{"NAME", "SHARDS", "SAMPLES", "BYTES", "LARGEST SHARD"}}
		for _, st := range s.Streams {
			rows = append(rows, []string{st.Name, strconv.Itoa(st.Shards), strconv.FormatInt(st.Samples, 10), bytesize.Human(st.Bytes), bytesize.Human(st.MaxShardBytes)})
		}
		r.table(rows)
	}
	if len(s.MinCacheBytes) > 0 {
		pods := make([]int, 0, len(s.MinCacheBytes))
		for n := range s.MinCacheBytes {
			pods = append(pods, n)
		}
		slices.Sort(pods)
		var parts []string
		for _, n := range pods[:min(len(pods), 8)] {
			parts = append(parts, strconv.Itoa(n)+": "+bytesize.Human(s.MinCacheBytes[n]))
		}
		more := ""
		if len(pods) > 8 {
			more = fmt.Sprintf(" (and %d more pod counts: -o json)", len(pods)-8)
		}
		r.printf("\nMinimum cache per pod, by pod count: %s%s\n", strings.Join(parts, ", "), more)
	}
	if len(s.Conditions) > 0 {
		r.println("\nConditions:")
		for _, c := range s.Conditions {
			r.printf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if len(s.Indexing) > 0 {
		r.printf("\nIndexing in the cluster (streams indexed %s):\n", s.Indexed)
		rows := [][]string{{"STREAM", "PHASE", "OBJECTS", "BYTES", "PARTS", "RATE", "ETA", "JOB"}}
		for _, x := range s.Indexing {
			rows = append(rows, []string{x.Name, x.Phase, fmt.Sprintf("%d/%d", x.ObjectsRead, x.Objects),
				bytesize.Human(x.BytesRead) + "/" + bytesize.Human(x.Bytes), fmt.Sprintf("%d/%d", x.PartsDone, x.Parts),
				cmpOr(x.Rate, "-"), cmpOr(x.ETA, "-"), cmpOr(x.Job, "-")})
		}
		r.table(rows)
	}
	if len(s.Jobs) > 0 {
		r.println("\nJobs (kubectl shardfeed progress " + s.Dataset + " JOB for one):")
		rows := [][]string{{"JOB", "EPOCH", "STEP", "PODS", "RANKS"}}
		for _, j := range s.Jobs {
			rows = append(rows, []string{j.Job, strconv.FormatInt(j.Epoch, 10), fmt.Sprintf("%d/%d", j.Step, s.StepsPerEpoch),
				strconv.Itoa(int(j.Pods)), strconv.Itoa(int(j.WorldSize))})
		}
		r.table(rows)
	}
	return r.err
}

func newManifestCommand(c *cluster) *cobra.Command {
	return &cobra.Command{
		Use:   "manifest DATASET",
		Short: "Print the TrainingDataset as its plan was made, for shardfeed plan -f - (the sample ids of a job's lineage: shardfeed plan --ids)",
		Args:  cobra.ExactArgs(1),
		RunE: c.runE(func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string) error {
			s, err := readPlan(ctx, cl, ns, args[0])
			if err != nil {
				return err
			}
			return writeManifest(cmd.OutOrStdout(), s)
		}),
	}
}

// writeManifest writes the spec the plan was made from (the plan
// ConfigMap's, which the sidecars plan with), as a manifest.
func writeManifest(out io.Writer, s *planSummary) error {
	ds := datav1alpha1.TrainingDataset{
		TypeMeta:   metav1.TypeMeta{APIVersion: datav1alpha1.GroupVersion.String(), Kind: "TrainingDataset"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Dataset, Namespace: s.Namespace},
		Spec:       s.spec,
	}
	b, err := yaml.Marshal(ds)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// cmpOr is s, or dflt where s is empty.
func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
