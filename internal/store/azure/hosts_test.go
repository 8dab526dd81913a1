package azure

import (
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
)

// A connection string's endpoint is checked like every other endpoint
// (the third security review's finding 2: its BlobEndpoint bypassed every
// allow-list), and it names the URI's account or none.
func TestAConnectionStringsEndpointIsCheckedLikeAnyOther(t *testing.T) {
	clouds := &store.Endpoints{Cloud: CloudHosts, CloudAllowed: true, Domains: CloudDomains}
	listed := &store.Endpoints{Listed: []string{"127.0.0.1:10000"}, Cloud: CloudHosts, CloudAllowed: true, Domains: CloudDomains}
	tests := []struct {
		name     string
		policy   *store.Endpoints
		insecure bool
		cs       string
		says     string // "" = allowed
	}{
		{"the account's own endpoint, by suffix", clouds, false, "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net", ""},
		{"the default suffix", clouds, false, "AccountName=acct;AccountKey=a2V5", ""},
		{"Azure China", clouds, false, "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn", ""},
		{"a SAS with the account's BlobEndpoint", clouds, false, "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2022&sig=x", ""},
		{"keys, case and spaces as users paste them", clouds, false, " accountname=ACCT ; accountkey=a2V5 ;", ""},
		{"another account", clouds, false, "AccountName=other;AccountKey=a2V5", `names the account "other"`},
		{"another account's BlobEndpoint", clouds, false, "BlobEndpoint=https://other.blob.core.windows.net/;SharedAccessSignature=sig=x", "another account than acct"},
		{"a host on no list", clouds, true, "BlobEndpoint=http://169.254.169.254/;SharedAccessSignature=sig=x", "link-local or metadata address"},
		{"an author's host", clouds, false, "BlobEndpoint=https://collector.attacker.example/;SharedAccessSignature=sig=x", `"collector.attacker.example" is not one the platform team allows`},
		{"an API Gateway", clouds, false, "BlobEndpoint=https://abc.execute-api.us-east-1.amazonaws.com/;SharedAccessSignature=sig=x", "is not one the platform team allows"},
		{"a suffix of the author's", clouds, false, "AccountName=acct;AccountKey=a2V5;EndpointSuffix=attacker.example", `"acct.blob.attacker.example" is not one`},
		{"plain HTTP without insecure", listed, false, "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;AccountName=acct;AccountKey=a2V5", "set insecure: true"},
		{"an emulator the platform listed", listed, true, "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/acct", ""},
		{"plain HTTP to Azure", clouds, true, "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5", "refused over plain HTTP"},
		{"not key=value", clouds, false, "just-a-key", "is not a connection string"},
		{"no endpoint and no account", clouds, false, "AccountKey=a2V5", "names neither BlobEndpoint nor AccountName"},
		{"an endpoint that is no URL", clouds, false, "BlobEndpoint=ftp://acct.blob.core.windows.net;AccountName=acct", "not an http(s) URL"},
		{"an endpoint with a user", clouds, false, "BlobEndpoint=https://acct.blob.core.windows.net@attacker.example/;AccountName=acct", "not an http(s) URL of a host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkConnectionString(store.Source{Insecure: tt.insecure, Endpoints: tt.policy}, "acct", tt.cs)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want an error saying %q", err, tt.says)
			}
			if strings.Contains(err.Error(), "a2V5") || strings.Contains(err.Error(), "sig=") {
				t.Fatalf("the error quotes the credential: %v", err)
			}
		})
	}
}

// A connection string is a Secret's bytes: it is refused or read, never
// a panic, and no error quotes its key.
func FuzzConnectionString(f *testing.F) {
	for _, s := range []string{"AccountName=acct;AccountKey=a2V5", "BlobEndpoint=http://[::1]:10000/x;SharedAccessSignature=sig=abc",
		"DefaultEndpointsProtocol=https;AccountName=a;EndpointSuffix=core.windows.net", ";;=;", "BlobEndpoint=%zz"} {
		f.Add(s)
	}
	policy := &store.Endpoints{Listed: []string{"*"}, Cloud: CloudHosts, CloudAllowed: true, Domains: CloudDomains}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := checkConnectionString(store.Source{Endpoints: policy, Insecure: true}, "acct", s+";AccountKey=SECRETKEYVALUE")
		if err != nil && strings.Contains(err.Error(), "SECRETKEYVALUE") {
			t.Fatalf("the error quotes the key: %v", err)
		}
	})
}
