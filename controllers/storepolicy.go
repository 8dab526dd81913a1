package controllers

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/store/s3"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// StorePolicy is what the platform team allows datasets' streams, and the
// bounds on the operator's reads of their indexes (chart values under
// datasets; docs/security.md). A dataset author chooses the endpoint and
// the Secret; the operator reads with them on its own network and
// memory, so it reads only what the policy allows, bounded in bytes and
// time.
type StorePolicy struct {
	// MaxIndexBytes caps one index read (0: indexfile.DefaultMaxBytes).
	MaxIndexBytes int64
	// MaxDatasetIndexBytes caps the index bytes one dataset's reconcile
	// reads, its streams' indexes and filters' selections together (0:
	// DefaultMaxDatasetIndexBytes): a cap per read alone let 64 streams
	// of 16 MiB indexes take 783 MiB.
	MaxDatasetIndexBytes int64
	// InFlight, if set, bounds the index bytes all reconciles may be
	// reading at once (InFlightBytes of them): each reserves what it may
	// read before it starts.
	InFlight      *semaphore.Weighted
	InFlightBytes int64
	// RequestTimeout bounds one request to a store, and ReadTimeout all
	// the index reads of one reconcile (0: the defaults below).
	RequestTimeout time.Duration
	ReadTimeout    time.Duration
	// AmbientNamespaces may read streams without a credentialsSecretRef,
	// with the operator's own identity (IRSA, instance metadata, its
	// environment); "*" allows every namespace. Empty: none may.
	AmbientNamespaces []string
	// AllowedEndpoints are the store endpoints a stream may name beside
	// the clouds' own (AllowCloudEndpoints): "host" or "host:port",
	// "*.example.com" for any subdomain, an IP address or CIDR, "*" for
	// any host (no private, loopback or metadata address though). With
	// neither (tests, embedding) any endpoint is allowed, unchecked.
	AllowedEndpoints []string
	// AllowCloudEndpoints allows the hosts the clouds operate for their
	// stores and token exchanges (each store's CloudHosts), each for its
	// own cloud, use and account. The manager's default.
	AllowCloudEndpoints bool
	// AllowedAudiences are workload identity audiences allowed beside the
	// clouds' own (workloadidentity.CheckAudience).
	AllowedAudiences []string
}

// AnyEndpoint in AllowedEndpoints allows every host name.
const AnyEndpoint = store.AnyHost

// Defaults of the bounds on index reads.
const (
	DefaultMaxDatasetIndexBytes = 64 << 20
	DefaultStoreRequestTimeout  = 10 * time.Second
	DefaultIndexReadTimeout     = 30 * time.Second
)

func (p StorePolicy) maxIndexBytes() int64 {
	if p.MaxIndexBytes > 0 {
		return p.MaxIndexBytes
	}
	return indexfile.DefaultMaxBytes
}

func (p StorePolicy) datasetBudget() int64 {
	if p.MaxDatasetIndexBytes > 0 {
		return p.MaxDatasetIndexBytes
	}
	return DefaultMaxDatasetIndexBytes
}

func (p StorePolicy) requestTimeout() time.Duration {
	if p.RequestTimeout > 0 {
		return p.RequestTimeout
	}
	return DefaultStoreRequestTimeout
}

func (p StorePolicy) readTimeout() time.Duration {
	if p.ReadTimeout > 0 {
		return p.ReadTimeout
	}
	return DefaultIndexReadTimeout
}

// Check returns why stream i of a dataset in namespace ns may not be read
// by the operator, or nil.
func (p StorePolicy) Check(ns string, i int, s datav1alpha1.Stream) error {
	field := fmt.Sprintf("spec.streams[%d]", i)
	if _, _, err := stores.Lookup(s.Source.URI); err != nil {
		return fmt.Errorf("%s (%q): %w", field, s.Name, err)
	}
	if u, err := url.Parse(s.Source.URI); err == nil && u.Scheme == local.Scheme {
		return fmt.Errorf("%s (%q): %s.source.uri is a file:// URI, which the operator refuses (it would read its own filesystem): put the data in object storage; file:// is for shardfeed serve and tests",
			field, s.Name, field)
	}
	if s.Source.CredentialsSecretRef == nil && s.Source.WorkloadIdentity == nil && !p.ambient(ns) {
		return fmt.Errorf("%s (%q) names no credentialsSecretRef or workloadIdentity, and datasets in namespace %q may not use the operator's own cloud identity: create a Secret with the store's credentials and name it in %s.source.credentialsSecretRef, or read as a ServiceAccount of the namespace with %s.source.workloadIdentity, or ask the platform team to add the namespace to the chart's datasets.ambientCredentialsNamespaces",
			field, s.Name, ns, field, field)
	}
	if s.Source.WorkloadIdentity != nil {
		if err := workloadidentity.CheckAudience(s.Source.URI, workloadidentity.Audience(s.Source), p.AllowedAudiences); err != nil {
			return fmt.Errorf("%s (%q): %w", field, s.Name, err)
		}
	}
	endpoints := p.Endpoints()
	sts, err := stsHost(s.Source)
	if err != nil {
		return fmt.Errorf("%s (%q): %w", field, s.Name, err)
	}
	host, err := endpointHost(s.Source)
	if err != nil {
		return fmt.Errorf("%s (%q): %w", field, s.Name, err)
	}
	if s.Iceberg != nil && s.Iceberg.Catalog.Type == datav1alpha1.IcebergCatalogGlue {
		if err := s3.CheckRegion(s.Iceberg.Catalog.Region); err != nil {
			return fmt.Errorf("%s (%q): iceberg.catalog.region: %w", field, s.Name, err)
		}
	}
	if endpoints == nil {
		return nil
	}
	scheme := "https"
	if s.Source.Insecure && s.Source.Endpoint != "" && !strings.HasPrefix(strings.ToLower(s.Source.Endpoint), "https://") {
		scheme = "http"
	}
	gate, err := stores.Gate(endpoints, s.Source.URI, store.UseStorage)
	if err != nil {
		return fmt.Errorf("%s (%q): %w", field, s.Name, err)
	}
	if err := gate.Check(scheme, host); err != nil {
		return fmt.Errorf("%s (%q): endpoint %w", field, s.Name, err)
	}
	if sts != "" {
		if err := endpoints.Gate(s3.Cloud, store.UseToken, "").Check("https", sts); err != nil {
			return fmt.Errorf("%s (%q): the workload identity's token exchange goes to AWS STS at %q: %w", field, s.Name, sts, err)
		}
	}
	if s.Iceberg == nil {
		return nil
	}
	// Only the author's shardfeed index reaches the catalog, but the list
	// says where a namespace's data may come from: its catalog too.
	host, err = catalogHost(s.Iceberg.Catalog)
	if err != nil {
		return fmt.Errorf("%s (%q): %w", field, s.Name, err)
	}
	if host == "" {
		return nil
	}
	if err := endpoints.Gate(s3.Cloud, store.UseCatalog, "").Check("https", host); err != nil {
		return fmt.Errorf("%s (%q): the Iceberg catalog's endpoint %w", field, s.Name, err)
	}
	return nil
}

// stsHost returns the host an s3:// workload identity exchanges its token
// at ("" for another source), refusing a region that is no region name.
func stsHost(src datav1alpha1.Source) (string, error) {
	if err := s3.CheckRegion(src.Region); err != nil {
		return "", fmt.Errorf("source.region: %w", err)
	}
	u, err := url.Parse(src.URI)
	if err != nil || u.Scheme != s3.Scheme || src.WorkloadIdentity == nil {
		return "", nil
	}
	sts, err := s3.STSURL(store.Source{Endpoint: src.Endpoint, Insecure: src.Insecure, Region: src.Region})
	if err != nil {
		return "", fmt.Errorf("source.region: %w", err)
	}
	return strings.ToLower(sts.Host), nil
}

// Endpoints is the policy's endpoint policy, which every store the
// manager opens is given (store.Source.Endpoints): nil where the policy
// lists nothing and allows no cloud (tests, embedding: unchecked). One
// policy value is made per list, so that its connections are pooled.
func (p StorePolicy) Endpoints() *store.Endpoints {
	if len(p.AllowedEndpoints) == 0 && !p.AllowCloudEndpoints {
		return nil
	}
	key := fmt.Sprintf("%t\x00%s", p.AllowCloudEndpoints, strings.Join(p.AllowedEndpoints, "\x00"))
	if e, ok := endpointPolicies.Load(key); ok {
		return e.(*store.Endpoints)
	}
	e, _ := endpointPolicies.LoadOrStore(key, stores.Policy(p.AllowedEndpoints, p.AllowCloudEndpoints))
	return e.(*store.Endpoints)
}

var endpointPolicies sync.Map

// catalogHost returns the host[:port] an Iceberg catalog is reached at,
// lower-cased, or "" for a SQLite file (the author's own disk).
func catalogHost(c datav1alpha1.IcebergCatalog) (string, error) {
	if c.Type == datav1alpha1.IcebergCatalogGlue {
		if c.Region == "" {
			return "", fmt.Errorf("the Glue catalog names no region, so its endpoint cannot be checked against the platform's allowed endpoints: set iceberg.catalog.region")
		}
		host, err := s3.GlueHost(c.Region)
		if err != nil {
			return "", fmt.Errorf("iceberg.catalog.region: %w", err)
		}
		return host, nil
	}
	u, err := url.Parse(c.URI)
	if err != nil {
		return "", fmt.Errorf("iceberg.catalog.uri %q: %w", c.URI, err)
	}
	if u.Scheme == "sqlite" || u.Scheme == "file" {
		return "", nil
	}
	if u.Host == "" {
		return "", fmt.Errorf("iceberg.catalog.uri %q names no host to check against the platform's allowed endpoints: write scheme://host:port/path", c.URI)
	}
	return strings.ToLower(u.Host), nil
}

// CheckAll checks every stream of a dataset.
func (p StorePolicy) CheckAll(ns string, spec *datav1alpha1.TrainingDatasetSpec) error {
	for i, s := range spec.Streams {
		if err := p.Check(ns, i, s); err != nil {
			return err
		}
	}
	return nil
}

func (p StorePolicy) ambient(ns string) bool {
	return slices.Contains(p.AmbientNamespaces, "*") || slices.Contains(p.AmbientNamespaces, ns)
}

// endpointHost returns the host[:port] a source reaches, lower-cased: its
// endpoint ("host:port" or "http(s)://host:port"), else its cloud's.
func endpointHost(src datav1alpha1.Source) (string, error) {
	endpoint := src.Endpoint
	if endpoint == "" {
		host, err := stores.DefaultHost(src.URI, src.Region) // an unknown scheme is refused, never taken for AWS
		if err != nil {
			return "", fmt.Errorf("source.region: %w", err)
		}
		return host, nil
	}
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("endpoint %q: write host:port or http(s)://host:port", endpoint)
		}
		host = u.Host
	}
	return strings.ToLower(host), nil
}
