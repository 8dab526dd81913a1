//go:build integration

package main_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// TestIntegrationTheDefaultAllowsOnlyTheCloudsEndpoints: the second
// review's finding 8 on the manager binary. With no --allowed-endpoints
// (the chart's default: datasets.allowedEndpoints [] and
// allowCloudEndpoints true), a stream reaches the clouds' own stores and
// nothing else: a dataset naming another host with a Secret is refused at
// apply time, naming the value the platform team would add, so no
// credential of the namespace goes to a host its author runs. With the
// clouds switched off and no list, the manager refuses to start.
func TestIntegrationTheDefaultAllowsOnlyTheCloudsEndpoints(t *testing.T) {
	ctx := context.Background()
	operatorNS, ns := apiServer.Namespace(t), apiServer.Namespace(t)
	port := freePort(t)
	installWebhooks(t, port, operatorNS)
	startManagerProcess(t, operatorNS, port)
	secret := &datav1alpha1.SecretReference{Name: "keys"}
	for _, tc := range []struct {
		name, refused string
		src           datav1alpha1.Source
	}{
		{"an author's host", `endpoint "collector.attacker.example:443" is not one the platform team allows`,
			datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://collector.attacker.example:443", CredentialsSecretRef: secret}},
		{"an in-cluster store nobody listed", `endpoint "minio.storage:9000" is not one the platform team allows`,
			datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "http://minio.storage:9000", Insecure: true, CredentialsSecretRef: secret}},
		{"an Azure SAS token sent to a look-alike", `endpoint "blob.core.windows.net.attacker.example" is not one the platform team allows`,
			datav1alpha1.Source{URI: "az://acct/data/a/", Endpoint: "blob.core.windows.net.attacker.example", CredentialsSecretRef: secret}},
		{"AWS S3", "", datav1alpha1.Source{URI: "s3://data/a/", Region: "eu-west-1", CredentialsSecretRef: secret}},
		{"an S3 regional endpoint", "", datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://s3.eu-west-1.amazonaws.com", CredentialsSecretRef: secret}},
		{"GCS", "", datav1alpha1.Source{URI: "gs://data/a/", CredentialsSecretRef: secret}},
		{"Azure Blob", "", datav1alpha1.Source{URI: "az://acct/data/a/", CredentialsSecretRef: secret}},
		{"ADLS Gen2", "", datav1alpha1.Source{URI: "abfss://data@acct.dfs.core.windows.net/a/", CredentialsSecretRef: secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := apiServer.Client.Create(ctx, &datav1alpha1.TrainingDataset{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "ds-", Namespace: ns},
				Spec:       datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Source: tc.src}}, NumSplits: 2, GlobalBatchSize: 8}})
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("a cloud's own endpoint was refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "datasets.allowedEndpoints")):
				t.Fatalf("got %v, want a refusal saying %q and naming datasets.allowedEndpoints", err, tc.refused)
			}
		})
	}

	out, err := exec.CommandContext(ctx, binary, "--namespace="+operatorNS, "--allow-cloud-endpoints=false").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--allow-cloud-endpoints=false and no --allowed-endpoints") {
		t.Fatalf("a manager that may reach no store started, or did not say why: %v\n%s", err, out)
	}
}
