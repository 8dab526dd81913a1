// Command kubectl-shardfeed is the kubectl plugin (`kubectl shardfeed`,
// krew's naming) for what users ask the cluster most about shardfeed: a
// dataset's plan, a job's progress and whether its committed lineage is
// the plan's, and why a pod was or was not injected. It reads; it never
// writes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		var failed *checkFailed
		if !errors.As(err, &failed) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

// checkFailed is a check that ran and found a problem, already reported
// on the output: the plugin exits 1 without repeating it.
type checkFailed struct{ what string }

func (c *checkFailed) Error() string { return c.what }

// cluster is how a command reaches the cluster: kubectl's own flags.
type cluster struct {
	kubeconfig, context, namespace string
	timeout                        time.Duration
}

// client connects as kubectl would, and the namespace the command reads
// (--namespace, else the context's, else "default").
func (c *cluster) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.Timeout = c.timeout
	ns := c.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, "", err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	return cl, ns, err
}

// runE is a command's RunE: do, connected as kubectl would, within
// --request-timeout.
func (c *cluster) runE(do func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, ns, err := c.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
		defer cancel()
		return do(ctx, cl, ns, cmd, args)
	}
}

// report writes a command's text and keeps the first error (a closed
// pipe), which the command returns.
type report struct {
	w   io.Writer
	err error
}

func (r *report) printf(format string, args ...any) {
	if r.err == nil {
		_, r.err = fmt.Fprintf(r.w, format, args...)
	}
}

func (r *report) println(line string) { r.printf("%s\n", line) }

// done is what a command returns after its report: the write's error, else
// failed when a check failed (nil when none did).
func (r *report) done(failed *checkFailed) error {
	if r.err != nil {
		return r.err
	}
	if failed != nil {
		return failed
	}
	return nil
}

// table writes rows in aligned columns, each indented by two spaces.
func (r *report) table(rows [][]string) {
	if r.err != nil {
		return
	}
	tw := tabwriter.NewWriter(r.w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		_, _ = fmt.Fprintln(tw, "  "+strings.Join(row, "\t")) // a bytes.Buffer's: the error is Flush's
	}
	r.err = tw.Flush()
}

func newRoot() *cobra.Command {
	c := &cluster{}
	root := &cobra.Command{
		Use: "kubectl-shardfeed",
		// kubectl's plugin name in the usage lines (cobra's display name).
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl shardfeed"},
		Short:       "Ask the cluster about shardfeed: a dataset's plan, a job's progress and lineage, why a pod was not injected",
		Long: `kubectl shardfeed reads what the shardfeed operator keeps in the cluster
(TrainingDatasets, their plan and job state ConfigMaps, pods and their
events) and explains it. It changes nothing.

Install: put kubectl-shardfeed on your PATH (make build writes bin/
kubectl-shardfeed; go install github.com/shardfeed/shardfeed/cmd/kubectl-shardfeed
builds it); kubectl finds it as "kubectl shardfeed".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&c.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	f.DurationVar(&c.timeout, "request-timeout", 30*time.Second, "how long the command's requests may take in all")
	root.AddCommand(newPlanCommand(c), newProgressCommand(c), newManifestCommand(c), newWhyCommand(c), newVersionCommand())
	return root
}
