package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// localJob is one job's state under a working directory's .shardfeed/.
type localJob struct {
	Dataset, Job, Dir string
	State             *configmaps.State
	Err               error
}

// localJobs lists the jobs whose state serve keeps under dir
// (.shardfeed/<dataset>/<job>/state.json), by dataset and job.
func localJobs(dir string) ([]localJob, error) {
	states, err := filepath.Glob(filepath.Join(dir, "*", "*", "state.json"))
	if err != nil {
		return nil, err
	}
	var out []localJob
	for _, path := range states {
		jobDir := filepath.Dir(path)
		j := localJob{Dataset: filepath.Base(filepath.Dir(jobDir)), Job: filepath.Base(jobDir), Dir: jobDir}
		if b, err := os.ReadFile(path); err != nil {
			j.Err = err
		} else if j.State, err = configmaps.ParseState(b); err != nil {
			j.Err = err
		}
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Dataset != out[b].Dataset {
			return out[a].Dataset < out[b].Dataset
		}
		return out[a].Job < out[b].Job
	})
	return out, nil
}

func newJobsCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List the jobs whose progress shardfeed serve keeps in this directory (.shardfeed/)",
		Long: `Every job serve runs here (--job, and each --fresh one) keeps its committed
progress under .shardfeed/<dataset>/<job>/. jobs lists them with where each
stands; jobs rm removes the ones you no longer resume.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jobs, err := localJobs(dir)
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "no job state under %s\n", dir)
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "DATASET\tJOB\tEPOCH\tSTEP\tCOMMITTED")
			for _, j := range jobs {
				switch {
				case j.Err != nil:
					_, _ = fmt.Fprintf(w, "%s\t%s\t-\t-\tunreadable: %v\n", j.Dataset, j.Job, j.Err)
				case j.State.Committed == nil:
					_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%d\tnever\n", j.Dataset, j.Job, j.State.Epoch, j.State.Step)
				default:
					_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", j.Dataset, j.Job, j.State.Epoch, j.State.Step, j.State.Committed.Format(time.RFC3339))
				}
			}
			return w.Flush()
		},
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", ".shardfeed", "where serve keeps its state (its working directory's .shardfeed)")
	cmd.AddCommand(newJobsRmCommand(&dir))
	return cmd
}

func newJobsRmCommand(dir *string) *cobra.Command {
	var olderThan time.Duration
	var dataset string
	cmd := &cobra.Command{
		Use:   "rm [JOB...]",
		Short: "Remove jobs' progress: the ones named, or with --older-than those not committed since",
		Example: `  shardfeed jobs rm local-20261123-195900
  shardfeed jobs rm --older-than 168h        # every job not committed in a week`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 0) == (olderThan == 0) {
				return errors.New("name the jobs to remove, or give --older-than (not both)")
			}
			jobs, err := localJobs(*dir)
			if err != nil {
				return err
			}
			named := map[string]bool{}
			for _, a := range args {
				named[a] = true
			}
			removed := 0
			for _, j := range jobs {
				if dataset != "" && j.Dataset != dataset {
					continue
				}
				pick := named[j.Job]
				if olderThan > 0 {
					last := j.State != nil && j.State.Committed != nil && time.Since(*j.State.Committed) < olderThan
					pick = !last && j.Err == nil && !modifiedWithin(j.Dir, olderThan)
				}
				if !pick {
					continue
				}
				delete(named, j.Job)
				if err := os.RemoveAll(j.Dir); err != nil {
					return err
				}
				removed++
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "removed job %q of TrainingDataset %q (%s)\n", j.Job, j.Dataset, j.Dir); err != nil {
					return err
				}
			}
			if len(named) > 0 {
				var missing []string
				for n := range named {
					missing = append(missing, n)
				}
				sort.Strings(missing)
				return fmt.Errorf("no job %s under %s (shardfeed jobs lists them)", strings.Join(missing, ", "), *dir)
			}
			if removed == 0 {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), "no job to remove")
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove every job not committed (nor started) within this long, e.g. 168h")
	cmd.Flags().StringVar(&dataset, "dataset", "", "only the jobs of this TrainingDataset")
	return cmd
}

// modifiedWithin says whether anything in dir changed within d: a job
// started but never committed is still someone's.
func modifiedWithin(dir string, d time.Duration) bool {
	recent := false
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < d {
			recent = true
			return filepath.SkipAll
		}
		return nil
	})
	return recent
}
