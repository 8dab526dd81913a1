//go:build integration

package main_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
//
// The third review's finding 1: the hosts AWS customers run under
// amazonaws.com (API Gateway, EC2, load balancers) are refused, and a
// dataset applied before the upgrade that names one gets a condition
// naming the host and the value the platform team would add.
func TestIntegrationTheDefaultAllowsOnlyTheCloudsEndpoints(t *testing.T) {
	ctx := context.Background()
	operatorNS, ns := apiServer.Namespace(t), apiServer.Namespace(t)
	port := freePort(t)
	secret := &datav1alpha1.SecretReference{Name: "keys"}
	gateway := "abc123defg.execute-api.us-east-1.amazonaws.com"
	// Applied under the old wildcard: no webhook is installed yet.
	old := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "applied-before", Namespace: ns},
		Spec: datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{{Name: "s", Source: datav1alpha1.Source{URI: "s3://data/a/",
			Endpoint: "https://" + gateway, CredentialsSecretRef: secret}}}, NumSplits: 2, GlobalBatchSize: 8}}
	if err := apiServer.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	installWebhooks(t, port, operatorNS)
	startManagerProcess(t, operatorNS, port)
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
		{"a lent ServiceAccount's token to an API Gateway", `endpoint "` + gateway + `" is not one the platform team allows`,
			datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://" + gateway,
				WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer"}}},
		{"a SAS token to an API Gateway", `endpoint "` + gateway + `" is not one the platform team allows`,
			datav1alpha1.Source{URI: "az://acct/data/a/", Endpoint: "https://" + gateway, CredentialsSecretRef: secret}},
		{"a SAS token to an EC2 host over plain HTTP", "is refused over plain HTTP: it is under amazonaws.com",
			datav1alpha1.Source{URI: "az://acct/data/a/", Endpoint: "ec2-203-0-113-5.compute-1.amazonaws.com:80", Insecure: true, CredentialsSecretRef: secret}},
		{"Azure's audience for an s3:// stream", "is not the token exchange of the cloud of s3://data/a/",
			datav1alpha1.Source{URI: "s3://data/a/", WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", Audience: "api://AzureADTokenExchange"}}},
		{"AWS S3", "", datav1alpha1.Source{URI: "s3://data/a/", Region: "eu-west-1", CredentialsSecretRef: secret}},
		{"AWS S3 in aws-cn", "", datav1alpha1.Source{URI: "s3://data/a/", Region: "cn-north-1", CredentialsSecretRef: secret}},
		{"an access point", "", datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://reports-123456789012.s3-accesspoint.us-west-2.amazonaws.com", CredentialsSecretRef: secret}},
		{"a VPC endpoint", "", datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", CredentialsSecretRef: secret}},
		{"a FIPS endpoint", "", datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "https://s3-fips.us-gov-west-1.amazonaws.com", CredentialsSecretRef: secret}},
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
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.refused)
			case strings.Contains(tc.refused, "is not one") && !strings.Contains(err.Error(), "datasets.allowedEndpoints"):
				t.Fatalf("%v does not name datasets.allowedEndpoints", err)
			}
		})
	}

	// The dataset applied before the upgrade says what to add.
	var cond *metav1.Condition
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
			t.Fatal(err)
		}
		if cond = meta.FindStatusCondition(old.Status.Conditions, datav1alpha1.ConditionIndexResolved); cond != nil {
			break
		}
	}
	if cond == nil || cond.Reason != datav1alpha1.ReasonSourceNotAllowed || !strings.Contains(cond.Message, `add "`+gateway+`" to datasets.allowedEndpoints`) {
		t.Fatalf("the dataset applied before the upgrade: %+v, want %s naming the host and the value to add", cond, datav1alpha1.ReasonSourceNotAllowed)
	}

	out, err := exec.CommandContext(ctx, binary, "--namespace="+operatorNS, "--allow-cloud-endpoints=false").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--allow-cloud-endpoints=false and no --allowed-endpoints") {
		t.Fatalf("a manager that may reach no store started, or did not say why: %v\n%s", err, out)
	}
}
