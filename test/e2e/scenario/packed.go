package scenario

import (
	"context"
	"fmt"
	"time"
)

// packedNamespace is the packed story's namespace.
const packedNamespace = "e2e-packed"

// packedStory trains a packed dataset (spec.packing) on the cluster: both
// streams' token lists packed into sequences of 16 tokens, their packs
// counted beside their indexes; a Job of 2 pods loses one mid-epoch and is
// rescaled to 1, and the committed lineage of packs is `plan --ids`'s,
// each pack exactly once.
func (c *Cluster) packedStory(ctx context.Context, rep *Report) error {
	c.Step("A packed dataset in namespace %s: both streams' token lists packed into sequences of 16 tokens (spec.packing), their packs counted by shardfeed index --lengths tokens --pack-length 16", packedNamespace)
	e, err := c.NewEnv(ctx, packedNamespace, DatasetOptions{Samples: c.o.Samples, NumSplits: numSplits, GlobalBatchSize: 8, BlockSize: 64,
		CommitEvery: commitEvery, StepTime: 3 * c.o.StepTime, PackLength: 16})
	if err != nil {
		return err
	}
	ds, err := e.Dataset(ctx)
	if err != nil {
		return err
	}
	rep.PackedSamples = ds.Status.Samples
	c.Detail("Ready: %d packs of %d documents", ds.Status.Samples, 2*c.o.Samples)
	job, err := e.StartJob(ctx, 2)
	if err != nil {
		return err
	}
	if err := e.WaitPodsRunning(ctx, job, 2); err != nil {
		return err
	}
	at, err := e.WaitCommitted(ctx, 2*commitEvery)
	if err != nil {
		return err
	}
	c.Step("Deleting pod 1 of %s-2 at committed step %d", jobName, at)
	if err := e.DeletePod(ctx, job, 1); err != nil {
		return err
	}
	if at, err = e.WaitCommitted(ctx, at+2*commitEvery); err != nil {
		return err
	}
	c.Step("Rescaling the packed job to 1 pod at committed step %d", at)
	second, err := e.Rescale(ctx, job, 1)
	if err != nil {
		return err
	}
	if err := e.WaitJobDone(ctx, second, 5*time.Minute); err != nil {
		return err
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.Packed, err = e.CheckLineage(ctx, st); err != nil {
		return fmt.Errorf("the packed job's lineage: %w", err)
	}
	c.Detail("packs: %s", rep.Packed.Summary())
	return nil
}
