package controllers

import (
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

func TestStorePolicyAllowsOnlyWhatThePlatformTeamSaid(t *testing.T) {
	secret := &datav1alpha1.SecretReference{Name: "s3"}
	stream := func(uri, endpoint string, ref *datav1alpha1.SecretReference) datav1alpha1.Stream {
		return datav1alpha1.Stream{Name: "web", Source: datav1alpha1.Source{URI: uri, Endpoint: endpoint, CredentialsSecretRef: ref}}
	}
	table := func(typ datav1alpha1.IcebergCatalogType, uri, region string) datav1alpha1.Stream {
		s := stream("s3://b/.shardfeed/t/", "", secret)
		s.Format = datav1alpha1.FormatIceberg
		s.Iceberg = &datav1alpha1.IcebergTable{Table: "ml.t", Catalog: datav1alpha1.IcebergCatalog{Type: typ, URI: uri, Region: region}}
		return s
	}
	awsIdentity := func(region string) datav1alpha1.Stream {
		return datav1alpha1.Stream{Name: "web", Source: datav1alpha1.Source{URI: "s3://b/p/", Region: region,
			WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", RoleARN: "arn:aws:iam::123456789012:role/r"}}}
	}
	audience := func(a string) datav1alpha1.Stream {
		s := awsIdentity("")
		s.Source.WorkloadIdentity.Audience = a
		return s
	}
	amazon := StorePolicy{AllowedEndpoints: []string{"*.amazonaws.com"}}
	open := StorePolicy{}
	ambientTeamA := StorePolicy{AmbientNamespaces: []string{"team-a"}}
	allowList := StorePolicy{AllowedEndpoints: []string{"minio.storage:9000", "*.example.com", "s3.amazonaws.com"}}
	clouds := StorePolicy{AllowCloudEndpoints: true} // the chart's default
	withIdentity := func(st datav1alpha1.Stream, audience string) datav1alpha1.Stream {
		st.Source.CredentialsSecretRef = nil
		st.Source.WorkloadIdentity = &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", Audience: audience}
		return st
	}
	insecure := func(st datav1alpha1.Stream) datav1alpha1.Stream { st.Source.Insecure = true; return st }
	region := func(st datav1alpha1.Stream, r string) datav1alpha1.Stream { st.Source.Region = r; return st }
	tests := []struct {
		name   string
		policy StorePolicy
		ns     string
		stream datav1alpha1.Stream
		says   string // "" = allowed
	}{
		{"a Secret and any endpoint", open, "team-a", stream("s3://b/p/", "http://10.0.0.1:9000", secret), ""},
		{"file:// is refused", open, "team-a", stream("file:///etc/", "", secret), "file:// URI, which the operator refuses"},
		{"an unknown scheme is refused, never read as AWS", amazon, "x", stream("hdfs://nn/p/", "", secret), `scheme "hdfs" is not supported: use s3://, gs://, az://, abfss://, file://`},
		{"an unknown scheme is refused with any endpoint allowed", open, "x", stream("minio://b/p/", "", secret), `scheme "minio" is not supported`},
		{"no Secret, no ambient namespace", open, "team-a", stream("s3://b/p/", "", nil), `namespace "team-a" may not use the operator's own cloud identity`},
		{"no Secret in an ambient namespace", ambientTeamA, "team-a", stream("s3://b/p/", "", nil), ""},
		{"no Secret in another namespace", ambientTeamA, "team-b", stream("s3://b/p/", "", nil), "datasets.ambientCredentialsNamespaces"},
		{"ambient everywhere", StorePolicy{AmbientNamespaces: []string{"*"}}, "team-b", stream("s3://b/p/", "", nil), ""},
		{"allowed host:port", allowList, "x", stream("s3://b/p/", "http://minio.storage:9000", secret), ""},
		{"allowed host, another port", allowList, "x", stream("s3://b/p/", "minio.storage:9001", secret), `endpoint "minio.storage:9001" is not one`},
		{"allowed subdomain", allowList, "x", stream("s3://b/p/", "https://s3.eu.example.com", secret), ""},
		{"suffix that is not a subdomain", allowList, "x", stream("s3://b/p/", "https://evilexample.com", secret), "not one the platform team allows"},
		{"the apex of a wildcard", allowList, "x", stream("s3://b/p/", "https://example.com", secret), "not one the platform team allows"},
		{"AWS without an endpoint", allowList, "x", stream("s3://b/p/", "", secret), ""},
		{"AWS not on the list", StorePolicy{AllowedEndpoints: []string{"minio:9000"}}, "x", stream("s3://b/p/", "", secret), `endpoint "s3.amazonaws.com"`},
		{"GCS without an endpoint", StorePolicy{AllowedEndpoints: []string{"storage.googleapis.com"}}, "x", stream("gs://b/p/", "", secret), ""},
		{"GCS not on the list", allowList, "x", stream("gs://b/p/", "", secret), `endpoint "storage.googleapis.com"`},
		{"an Azure account on the list", StorePolicy{AllowedEndpoints: []string{"*.blob.core.windows.net"}}, "x", stream("az://acct/c/p/", "", secret), ""},
		{"an Azure account named", StorePolicy{AllowedEndpoints: []string{"minio:9000"}}, "x", stream("az://acct/c/p/", "", secret), `endpoint "acct.blob.core.windows.net"`},
		{"abfss reaches the blob host", StorePolicy{AllowedEndpoints: []string{"minio:9000"}}, "x", stream("abfss://c@acct.dfs.core.windows.net/p/", "", secret), `endpoint "acct.blob.core.windows.net"`},
		{"the clouds' own list refuses an author's host", clouds, "x", stream("s3://b/p/", "https://collector.example", secret), `endpoint "collector.example"`},
		{"the clouds' own list allows a regional S3", clouds, "x", stream("s3://b/p/", "https://s3.eu-west-1.amazonaws.com", secret), ""},
		{"the clouds' own list allows ADLS", clouds, "x", stream("abfss://c@acct.dfs.core.windows.net/p/", "", secret), ""},
		{"* allows any host", StorePolicy{AllowedEndpoints: []string{"minio:9000", AnyEndpoint}}, "x", stream("s3://b/p/", "https://collector.example", secret), ""},
		{"an emulator's endpoint is checked", allowList, "x", stream("gs://b/p/", "http://127.0.0.1:4443", secret), `endpoint "127.0.0.1:4443"`},
		{"a workload identity is not the operator's", open, "team-a", datav1alpha1.Stream{Name: "web", Source: datav1alpha1.Source{URI: "gs://b/p/",
			WorkloadIdentity: &datav1alpha1.WorkloadIdentity{ServiceAccountName: "trainer", Audience: "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/k8s-1"}}}, ""},
		{"an allowed catalog", allowList, "x", table(datav1alpha1.IcebergCatalogREST, "http://iceberg.example.com:8181", ""), ""},
		{"a catalog not on the list", allowList, "x", table(datav1alpha1.IcebergCatalogREST, "https://catalog.elsewhere.io/api", ""), `the Iceberg catalog's endpoint "catalog.elsewhere.io"`},
		{"a SQL catalog's database host", allowList, "x", table(datav1alpha1.IcebergCatalogSQL, "postgresql://pg.data:5432/iceberg", ""), `endpoint "pg.data:5432"`},
		{"a SQLite catalog is the author's file", allowList, "x", table(datav1alpha1.IcebergCatalogSQL, "sqlite:////home/me/catalog.db", ""), ""},
		{"Glue's regional endpoint", allowList, "x", table(datav1alpha1.IcebergCatalogGlue, "", "eu-west-1"), `endpoint "glue.eu-west-1.amazonaws.com"`},
		{"Glue on the list", StorePolicy{AllowedEndpoints: []string{"s3.amazonaws.com", "*.amazonaws.com"}}, "x", table(datav1alpha1.IcebergCatalogGlue, "", "eu-west-1"), ""},
		{"Glue without a region", allowList, "x", table(datav1alpha1.IcebergCatalogGlue, "", ""), "set iceberg.catalog.region"},
		{"any catalog without a list", open, "x", table(datav1alpha1.IcebergCatalogREST, "https://catalog.elsewhere.io/api", ""), ""},
		// The red team's regions: each would end the STS host early and send
		// the token and the role to a host of the author's.
		{"a region that ends the host", amazon, "x", awsIdentity("attacker.example#"), "source.region: region \"attacker.example#\" is not a region name"},
		{"a region with a user part", amazon, "x", awsIdentity("x@127.0.0.1:9/?"), "is not a region name"},
		{"a region with a dot", amazon, "x", awsIdentity("evil.com"), "is not a region name"},
		{"a region's STS on the list", amazon, "x", awsIdentity("eu-west-1"), ""},
		{"STS not on the list", StorePolicy{AllowedEndpoints: []string{"s3.eu-west-1.amazonaws.com"}}, "x", awsIdentity("eu-west-1"),
			`token exchange goes to AWS STS at "sts.eu-west-1.amazonaws.com"`},
		{"a region is checked without a list", open, "x", awsIdentity("attacker.example#"), "is not a region name"},
		{"a Glue region that ends the host", amazon, "x", table(datav1alpha1.IcebergCatalogGlue, "", "evil.example#"), "iceberg.catalog.region: region"},
		// A token for the API server's audience is a credential of the
		// ServiceAccount; any audience outside the clouds' is a token for a
		// receiver of the author's choosing.
		{"the API server's audience", open, "x", audience("https://kubernetes.default.svc.cluster.local"), "is the Kubernetes API server's"},
		{"the API server's short audience", open, "x", audience("https://kubernetes.default.svc"), "is the Kubernetes API server's"},
		{"the API server's audience, even on the list", StorePolicy{AllowedAudiences: []string{"https://kubernetes.default.svc"}}, "x",
			audience("https://kubernetes.default.svc"), "is the Kubernetes API server's"},
		{"an audience of the author's", open, "x", audience("https://attacker.example"), "is not the token exchange of the cloud of s3://b/p/"},
		{"a Google provider that is not one", open, "x", audience("//iam.googleapis.com/x"), "is not the token exchange of the cloud"},
		{"AWS's audience", open, "x", audience("sts.amazonaws.com"), ""},
		{"an s3:// stream may not ask for a Google pool provider", open, "x", audience("//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/k8s/providers/cluster"),
			"is not the token exchange of the cloud of s3://b/p/"},
		{"an audience the platform allows", StorePolicy{AllowedAudiences: []string{"minio-sts"}}, "x", audience("minio-sts"), ""},
		{"the list is named", allowList, "x", stream("s3://b/p/", "https://collector.example", secret), "minio.storage:9000, *.example.com, s3.amazonaws.com"},
		{"the metadata address", allowList, "x", stream("s3://b/p/", "http://169.254.169.254", secret), "link-local or metadata address"},
		// The third security review, finding 1: hosts AWS customers run
		// under amazonaws.com passed the default *.amazonaws.com.
		{"an API Gateway receives no web identity", clouds, "x", withIdentity(stream("s3://b/p/", "https://abc123defg.execute-api.us-east-1.amazonaws.com", nil), ""),
			`endpoint "abc123defg.execute-api.us-east-1.amazonaws.com" is not one the platform team allows`},
		{"an API Gateway receives no SAS token", clouds, "x", stream("az://acct/c/p/", "https://abc123defg.execute-api.us-east-1.amazonaws.com", secret),
			`is none of the hosts the cloud runs for its storage and token services`},
		{"an EC2 host receives no SAS token over HTTP", clouds, "x", insecure(stream("az://acct/c/p/", "ec2-203-0-113-5.compute-1.amazonaws.com:80", secret)),
			"refused over plain HTTP: it is under amazonaws.com"},
		{"a load balancer receives no keys", clouds, "x", stream("s3://b/p/", "https://my-lb-1234567890.us-east-1.elb.amazonaws.com", secret),
			`add "my-lb-1234567890.us-east-1.elb.amazonaws.com" to datasets.allowedEndpoints`},
		{"an S3 website receives no keys", clouds, "x", stream("s3://b/p/", "https://bucket.s3-website-us-east-1.amazonaws.com", secret), "not one the platform team allows"},
		{"an s3:// stream may not ask for Azure's audience", clouds, "x", withIdentity(stream("s3://b/p/", "", nil), "api://AzureADTokenExchange"),
			"is not the token exchange of the cloud of s3://b/p/: use sts.amazonaws.com"},
		{"an az:// stream may not ask for AWS's audience", clouds, "x", withIdentity(stream("az://acct/c/p/", "", nil), "sts.amazonaws.com"),
			"use api://AzureADTokenExchange"},
		{"Azure's keys to an S3 host", clouds, "x", stream("az://acct/c/p/", "https://s3.eu-west-1.amazonaws.com", secret), "is aws's storage host"},
		{"S3 keys to an Azure host", clouds, "x", stream("s3://b/p/", "https://acct.blob.core.windows.net", secret), "is azure's storage host"},
		{"another account's host", clouds, "x", stream("az://acct/c/p/", "https://other.blob.core.windows.net", secret), "another account than acct"},
		{"a web identity with AWS's own endpoint exchanges at STS", clouds, "x", withIdentity(stream("s3://b/p/", "https://s3.eu-west-1.amazonaws.com", nil), ""), ""},
		// Finding 3: the region selects the partition, and with it the
		// hosts reached.
		{"a cn- region reaches aws-cn's host, checked", StorePolicy{AllowedEndpoints: []string{"s3.amazonaws.com"}}, "x", region(stream("s3://b/p/", "", secret), "cn-north-1"),
			`endpoint "s3.cn-north-1.amazonaws.com.cn" is not one the platform team allows`},
		{"aws-cn with the clouds' own", clouds, "x", region(stream("s3://b/p/", "", secret), "cn-north-1"), ""},
		{"aws-cn's STS", clouds, "x", region(withIdentity(stream("s3://b/p/", "", nil), ""), "cn-northwest-1"), ""},
		{"aws-cn's STS, checked", StorePolicy{AllowedEndpoints: []string{"*.amazonaws.com"}}, "x", region(withIdentity(stream("s3://b/p/", "", nil), ""), "cn-northwest-1"),
			`endpoint "s3.cn-northwest-1.amazonaws.com.cn" is not one`},
		{"aws-us-gov", clouds, "x", region(withIdentity(stream("s3://b/p/", "", nil), ""), "us-gov-west-1"), ""},
		{"a region of no partition", clouds, "x", region(stream("s3://b/p/", "", secret), "moon-base-1x"), "a region of no AWS partition"},
		{"any region with an S3-compatible endpoint", allowList, "x", region(stream("s3://b/p/", "http://minio.storage:9000", secret), "default"), ""},
		{"an access point", clouds, "x", stream("s3://b/p/", "https://reports-123456789012.s3-accesspoint.us-west-2.amazonaws.com", secret), ""},
		{"a VPC endpoint", clouds, "x", stream("s3://b/p/", "https://bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", secret), ""},
		{"a FIPS endpoint", clouds, "x", stream("s3://b/p/", "https://s3-fips.us-east-1.amazonaws.com", secret), ""},
		{"Glue in aws-cn", clouds, "x", table(datav1alpha1.IcebergCatalogGlue, "", "cn-north-1"), ""},
		{"* sends nothing to a metadata name", StorePolicy{AllowedEndpoints: []string{AnyEndpoint}}, "x", stream("s3://b/p/", "http://metadata.google.internal", secret), "metadata service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Check(tt.ns, 0, tt.stream)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}
