package workloadidentity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

const role = "arn:aws:iam::123456789012:role/data-reader"

// The ServiceAccount's annotations decide what its token is exchanged
// for; a value the dataset still names must agree, and where the
// annotation is missing the error is the command that adds it.
func TestTheServiceAccountsAnnotationsDecideTheIdentity(t *testing.T) {
	sa := func(annotations map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "trainer", Annotations: annotations}}
	}
	for _, tc := range []struct {
		name        string
		uri         string
		wi          datav1alpha1.WorkloadIdentity
		annotations map[string]string
		want        datav1alpha1.WorkloadIdentity
		err         string
	}{
		{name: "s3 role from the annotation", uri: "s3://b/p/", annotations: map[string]string{AnnotationAWSRoleARN: role},
			want: datav1alpha1.WorkloadIdentity{RoleARN: role}},
		{name: "s3 role named by both, equal", uri: "s3://b/p/", wi: datav1alpha1.WorkloadIdentity{RoleARN: role}, annotations: map[string]string{AnnotationAWSRoleARN: role},
			want: datav1alpha1.WorkloadIdentity{RoleARN: role}},
		{name: "s3 role named by the dataset only: the migration's command", uri: "s3://b/p/", wi: datav1alpha1.WorkloadIdentity{RoleARN: role},
			err: "kubectl annotate serviceaccount -n team-a trainer eks.amazonaws.com/role-arn=" + role},
		{name: "s3 role named by neither", uri: "s3://b/p/", err: "eks.amazonaws.com/role-arn=<AWS role ARN>"},
		{name: "s3 roles that differ", uri: "s3://b/p/", wi: datav1alpha1.WorkloadIdentity{RoleARN: role},
			annotations: map[string]string{AnnotationAWSRoleARN: "arn:aws:iam::123456789012:role/admin"}, err: "names another"},
		{name: "s3 annotation not an ARN", uri: "s3://b/p/", annotations: map[string]string{AnnotationAWSRoleARN: "admin"}, err: "not a valid AWS role ARN"},
		{name: "az from the annotations", uri: "az://acct/c/p/", annotations: map[string]string{AnnotationAzureClientID: "0000-11", AnnotationAzureTenantID: "tenant.example"},
			want: datav1alpha1.WorkloadIdentity{ClientID: "0000-11", TenantID: "tenant.example"}},
		{name: "abfss without a tenant", uri: "abfss://c@acct.dfs.core.windows.net/p/", annotations: map[string]string{AnnotationAzureClientID: "0000-11"},
			err: "azure.workload.identity/tenant-id=<Entra tenant ID>"},
		{name: "az tenant that is a path", uri: "az://acct/c/p/", annotations: map[string]string{AnnotationAzureClientID: "0000", AnnotationAzureTenantID: "x/../../evil"},
			err: "not a valid Entra tenant ID"},
		{name: "gs without a service account reads as the federated identity", uri: "gs://b/p/", wi: datav1alpha1.WorkloadIdentity{Audience: "a"},
			want: datav1alpha1.WorkloadIdentity{Audience: "a"}},
		{name: "gs service account from the annotation", uri: "gs://b/p/", annotations: map[string]string{AnnotationGCPServiceAccount: "reader@p.iam.gserviceaccount.com"},
			want: datav1alpha1.WorkloadIdentity{ServiceAccountEmail: "reader@p.iam.gserviceaccount.com"}},
		{name: "gs service account the dataset names alone", uri: "gs://b/p/", wi: datav1alpha1.WorkloadIdentity{ServiceAccountEmail: "owner@p.iam.gserviceaccount.com"},
			err: "iam.gke.io/gcp-service-account=owner@p.iam.gserviceaccount.com"},
		// The store's descriptor says its cloud; a store of none, or a
		// scheme no store reads, is refused (an unknown scheme once read
		// as gs://).
		{name: "file takes no identity", uri: "file:///data/p/", annotations: map[string]string{AnnotationGCPServiceAccount: "reader@p.iam.gserviceaccount.com"},
			err: "a file:// source takes no workload identity"},
		{name: "an unknown scheme", uri: "hdfs://nn/p/", annotations: map[string]string{AnnotationGCPServiceAccount: "reader@p.iam.gserviceaccount.com"},
			err: `scheme "hdfs" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.wi.ServiceAccountName, tc.want.ServiceAccountName = "trainer", "trainer"
			src := datav1alpha1.Source{URI: tc.uri, WorkloadIdentity: &tc.wi}
			got, err := Resolve(src, sa(tc.annotations))
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one that says %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "arn:aws:iam::123456789012:role/admin") {
					t.Errorf("the error quotes the ServiceAccount's annotation: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case *got.WorkloadIdentity != tc.want:
				t.Fatalf("resolved %+v, want %+v", *got.WorkloadIdentity, tc.want)
			}
			if tc.wi.RoleARN == "" && src.WorkloadIdentity.RoleARN != "" {
				t.Error("Resolve changed its argument")
			}
		})
	}
}
