package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// newCheckInstallCommand is the Helm chart's test (`helm test`): it checks
// from inside the cluster that an installed operator answers, changing
// nothing (its only write is a dry run).
func newCheckInstallCommand() *cobra.Command {
	var namespace, kubeconfig string
	var webhooks []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check-install --namespace NS",
		Short: "Check an installed operator: the CRD is served, the webhooks have their CA, the API server reaches the validating webhook",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return checkInstall(ctx, cfg, namespace, webhooks, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "default", "a namespace to dry-run a TrainingDataset in")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, else $KUBECONFIG)")
	cmd.Flags().StringSliceVar(&webhooks, "webhook-configurations", []string{"mutating/shardfeed-pod-injection", "validating/shardfeed-validation"},
		"the webhook configurations that must carry a caBundle")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long the checks may take")
	return cmd
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}

func checkInstall(ctx context.Context, cfg *rest.Config, namespace string, webhooks []string, out io.Writer) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	failed := 0
	report := func(what string, err error) {
		if err != nil {
			failed++
			_, _ = fmt.Fprintf(out, "FAIL %s: %v\n", what, err)
			return
		}
		_, _ = fmt.Fprintf(out, "ok   %s\n", what)
	}

	report("the TrainingDataset API is served", c.List(ctx, &datav1alpha1.TrainingDatasetList{}, client.InNamespace(namespace), client.Limit(1)))
	for _, w := range webhooks {
		kind, name, ok := strings.Cut(w, "/")
		var obj client.Object
		var bundles func() [][]byte
		switch {
		case ok && kind == "mutating":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			obj, bundles = m, func() (b [][]byte) {
				for _, h := range m.Webhooks {
					b = append(b, h.ClientConfig.CABundle)
				}
				return b
			}
		case ok && kind == "validating":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			obj, bundles = v, func() (b [][]byte) {
				for _, h := range v.Webhooks {
					b = append(b, h.ClientConfig.CABundle)
				}
				return b
			}
		default:
			return fmt.Errorf("--webhook-configurations %q: want mutating/NAME or validating/NAME", w)
		}
		err := c.Get(ctx, client.ObjectKey{Name: name}, obj)
		if err == nil {
			for _, b := range bundles() {
				if len(b) == 0 {
					err = errors.New("a webhook has no caBundle: the manager has not published its CA (its log says why)")
				}
			}
		}
		report(fmt.Sprintf("%s webhook configuration %s carries the CA", kind, name), err)
	}
	// A dataset the validating webhook refuses, in a dry run: the API
	// server must reach the manager over TLS to refuse it.
	bad := &datav1alpha1.TrainingDataset{}
	bad.Name, bad.Namespace = "shardfeed-check-install", namespace
	bad.Spec = datav1alpha1.TrainingDatasetSpec{NumSplits: 1, GlobalBatchSize: 1,
		Streams: []datav1alpha1.Stream{{Name: "check", Source: datav1alpha1.Source{URI: "s3://check/install/"}}},
		Sidecar: datav1alpha1.SidecarSpec{Image: "Not-A/Reference"}}
	err = c.Create(ctx, bad, client.DryRunAll)
	switch {
	case err == nil:
		err = errors.New("a dataset with an invalid image was accepted: the validating webhook did not run")
	case strings.Contains(err.Error(), "trainingdatasets.shardfeed.io") && strings.Contains(err.Error(), "spec.sidecar.image"):
		err = nil
	default:
		err = fmt.Errorf("the API server could not ask the webhook: %w", err)
	}
	report("the API server reaches the validating webhook over TLS", err)
	if failed > 0 {
		return fmt.Errorf("%d checks failed", failed)
	}
	return nil
}
