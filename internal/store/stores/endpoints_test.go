package stores

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
)

// The clouds' own hosts, per store, use and partition: the forms their
// storage and token services are reached at pass, and the hosts their
// customers operate under the same domains do not (the third security
// review's finding 1: API Gateway, EC2, load balancers and S3 websites
// under *.amazonaws.com received a web identity's token and SAS tokens).
func TestACredentialGoesOnlyToItsCloudsHostsForItsUse(t *testing.T) {
	clouds := Policy(nil, true)
	listedToo := Policy([]string{"minio.storage:9000", "*.amazonaws.com"}, true)
	any := Policy([]string{"*"}, false)
	tests := []struct {
		name   string
		policy *store.Endpoints
		uri    string
		use    store.Use
		scheme string
		host   string
		says   string // "" = allowed
	}{
		// S3 in each partition, in every documented form.
		{"path-style S3", clouds, "s3://b/", store.UseStorage, "https", "s3.amazonaws.com", ""},
		{"a bucket host", clouds, "s3://b/", store.UseStorage, "https", "my-bucket.s3.amazonaws.com", ""},
		{"a bucket with dots, regional", clouds, "s3://b/", store.UseStorage, "https", "my.dotted.bucket.s3.us-east-1.amazonaws.com:443", ""},
		{"regional S3", clouds, "s3://b/", store.UseStorage, "https", "s3.eu-west-1.amazonaws.com", ""},
		{"legacy dash-regional S3", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3-us-west-2.amazonaws.com", ""},
		{"us-east-1's legacy host", clouds, "s3://b/", store.UseStorage, "https", "s3-external-1.amazonaws.com", ""},
		{"dual-stack S3", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3.dualstack.ap-southeast-2.amazonaws.com", ""},
		{"a FIPS endpoint", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3-fips.us-east-1.amazonaws.com", ""},
		{"a dual-stack FIPS endpoint", clouds, "s3://b/", store.UseStorage, "https", "s3-fips.dualstack.us-east-2.amazonaws.com", ""},
		{"an access point", clouds, "s3://b/", store.UseStorage, "https", "reports-123456789012.s3-accesspoint.us-west-2.amazonaws.com", ""},
		{"a FIPS dual-stack access point", clouds, "s3://b/", store.UseStorage, "https", "reports-123456789012.s3-accesspoint-fips.dualstack.us-east-1.amazonaws.com", ""},
		{"a multi-region access point", clouds, "s3://b/", store.UseStorage, "https", "mfzwi23gnjvgw.mrap.accesspoint.s3-global.amazonaws.com", ""},
		{"an S3 Express directory bucket", clouds, "s3://b/", store.UseStorage, "https", "data--use1-az4--x-s3.s3express-use1-az4.us-east-1.amazonaws.com", ""},
		{"S3 Express's regional endpoint", clouds, "s3://b/", store.UseStorage, "https", "s3express-control.us-west-2.amazonaws.com", ""},
		{"a VPC endpoint", clouds, "s3://b/", store.UseStorage, "https", "vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", ""},
		{"a bucket through a VPC endpoint", clouds, "s3://b/", store.UseStorage, "https", "bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", ""},
		{"an access point through a VPC endpoint", clouds, "s3://b/", store.UseStorage, "https", "accesspoint.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", ""},
		{"aws-cn's S3", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3.cn-northwest-1.amazonaws.com.cn", ""},
		{"aws-us-gov's S3", clouds, "s3://b/", store.UseStorage, "https", "s3.us-gov-west-1.amazonaws.com", ""},
		{"aws-us-gov's FIPS S3", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3-fips.us-gov-east-1.amazonaws.com", ""},
		// STS and Glue in each partition.
		{"global STS", clouds, "s3://b/", store.UseToken, "https", "sts.amazonaws.com", ""},
		{"regional STS", clouds, "s3://b/", store.UseToken, "https", "sts.eu-west-1.amazonaws.com", ""},
		{"FIPS STS", clouds, "s3://b/", store.UseToken, "https", "sts-fips.us-east-1.amazonaws.com", ""},
		{"dual-stack STS", clouds, "s3://b/", store.UseToken, "https", "sts.us-east-1.api.aws", ""},
		{"STS through a VPC endpoint", clouds, "s3://b/", store.UseToken, "https", "vpce-0123abcd-ef01.sts.us-east-1.vpce.amazonaws.com", ""},
		{"aws-cn's STS", clouds, "s3://b/", store.UseToken, "https", "sts.cn-north-1.amazonaws.com.cn", ""},
		{"aws-us-gov's STS", clouds, "s3://b/", store.UseToken, "https", "sts.us-gov-west-1.amazonaws.com", ""},
		{"Glue", clouds, "s3://b/", store.UseCatalog, "https", "glue.eu-west-1.amazonaws.com", ""},
		{"aws-cn's Glue", clouds, "s3://b/", store.UseCatalog, "https", "glue.cn-north-1.amazonaws.com.cn", ""},
		// What AWS's customers operate under amazonaws.com.
		{"an API Gateway", clouds, "s3://b/", store.UseToken, "https", "abc123defg.execute-api.us-east-1.amazonaws.com", "under amazonaws.com but is none of the hosts the cloud runs"},
		{"an API Gateway as a store", clouds, "s3://b/", store.UseStorage, "https", "abc123defg.execute-api.us-east-1.amazonaws.com", "is not one the platform team allows"},
		{"an EC2 public name", clouds, "s3://b/", store.UseStorage, "https", "ec2-203-0-113-5.compute-1.amazonaws.com", "under amazonaws.com"},
		{"an EC2 regional name", clouds, "s3://b/", store.UseStorage, "https", "ec2-3-8-1-2.eu-west-2.compute.amazonaws.com", "under amazonaws.com"},
		{"a load balancer", clouds, "s3://b/", store.UseStorage, "https", "my-lb-1234567890.us-east-1.elb.amazonaws.com", "under amazonaws.com"},
		{"an S3 website", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3-website-us-east-1.amazonaws.com", "under amazonaws.com"},
		{"an S3 website, dot form", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3-website.eu-west-1.amazonaws.com", "under amazonaws.com"},
		{"an Object Lambda access point", clouds, "s3://b/", store.UseStorage, "https", "ap-123456789012.s3-object-lambda.us-east-1.amazonaws.com", "under amazonaws.com"},
		{"a customer's PrivateLink service", clouds, "s3://b/", store.UseStorage, "https", "vpce-0abc-def.vpce-svc-0123456789.us-east-1.vpce.amazonaws.com", "under amazonaws.com"},
		{"a look-alike suffix", clouds, "s3://b/", store.UseStorage, "https", "s3.amazonaws.com.attacker.example", "is not one the platform team allows"},
		// Each credential to its own use and cloud.
		{"a token to S3", clouds, "s3://b/", store.UseToken, "https", "s3.eu-west-1.amazonaws.com", "is aws's storage host, and this request is for its token service"},
		{"keys to STS", clouds, "s3://b/", store.UseStorage, "https", "sts.amazonaws.com", "is aws's token service host"},
		{"S3 keys to Azure", clouds, "s3://b/", store.UseStorage, "https", "acct.blob.core.windows.net", "is azure's storage host (azure)"},
		{"a SAS token to AWS", clouds, "az://acct/c/", store.UseStorage, "https", "abc123defg.execute-api.us-east-1.amazonaws.com", "is not one the platform team allows"},
		// Azure: an account's credential to that account's hosts only.
		{"an account's blob host", clouds, "az://acct/c/", store.UseStorage, "https", "acct.blob.core.windows.net", ""},
		{"an account's dfs host", clouds, "abfss://c@acct.dfs.core.windows.net/", store.UseStorage, "https", "acct.dfs.core.windows.net", ""},
		{"an account's secondary", clouds, "az://acct/c/", store.UseStorage, "https", "acct-secondary.blob.core.windows.net", ""},
		// An account's name is unique within its zone or its cloud only.
		{"an account's name in a DNS zone", clouds, "az://acct/c/", store.UseStorage, "https", "acct.z12.blob.storage.azure.net", "is not one the platform team allows"},
		{"the account's name in Azure China", clouds, "az://acct/c/", store.UseStorage, "https", "acct.blob.core.chinacloudapi.cn", "is a storage host of azure-china"},
		{"the account's name in Azure Government", clouds, "az://acct/c/", store.UseStorage, "https", "acct.blob.core.usgovcloudapi.net", "is a storage host of azure-us-gov"},
		{"another account", clouds, "az://acct/c/", store.UseStorage, "https", "other.blob.core.windows.net", "the storage host of another account than acct"},
		{"a static website", clouds, "az://acct/c/", store.UseStorage, "https", "acct.z13.web.core.windows.net", "under windows.net"},
		{"an App Service", clouds, "az://acct/c/", store.UseStorage, "https", "myapp.azurewebsites.net", "is not one the platform team allows"},
		{"Entra", clouds, "az://acct/c/", store.UseToken, "https", "login.microsoftonline.com", ""},
		{"Entra in China", clouds, "az://acct/c/", store.UseToken, "https", "login.chinacloudapi.cn", ""},
		{"Entra in Government", clouds, "az://acct/c/", store.UseToken, "https", "login.microsoftonline.us", ""},
		{"a token to a blob host", clouds, "az://acct/c/", store.UseToken, "https", "acct.blob.core.windows.net", "this request is for its token service"},
		// Google.
		{"Cloud Storage", clouds, "gs://b/", store.UseStorage, "https", "storage.googleapis.com", ""},
		{"a bucket host", clouds, "gs://b/", store.UseStorage, "https", "my-bucket.storage.googleapis.com", ""},
		{"a regional endpoint", clouds, "gs://b/", store.UseStorage, "https", "storage.us-east1.rep.googleapis.com", ""},
		{"a Private Service Connect endpoint", clouds, "gs://b/", store.UseStorage, "https", "storage-myendpoint.p.googleapis.com", ""},
		{"a key's token host", clouds, "gs://b/", store.UseToken, "https", "oauth2.googleapis.com", ""},
		{"Google STS", clouds, "gs://b/", store.UseToken, "https", "sts.googleapis.com", ""},
		{"impersonation", clouds, "gs://b/", store.UseToken, "https", "iamcredentials.googleapis.com", ""},
		{"a token to storage", clouds, "gs://b/", store.UseToken, "https", "storage.googleapis.com", "for its token service"},
		{"a customer's Cloud Run", clouds, "gs://b/", store.UseStorage, "https", "api-xyz-uc.a.run.app", "is not one the platform team allows"},
		// Plain HTTP never goes to a cloud's domain, listed or not.
		{"plain HTTP to S3", clouds, "s3://b/", store.UseStorage, "http", "s3.amazonaws.com", "refused over plain HTTP"},
		{"plain HTTP to an EC2 host the platform listed", listedToo, "s3://b/", store.UseStorage, "http", "ec2-203-0-113-5.compute-1.amazonaws.com", "under amazonaws.com, a cloud's domain"},
		{"plain HTTP to Azure", any, "az://acct/c/", store.UseStorage, "http", "acct.blob.core.windows.net", "refused over plain HTTP"},
		{"plain HTTP to a listed store", listedToo, "s3://b/", store.UseStorage, "http", "minio.storage:9000", ""},
		{"a listed name for any use", listedToo, "s3://b/", store.UseToken, "https", "minio.storage:9000", ""},
		{"a listed wildcard restores a customer's host on purpose", listedToo, "s3://b/", store.UseToken, "https", "abc123defg.execute-api.us-east-1.amazonaws.com", ""},
		// Metadata services, however they are written.
		{"a metadata name", any, "s3://b/", store.UseStorage, "https", "metadata.google.internal", "metadata service"},
		{"a metadata name with a dot", any, "s3://b/", store.UseStorage, "https", "metadata.google.internal.:80", "metadata service"},
		{"the metadata address", any, "s3://b/", store.UseStorage, "https", "169.254.169.254", "link-local or metadata address"},
		{"the metadata address, IPv4-mapped", any, "s3://b/", store.UseStorage, "https", "[::ffff:169.254.169.254]", "link-local or metadata address"},
		{"the metadata address, IPv4-mapped with a port", any, "s3://b/", store.UseStorage, "https", "[::ffff:169.254.169.254]:80", "link-local or metadata address"},
		{"AWS's IPv6 metadata address", any, "s3://b/", store.UseStorage, "https", "[fd00:ec2::254]", "link-local or metadata address"},
		{"the metadata address listed on purpose", Policy([]string{"169.254.169.254"}, false), "s3://b/", store.UseStorage, "https", "169.254.169.254", ""},
		// The red team's: addresses no resolver should be trusted with,
		// cloud hosts on other ports, "*" against a cloud's bindings.
		{"an address as one decimal number", any, "s3://b/", store.UseStorage, "https", "2852039166", "neither a host name nor an IP address in standard form"},
		{"an address in hexadecimal", any, "s3://b/", store.UseStorage, "https", "0xa9.0xfe.0xa9.0xfe:80", "standard form"},
		{"a private address literal", any, "s3://b/", store.UseStorage, "https", "10.0.0.1", "a private address"},
		{"NAT64 with a zone", any, "s3://b/", store.UseStorage, "https", "[64:ff9b::a00:1%1]", "no address a store is reached at"},
		{"NAT64's local-use prefix", any, "s3://b/", store.UseStorage, "https", "[64:ff9b:1::a00:1]", "no address a store is reached at"},
		{"Google's IPv6 metadata address", any, "gs://b/", store.UseStorage, "https", "[fd20:ce::254]", "a cloud's metadata service"},
		{"a cloud's host on another port", clouds, "s3://b/", store.UseStorage, "https", "vpce-0attacker.s3.us-east-1.vpce.amazonaws.com:6443", "on port 443 only"},
		{"* does not unbind an Azure account", any, "az://acct/c/", store.UseStorage, "https", "other.blob.core.windows.net", "another account than acct"},
		{"* does not send S3 keys to Azure", any, "s3://b/", store.UseStorage, "https", "acct.blob.core.windows.net", "is azure's storage host"},
		{"* does not send a token to storage", any, "gs://b/", store.UseToken, "https", "storage.googleapis.com", "for its token service"},
		{"* reaches a public address literal", any, "s3://b/", store.UseStorage, "https", "52.216.0.10", ""},
		{"plain HTTP to Google's accounts host", clouds, "gs://b/", store.UseToken, "http", "accounts.google.com", "refused over plain HTTP"},
		{"a listed address and port", Policy([]string{"10.0.0.5:9000"}, false), "s3://b/", store.UseStorage, "http", "10.0.0.5:9000", ""},
		{"a listed address, another port", Policy([]string{"10.0.0.5:9000"}, false), "s3://b/", store.UseStorage, "http", "10.0.0.5:22", "a private address"},
		// The second round: "*" sends no token anywhere, and no credential
		// to a cloud's host it runs for another purpose.
		{"* sends no web identity to an author's host", any, "s3://b/", store.UseToken, "https", "sts.attacker.example", "a token exchange goes only to a cloud's token service"},
		{"a listed host may exchange a token (MinIO's STS)", listedToo, "s3://b/", store.UseToken, "https", "minio.storage:9000", ""},
		{"* and Azure Files of another account", Policy([]string{"*"}, true), "s3://b/", store.UseStorage, "https", "victim.file.core.windows.net", "under windows.net, a cloud's domain"},
		{"* and a private-link name of another account", Policy([]string{"*"}, true), "az://mine/c/", store.UseStorage, "https", "victim.privatelink.blob.core.windows.net", "a cloud's domain"},
		{"* and a DNS-zone account", Policy([]string{"*"}, true), "az://mine/c/", store.UseStorage, "https", "victim.z13.blob.storage.azure.net", "a cloud's domain"},
		{"* and Google's API host for an S3 key", Policy([]string{"*"}, true), "s3://b/", store.UseStorage, "https", "www.googleapis.com", "under googleapis.com"},
		{"Transfer Acceleration", clouds, "s3://b/", store.UseStorage, "https", "my-bucket.s3-accelerate.amazonaws.com", ""},
		{"* and Transfer Acceleration for a Google key", Policy([]string{"*"}, true), "gs://b/", store.UseStorage, "https", "my-bucket.s3-accelerate.amazonaws.com", "is aws's storage host"},
		{"an empty label", clouds, "s3://b/", store.UseStorage, "https", "bucket.s3.us-east-1.amazonaws.com..", "an empty label"},
		{"6to4 around the metadata address", any, "s3://b/", store.UseStorage, "https", "[2002:a9fe:a9fe::1]", "link-local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate, err := Gate(tt.policy, tt.uri, tt.use)
			if err != nil {
				t.Fatal(err)
			}
			err = gate.Check(tt.scheme, tt.host)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *store.HostError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want a refusal saying %q", err, tt.says)
			}
		})
	}
}

// Every address a request connects to is checked where it is dialled: a
// name a dataset's author controls may resolve to a metadata, loopback or
// private address, which only the platform's own listings reach (the
// third security review's finding 2: with "*", the node agent reached
// [::ffff:169.254.169.254], metadata.google.internal and [fd00:ec2::254]).
func TestEveryAddressIsCheckedWhereItIsDialled(t *testing.T) {
	resolves := map[string]string{
		"author.example":     "169.254.169.254",
		"mapped.example":     "::ffff:169.254.169.254",
		"nat64.example":      "64:ff9b::a9fe:a9fe",
		"ec2v6.example":      "fd00:ec2::254",
		"wireserver.example": "168.63.129.16",
		"loopback.example":   "127.0.0.1",
		"private.example":    "10.0.0.7",
		"public.example":     "52.216.0.10",
		"minio.storage":      "127.0.0.1",
		"minio.link":         "169.254.10.1",
		"bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com": "10.0.1.20",
		"bucket.s3.us-east-1.amazonaws.com":                         "127.0.0.1",
	}
	tests := []struct {
		name   string
		listed []string
		clouds bool
		host   string
		dials  string // the address dialled; "" = refused
		says   string
	}{
		{"* and a public address", []string{"*"}, false, "public.example", "52.216.0.10:443", ""},
		{"* and the metadata address", []string{"*"}, false, "author.example", "", "link-local address"},
		{"* and the metadata address, IPv4-mapped", []string{"*"}, false, "mapped.example", "", "link-local address"},
		{"* and the metadata address behind NAT64", []string{"*"}, false, "nat64.example", "", "link-local address"},
		{"* and AWS's IPv6 metadata address", []string{"*"}, false, "ec2v6.example", "", "a cloud's metadata service"},
		{"* and Azure's WireServer", []string{"*"}, false, "wireserver.example", "", "a cloud's metadata service"},
		{"* and loopback", []string{"*"}, false, "loopback.example", "", "a loopback address"},
		{"* and a private address", []string{"*"}, false, "private.example", "", "a private address"},
		{"a listed name on loopback", []string{"minio.storage"}, false, "minio.storage", "127.0.0.1:443", ""},
		{"a listed name on a link-local address", []string{"minio.link"}, false, "minio.link", "", "link-local"},
		{"a listed address", []string{"*", "169.254.10.1"}, false, "minio.link", "169.254.10.1:443", ""},
		{"a listed network", []string{"*", "10.0.0.0/8"}, false, "private.example", "10.0.0.7:443", ""},
		{"a VPC endpoint on its private address", nil, true, "bucket.vpce-1a2b3c4d-5e6f.s3.us-east-1.vpce.amazonaws.com", "10.0.1.20:443", ""},
		{"a cloud's name on loopback", nil, true, "bucket.s3.us-east-1.amazonaws.com", "", "a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := Policy(tt.listed, tt.clouds)
			policy.LookupNetIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
				a, ok := resolves[host]
				if !ok {
					return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
				}
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			dialled := ""
			errDialled := errors.New("dialled")
			policy.Dial = func(_ context.Context, _, address string) (net.Conn, error) {
				dialled = address
				return nil, errDialled
			}
			gate, err := Gate(policy, "s3://b/", store.UseStorage)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "https://"+tt.host+"/b/k", nil)
			resp, err := store.HTTPClient(gate).Do(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			if dialled != tt.dials {
				t.Fatalf("dialled %q, want %q (%v)", dialled, tt.dials, err)
			}
			if tt.dials == "" && (err == nil || !strings.Contains(err.Error(), tt.says)) {
				t.Fatalf("got %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

// An egress proxy resolves the names it is given and connects wherever
// they point, unchecked: a name allowed by "*" alone never goes through
// it, a name the platform lists does (the red team's: through a proxy,
// 169.254.169.254.nip.io reached the metadata service).
func TestAProxyCarriesOnlyNamesTheCloudsOrThePlatformControl(t *testing.T) {
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Host)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	policy := Policy([]string{"*", "minio.storage"}, true)
	policy.Proxy = http.ProxyURL(proxyURL)
	gate, err := Gate(policy, "s3://b/", store.UseStorage)
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		resp, err := store.HTTPClient(gate).Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	_, err = get("http://169.254.169.254.nip.io/latest/meta-data/")
	var refused *store.HostError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "egress proxy") {
		t.Fatalf("a name allowed by * alone went through the proxy: %v", err)
	}
	if len(asked) != 0 {
		t.Fatalf("the proxy was asked for %v", asked)
	}
	if status, err := get("http://minio.storage/b/k"); err != nil || status != http.StatusTeapot || len(asked) != 1 || asked[0] != "minio.storage" {
		t.Fatalf("a listed name through the proxy: HTTP %d, %v (asked %v)", status, err, asked)
	}
}
