package scenario

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// lerobotNamespace is the LeRobot story's namespace.
const lerobotNamespace = "e2e-lerobot"

// lerobotWindows are the story's stream's windows: the state and two of
// the three cameras (AV1, as LeRobot writes them) a frame back and now.
const lerobotWindows = `lerobot: {deltaTimestamps: [{key: observation.state, seconds: ["-0.1", "0"]}, ` +
	`{key: observation.images.front, seconds: ["-0.1", "0"]}, {key: observation.images.wrist, seconds: ["0"]}]}`

// lerobotStory trains from a LeRobot dataset written by LeRobot's own
// writer (the golden multicam one: 5 episodes, 150 frames, three AV1
// cameras): the sidecars decode the cameras' windows (the image's sidecar
// links FFmpeg). A Job of 4 pods loses a sidecar mid-epoch and is rescaled
// to 2, and the committed lineage of frame indices is `plan --ids`'s, each
// frame exactly once.
func (c *Cluster) lerobotStory(ctx context.Context, rep *Report) error {
	src := filepath.Join(c.o.Root, "sidecar", "format", "lerobot", "testdata", "golden", "multicam")
	c.Step("A LeRobot dataset in namespace %s: LeRobot's multicam (5 episodes, 150 frames, three AV1 cameras), windows of the state and two cameras", lerobotNamespace)
	e, err := c.NewEnv(ctx, lerobotNamespace, DatasetOptions{LeRobot: src, LeRobotWindows: lerobotWindows, NumSplits: numSplits,
		GlobalBatchSize: 4, BlockSize: 8, CommitEvery: commitEvery, StepTime: 6 * c.o.StepTime})
	if err != nil {
		return err
	}
	ds, err := e.Dataset(ctx)
	if err != nil {
		return err
	}
	rep.LeRobotSamples = ds.Status.Samples
	c.Detail("Ready: %d frames", ds.Status.Samples)
	job, err := e.StartJob(ctx, 4)
	if err != nil {
		return err
	}
	if err := e.WaitPodsRunning(ctx, job, 4); err != nil {
		return err
	}
	at, err := e.WaitCommitted(ctx, 2*commitEvery)
	if err != nil {
		return err
	}
	c.Step("Killing the sidecar of %s-4's pod 1 at committed step %d", jobName, at)
	if rep.LeRobotSidecarRestarts, err = e.KillSidecar(ctx, job, 1); err != nil {
		return err
	}
	if at, err = e.WaitCommitted(ctx, at+2*commitEvery); err != nil {
		return err
	}
	c.Step("Rescaling the LeRobot job to 2 pods at committed step %d", at)
	second, err := e.Rescale(ctx, job, 2)
	if err != nil {
		return err
	}
	if err := e.WaitJobDone(ctx, second, 5*time.Minute); err != nil {
		return err
	}
	// The sidecars said which decoder served the cameras.
	logs, err := e.SidecarLogs(ctx, second)
	if err != nil {
		return err
	}
	if !strings.Contains(logs, `"msg":"Decoding video","streams":"robot","videoDecoder":"FFmpeg `) {
		return fmt.Errorf("the LeRobot job's sidecars did not say they decode video with FFmpeg:\n%s", logs)
	}
	st, err := e.State(ctx)
	if err != nil {
		return err
	}
	if rep.LeRobot, err = e.CheckLineage(ctx, st); err != nil {
		return fmt.Errorf("the LeRobot job's lineage: %w", err)
	}
	c.Detail("frames: %s", rep.LeRobot.Summary())
	return nil
}
