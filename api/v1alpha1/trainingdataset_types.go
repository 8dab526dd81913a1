package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Batching is how the streams share a batch.
type Batching string

// The batching methods.
const (
	BatchingRandom     Batching = "random"
	BatchingStratified Batching = "stratified"
	BatchingPerStream  Batching = "per_stream"
)

// Defaults of the spec, as the CRD schema applies them (keep the
// +kubebuilder:default markers below in step; a test checks the CRD).
const (
	DefaultShuffleEnabled = true
	DefaultShuffleSeed    = int64(0)
	DefaultBlockSize      = int64(262144)
	DefaultRunLength      = int64(1)
	DefaultDropLast       = true
	DefaultBatching       = BatchingRandom
	DefaultFormat         = FormatMDS
	DefaultPrefetch       = int32(2)
	// DefaultHandoffMemory is spec.sidecar.handoffMemory's default, bytes.
	DefaultHandoffMemory = int64(256 << 20)
)

// ShardFormat names how the shards of a stream are encoded.
// +kubebuilder:validation:Enum=mds;parquet;jsonl;csv;tsv;arrow;orc;iceberg;lance;megatron;webdataset;huggingface;litdata;lerobot
type ShardFormat string

// The shard formats the sidecar reads (design §2).
const (
	FormatMDS     ShardFormat = "mds"
	FormatParquet ShardFormat = "parquet"
	FormatJSONL   ShardFormat = "jsonl"
	FormatCSV     ShardFormat = "csv"
	FormatTSV     ShardFormat = "tsv"
	FormatArrow   ShardFormat = "arrow"
	// FormatORC is Apache ORC files, one shard per stripe.
	FormatORC ShardFormat = "orc"
	// FormatIceberg is an Apache Iceberg table: its Parquet data files at
	// one snapshot, one shard per row group (spec.streams[].iceberg).
	FormatIceberg ShardFormat = "iceberg"
	// FormatLance is a Lance dataset (source.uri its directory) at one
	// version, one shard per row range of a fragment (spec.streams[].lance).
	FormatLance ShardFormat = "lance"
	// FormatMegatron is Megatron-LM's indexed datasets (.bin tokens, each
	// with its .idx), one shard per run of documents or sequences.
	FormatMegatron ShardFormat = "megatron"
	// FormatWebDataset is WebDataset tar shards: a sample is the members
	// of a tar that share a key, one shard per run of whole samples.
	FormatWebDataset ShardFormat = "webdataset"
	// FormatHuggingFace is Hugging Face datasets as save_to_disk writes
	// them: Arrow IPC stream files, one shard per run of record batches.
	FormatHuggingFace ShardFormat = "huggingface"
	// FormatLitData is LitData's optimized chunks (litdata.optimize's
	// index.json and chunk-*.bin), one shard per chunk.
	FormatLitData ShardFormat = "litdata"
	// FormatLeRobot is a LeRobot dataset (source.uri its root, with
	// meta/info.json): a sample is a frame of an episode, with its
	// cameras' video frames decoded and windows of its features
	// (spec.streams[].lerobot); a shard is frames of one episode.
	FormatLeRobot ShardFormat = "lerobot"
)

// CorruptShardPolicy says what the sidecar does with a shard that stays
// corrupt after its retries.
// +kubebuilder:validation:Enum=fail;skip
type CorruptShardPolicy string

// The corrupt-shard policies.
const (
	// CorruptShardFail stops the feed with an error naming the shard.
	CorruptShardFail CorruptShardPolicy = "fail"
	// CorruptShardSkip delivers the shard's samples as marked pad rows in
	// their planned places, so the plan stays the same for every rank.
	CorruptShardSkip CorruptShardPolicy = "skip"
)

// SecretReference names a Secret in the namespace of the TrainingDataset.
type SecretReference struct {
	// Name of the Secret. Its keys depend on the store (docs/stores.md):
	// s3:// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and optionally
	// AWS_SESSION_TOKEN); gs:// service-account.json, a service account's
	// JSON key; az:// and abfss:// one of AZURE_STORAGE_KEY,
	// AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// WorkloadIdentity reads a stream as a ServiceAccount of the dataset's
// namespace, through the cloud's federation with the cluster: a token of
// that ServiceAccount, for the cloud's audience, is exchanged for the
// cloud's own credentials. Never the operator's identity: training pods of
// the dataset must run as the ServiceAccount (the sidecar reads with its
// projected token), and the operator requests tokens for it only where the
// namespace grants it create on serviceaccounts/token for that
// ServiceAccount (docs/security.md). What the token is exchanged for (the
// AWS role, the Entra application, the Google service account) is named
// by the ServiceAccount's annotations, as the clouds' own webhooks read
// them: its owner decides it, not the dataset's author.
type WorkloadIdentity struct {
	// ServiceAccountName is a ServiceAccount in the dataset's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName"`

	// Audience of the ServiceAccount token. gs:// needs it: the full
	// resource name of the workload identity pool provider,
	// //iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>.
	// Defaults: sts.amazonaws.com (s3://), api://AzureADTokenExchange (az://).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Audience string `json:"audience,omitempty"`

	// RoleARN is deprecated: the AWS role is the ServiceAccount's
	// eks.amazonaws.com/role-arn annotation, which its owner sets (s3://).
	// If set, it must equal the annotation.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$`
	// +optional
	RoleARN string `json:"roleARN,omitempty"`

	// ServiceAccountEmail is deprecated: the Google service account to
	// impersonate after the exchange is the ServiceAccount's
	// iam.gke.io/gcp-service-account annotation (gs://; without it the
	// federated identity itself reads). If set, it must equal the
	// annotation.
	// +kubebuilder:validation:MaxLength=320
	// +kubebuilder:validation:Pattern=`^[^@ ]+@[^@ ]+$`
	// +optional
	ServiceAccountEmail string `json:"serviceAccountEmail,omitempty"`

	// ClientID is deprecated: the Microsoft Entra application (or
	// user-assigned managed identity) federated with the ServiceAccount is
	// its azure.workload.identity/client-id annotation (az://, abfss://).
	// If set, it must equal the annotation.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F-]+$`
	// +optional
	ClientID string `json:"clientID,omitempty"`

	// TenantID is deprecated: the Entra tenant is the ServiceAccount's
	// azure.workload.identity/tenant-id annotation. If set, it must equal
	// the annotation.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-zA-Z.-]+$`
	// +optional
	TenantID string `json:"tenantID,omitempty"`
}

// IcebergCatalogType is the kind of an Iceberg catalog.
// +kubebuilder:validation:Enum=rest;sql;glue
type IcebergCatalogType string

// The Iceberg catalogs shardfeed index reads.
const (
	// IcebergCatalogREST is Iceberg's REST catalog protocol (Polaris,
	// Gravitino, Nessie, Unity, Lakekeeper, Iceberg's own server…).
	IcebergCatalogREST IcebergCatalogType = "rest"
	// IcebergCatalogSQL is a catalog kept in a SQL database (pyiceberg's
	// SqlCatalog, Iceberg's JdbcCatalog): SQLite, PostgreSQL or MySQL.
	IcebergCatalogSQL IcebergCatalogType = "sql"
	// IcebergCatalogGlue is the AWS Glue Data Catalog.
	IcebergCatalogGlue IcebergCatalogType = "glue"
)

// IcebergCatalog says where a table's catalog is. Only shardfeed index
// reads it, with the credentials of whoever runs it; the operator and the
// sidecars read the index it writes, never the catalog, so a catalog's
// credentials never enter the cluster (docs/formats.md).
// +kubebuilder:validation:XValidation:rule="self.type == 'glue' || has(self.uri)",message="a rest or sql catalog needs uri: http(s)://host:port/path for rest, sqlite:///path, postgresql://host/db or mysql://host/db for sql"
// +kubebuilder:validation:XValidation:rule="self.type != 'rest' || self.uri.matches('^https?://[^/@]+(/.*)?$')",message="a rest catalog's uri is http(s)://host[:port][/path], with no user or password (give credentials to shardfeed index, not the manifest)"
// +kubebuilder:validation:XValidation:rule="self.type != 'sql' || self.uri.matches('^(sqlite:///.+|(postgresql|postgres|mysql)://[^/@:]+(:[0-9]{1,5})?/.+)$')",message="a sql catalog's uri is sqlite:///path, postgresql://host[:port]/database or mysql://host[:port]/database, with no user or password (give credentials to shardfeed index, not the manifest)"
// +kubebuilder:validation:XValidation:rule="self.type == 'glue' || !has(self.region) && !has(self.catalogID)",message="region and catalogID apply to a glue catalog only: drop them"
// +kubebuilder:validation:XValidation:rule="self.type != 'glue' || !has(self.uri)",message="a glue catalog has no uri: it is the account's Glue Data Catalog in region (and catalogID for another account's)"
type IcebergCatalog struct {
	// Type of the catalog: rest, sql or glue.
	Type IcebergCatalogType `json:"type"`

	// Name of the catalog: the catalog_name of a sql catalog's rows, the
	// name a REST catalog's tables are under. Default "default".
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name string `json:"name,omitempty"`

	// URI of a rest or sql catalog.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	URI string `json:"uri,omitempty"`

	// Warehouse to ask a REST catalog for (its "warehouse" parameter).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Warehouse string `json:"warehouse,omitempty"`

	// Region of a glue catalog. Empty: the AWS default of shardfeed
	// index's environment.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	// +optional
	Region string `json:"region,omitempty"`

	// CatalogID of a glue catalog: the AWS account whose catalog it is.
	// Empty: the caller's account.
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	// +optional
	CatalogID string `json:"catalogID,omitempty"`
}

// IcebergTable is the Iceberg table a stream reads, at one snapshot: the
// pinned one, the one a ref points to, or the table's current one, as
// shardfeed index resolved it. The snapshot is part of the plan's
// fingerprint: a table that moves on changes no running job's plan.
// +kubebuilder:validation:XValidation:rule="!has(self.snapshotID) || !has(self.ref)",message="pin the table with snapshotID or ref, not both"
type IcebergTable struct {
	// Catalog the table is in.
	Catalog IcebergCatalog `json:"catalog"`

	// Table is the table's identifier, namespace.table (a nested
	// namespace is dotted: a.b.table).
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[^.]+([.][^.]+)+$')",message="iceberg.table is namespace.table, e.g. analytics.events"
	Table string `json:"table"`

	// SnapshotID pins the table's snapshot: shardfeed index resolves this
	// one and the dataset refuses an index at any other.
	// +optional
	SnapshotID *int64 `json:"snapshotID,omitempty"`

	// Ref is a branch or tag whose snapshot shardfeed index resolves.
	// Empty, with no snapshotID: the table's current snapshot.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Ref string `json:"ref,omitempty"`
}

// LanceTable pins the version of a lance stream's dataset: the given one,
// the one a tag names, or (neither) the latest when shardfeed index ran.
// The version is part of the plan's fingerprint, so a dataset that moves
// on changes no running job's plan; pin by tag, which keeps a version from
// Lance's cleanup of old versions.
// +kubebuilder:validation:XValidation:rule="!has(self.version) || !has(self.tag)",message="pin the dataset with version or tag, not both"
type LanceTable struct {
	// Version pins the dataset's version: shardfeed index resolves this
	// one and the dataset refuses an index at any other.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Version *int64 `json:"version,omitempty"`

	// Tag names the version to read; the dataset refuses an index
	// resolved from another tag.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	// +optional
	Tag string `json:"tag,omitempty"`
}

// Partitions reads a stream's source as a hive-partitioned tree: key=value
// directories (date=2024-01-01/region=eu/part-0.parquet) whose values are
// columns of every row below them. shardfeed index walks only the
// directories select may keep and records the selection in the stream's
// index, which the dataset refuses when it differs from this one.
type Partitions struct {
	// Select is a CEL expression over the partition columns, e.g.
	// region == 'eu' && date >= '2024-01-02': only the files of the
	// partitions it is true for are indexed, and no other is fetched.
	// Empty: every partition. A partition whose directory says
	// __HIVE_DEFAULT_PARTITION__ has a null value.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Select string `json:"select,omitempty"`

	// Columns are the partition columns with their types, in the tree's
	// order (outermost first). Empty: their names from the tree, their
	// types inferred as pyarrow's hive partitioning does (int32 where
	// every value is one, else utf8).
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Columns []PartitionColumn `json:"columns,omitempty"`
}

// PartitionColumn is a partition column's name and type.
type PartitionColumn struct {
	// Name is the key of the column's directories (date in date=…).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('_shardfeed_') && !self.contains('/') && !self.contains('=')",message="a partition column name has no / or = and does not start with _shardfeed_"
	Name string `json:"name"`

	// Type of the values: utf8, int32, int64, float64 or bool.
	// +kubebuilder:validation:Enum=utf8;int32;int64;float64;bool
	Type string `json:"type"`
}

// Source says where the shards and the index of a stream live, and how to
// reach them: the same shape for every store (docs/stores.md).
// +kubebuilder:validation:XValidation:rule="!has(self.insecure) || !self.insecure || has(self.endpoint)",message="insecure (plain HTTP) applies to an endpoint: set source.endpoint (e.g. http://minio.storage:9000) or drop insecure"
// +kubebuilder:validation:XValidation:rule="!has(self.region) || self.uri.startsWith('s3://')",message="source.region applies to s3:// only: drop it (gs:// and az:// buckets know their region)"
// +kubebuilder:validation:XValidation:rule="!has(self.workloadIdentity) || !has(self.credentialsSecretRef)",message="a source reads with credentialsSecretRef or workloadIdentity, not both: drop one"
// +kubebuilder:validation:XValidation:rule="!has(self.workloadIdentity) || !self.uri.startsWith('file://')",message="workloadIdentity applies to object stores, not file://"
// +kubebuilder:validation:XValidation:rule="!has(self.workloadIdentity) || !self.uri.startsWith('gs://') || has(self.workloadIdentity.audience)",message="workloadIdentity on gs:// needs audience, the workload identity pool provider (//iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>)"
type Source struct {
	// URI of the stream's prefix: s3://bucket/prefix/ (AWS S3 or any
	// S3-compatible store), gs://bucket/prefix/ (Google Cloud Storage),
	// az://account/container/prefix/ or
	// abfss://container@account.dfs.core.windows.net/prefix/ (Azure Blob
	// Storage), or file:///path/ for shardfeed serve and tests.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$') || self.matches('^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/.*)?$') || self.matches('^az://[a-z0-9]{3,24}/[a-z0-9][a-z0-9-]{1,61}[a-z0-9](/.*)?$') || self.matches('^abfss://[a-z0-9][a-z0-9-]{1,61}[a-z0-9]@[a-z0-9]{3,24}[.]dfs[.]core[.]windows[.]net(/.*)?$') || self.matches('^file:///.+')",message="source.uri must be s3://<bucket>/<prefix>/, gs://<bucket>/<prefix>/, az://<account>/<container>/<prefix>/, abfss://<container>@<account>.dfs.core.windows.net/<prefix>/ (valid bucket, account and container names) or file:///<absolute path>/"
	URI string `json:"uri"`

	// IndexURI is where shardfeed's index of the stream and its filters'
	// selections are, when not in the stream's own prefix (under
	// _shardfeed/ there): a prefix of the same store, read with the same
	// endpoint and credentials, for data in a bucket the team may not
	// write to. shardfeed index --index-uri writes it. An MDS stream's own
	// index stays in its prefix; an iceberg stream's source.uri is its
	// index's place already.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$') || self.matches('^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/.*)?$') || self.matches('^az://[a-z0-9]{3,24}/[a-z0-9][a-z0-9-]{1,61}[a-z0-9](/.*)?$') || self.matches('^abfss://[a-z0-9][a-z0-9-]{1,61}[a-z0-9]@[a-z0-9]{3,24}[.]dfs[.]core[.]windows[.]net(/.*)?$') || self.matches('^file:///.+')",message="source.indexURI must be s3://<bucket>/<prefix>/, gs://<bucket>/<prefix>/, az://<account>/<container>/<prefix>/, abfss://<container>@<account>.dfs.core.windows.net/<prefix>/ (valid bucket, account and container names) or file:///<absolute path>/"
	// +optional
	IndexURI string `json:"indexURI,omitempty"`

	// Endpoint of the store when it is not the cloud's own: an
	// S3-compatible store (http://minio.storage:9000), a GCS or Azure
	// emulator, or a private endpoint. Empty: AWS S3,
	// storage.googleapis.com, or <account>.blob.core.windows.net.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?://)?[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$')",message="source.endpoint is host[:port], optionally with http:// or https:// (e.g. http://minio.storage:9000), with no path"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Region of an s3:// bucket. Empty means the store's default.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	// +optional
	Region string `json:"region,omitempty"`

	// Insecure allows plain HTTP to the endpoint.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// CredentialsSecretRef names the Secret with the store's credentials;
	// its keys depend on the store (see SecretReference).
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// WorkloadIdentity reads as a ServiceAccount of the dataset's namespace
	// through the cloud's workload identity federation.
	// +optional
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`
}

// Stream is one object-store prefix holding shards and their index, with its
// weight in the mix.
// +kubebuilder:validation:XValidation:rule="[has(self.proportion), has(self.repeat), has(self.choose)].filter(x, x).size() <= 1",message="a stream has at most one weight: proportion, repeat or choose"
// +kubebuilder:validation:XValidation:rule="(has(self.format) && self.format == 'iceberg') == has(self.iceberg)",message="format: iceberg needs an iceberg section (catalog and table), and an iceberg section needs format: iceberg"
// +kubebuilder:validation:XValidation:rule="!has(self.iceberg) || !has(self.source.indexURI)",message="an iceberg stream's index is at source.uri already: drop source.indexURI"
// +kubebuilder:validation:XValidation:rule="!has(self.lance) || has(self.format) && self.format == 'lance'",message="a lance section needs format: lance"
// +kubebuilder:validation:XValidation:rule="!has(self.source.indexURI) || self.source.indexURI.split('/')[0] == self.source.uri.split('/')[0]",message="source.indexURI must use the same store as source.uri (the same scheme, endpoint and credentials)"
// +kubebuilder:validation:XValidation:rule="!has(self.partitions) || has(self.format) && (self.format == 'parquet' || self.format == 'orc')",message="partitions apply to a tree of parquet or orc files: set format: parquet or format: orc"
// +kubebuilder:validation:XValidation:rule="!has(self.webdataset) || has(self.format) && self.format == 'webdataset'",message="a webdataset section needs format: webdataset"
// +kubebuilder:validation:XValidation:rule="!has(self.megatron) || has(self.format) && self.format == 'megatron'",message="a megatron section needs format: megatron"
// +kubebuilder:validation:XValidation:rule="!has(self.litdata) || has(self.format) && self.format == 'litdata'",message="a litdata section needs format: litdata"
// +kubebuilder:validation:XValidation:rule="!has(self.huggingface) || has(self.format) && self.format == 'huggingface'",message="a huggingface section needs format: huggingface"
// +kubebuilder:validation:XValidation:rule="!has(self.lerobot) || has(self.format) && self.format == 'lerobot'",message="a lerobot section needs format: lerobot"
type Stream struct {
	// Name of the stream, unique in the dataset. Batches carry the stream's
	// position in spec.streams in the _shardfeed_stream column.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Source of the stream's shards and index.
	Source Source `json:"source"`

	// Format of the shards.
	// +kubebuilder:default=mds
	// +optional
	Format ShardFormat `json:"format,omitempty"`

	// Iceberg names the table of an iceberg stream. Its index, written by
	// shardfeed index into source.uri, lists the table's data files at one
	// snapshot; source.uri's bucket (or container) holds them.
	// +optional
	Iceberg *IcebergTable `json:"iceberg,omitempty"`

	// Lance pins the version of a lance stream's dataset (format: lance,
	// source.uri the dataset's directory). Absent: the version shardfeed
	// index found latest.
	// +optional
	Lance *LanceTable `json:"lance,omitempty"`

	// Partitions reads source.uri as a hive-partitioned tree of parquet or
	// orc files, its partition values as columns, selected by a CEL
	// expression (docs/formats.md).
	// +optional
	Partitions *Partitions `json:"partitions,omitempty"`

	// WebDataset names a webdataset stream's tars by a brace pattern and
	// retypes its columns: what shardfeed index -f indexes.
	// +optional
	WebDataset *WebDatasetStream `json:"webdataset,omitempty"`

	// Megatron says what a megatron stream's sample is: what shardfeed
	// index -f indexes.
	// +optional
	Megatron *MegatronStream `json:"megatron,omitempty"`

	// LitData gives a litdata stream written with LitData's TokensLoader
	// its samples' length: what shardfeed index -f indexes.
	// +optional
	LitData *LitDataStream `json:"litdata,omitempty"`

	// HuggingFace chooses the split of a huggingface stream whose source
	// holds several (a DatasetDict's folder, a datasets cache folder):
	// what shardfeed index -f indexes.
	// +optional
	HuggingFace *HuggingFaceStream `json:"huggingface,omitempty"`

	// LeRobot selects a lerobot stream's episodes (what shardfeed index
	// -f indexes) and serves some of its keys as windows of neighbouring
	// frames, as LeRobotDataset's delta_timestamps.
	// +optional
	LeRobot *LeRobotStream `json:"lerobot,omitempty"`

	// Tokenize serves a text column of the stream as token ids, tokenized
	// in the sidecar; it replaces spec.tokenize for this stream.
	// +optional
	Tokenize *Tokenize `json:"tokenize,omitempty"`

	// Filter is a CEL expression over the stream's columns, e.g.
	// lang == 'en' && score >= 0.5: only the rows it is true for are in
	// the plan (its counts, weights and batches), and a shard with none is
	// never fetched. shardfeed index --filter computes the matching rows
	// once and writes them beside the stream's index (docs/planner.md,
	// row filters). A null is unknown, as in SQL and pyarrow: lang != 'en'
	// leaves a null lang out; lang == null tests for one.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Filter string `json:"filter,omitempty"`

	// Proportion is a relative weight, as an exact decimal string ("0.25",
	// "3"): the stream gets proportion/sum(proportions) of the epoch.
	// Excludes repeat and choose on every stream.
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="proportion must be above 0: leave the stream out instead"
	// +optional
	Proportion string `json:"proportion,omitempty"`

	// Repeat multiplies the stream's size per epoch, as an exact decimal
	// string ("2", "0.5"); the count is rounded down.
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="repeat must be above 0: leave the stream out instead"
	// +optional
	Repeat string `json:"repeat,omitempty"`

	// Choose fixes the number of samples the stream gives per epoch.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Choose *int64 `json:"choose,omitempty"`

	// Columns to deliver. Empty means every column of the stream.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('_shardfeed_')",message="column names starting with _shardfeed_ are the ones shardfeed adds to every batch: rename the column"
	// +optional
	Columns []string `json:"columns,omitempty"`
}

// WebDatasetStream is a webdataset stream's tars and column types.
type WebDatasetStream struct {
	// Shards is a brace pattern of the stream's tars under source.uri, as
	// WebDataset names shard sets ("shards-{000000..012345}.tar"): only
	// those are indexed, and each must exist. Empty: every tar.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Shards string `json:"shards,omitempty"`

	// Columns retype extensions' columns (by default typed by
	// webdataset's conventions: txt as text, cls as an integer, json as
	// its text, every other as bytes).
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	Columns []WebDatasetColumn `json:"columns,omitempty"`
}

// WebDatasetColumn is the type of one extension's column.
type WebDatasetColumn struct {
	// Name is the extension ("jpg", "seg.png").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Type of its values: the bytes, their UTF-8 text, or the integer
	// they spell.
	// +kubebuilder:validation:Enum=binary;utf8;int64
	Type string `json:"type"`
}

// MegatronStream is what a megatron stream's sample is.
type MegatronStream struct {
	// Unit is a document (the tokens of its sequences) or a sequence
	// (what megatron-core's IndexedDataset[i] returns; a multimodal
	// dataset's sequences carry their mode).
	// +kubebuilder:validation:Enum=document;sequence
	// +kubebuilder:default=document
	// +optional
	Unit string `json:"unit,omitempty"`
}

// LitDataStream is how a litdata stream's chunks are cut into samples.
type LitDataStream struct {
	// BlockSize is the tokens of a sample of a dataset optimized with
	// LitData's TokensLoader (its block_size): each chunk's tokens, end
	// to end, cut every BlockSize tokens, a chunk's rest left out, as
	// LitData's StreamingDataset(item_loader=TokensLoader(block_size))
	// reads them. Required for such a dataset; refused for any other.
	// +kubebuilder:validation:Minimum=1
	// +optional
	BlockSize int64 `json:"blockSize,omitempty"`
}

// HuggingFaceStream is which split of a Hugging Face dataset a stream is.
type HuggingFaceStream struct {
	// Split is the split to serve ("train"): of a DatasetDict saved with
	// save_to_disk (its dataset_dict.json lists them, each in a folder of
	// its name), or of a datasets cache folder (files named
	// <builder>-<split>[-NNNNN-of-NNNNN].arrow). A source of several
	// splits is refused without one: splits are never mixed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^\w+(\.\w+)*$`
	// +optional
	Split string `json:"split,omitempty"`
}

// LeRobotStream is which episodes of a LeRobot dataset a stream serves,
// and how.
// +kubebuilder:validation:XValidation:rule="!has(self.frames) || !has(self.cameras) || self.cameras == 'Frames'",message="lerobot.frames sizes the frames the sidecar decodes: with cameras: Clips the trainer decodes them (and resizes them itself)"
type LeRobotStream struct {
	// Episodes selects episodes by episode_index: "0-9,15" (ranges
	// inclusive). Empty: every one.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[0-9]+(-[0-9]+)?( *, *[0-9]+(-[0-9]+)?)*$`
	// +optional
	Episodes string `json:"episodes,omitempty"`

	// DeltaTimestamps serve each key named (a data column or a camera)
	// as a window: the frames at these offsets, in seconds, from each
	// sample's frame, held at the episode's first and last frames, with
	// a mask KEY_is_pad of the held ones (LeRobotDataset's
	// delta_timestamps and padding). Each offset must be a whole number
	// of frames, within tolerance.
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=256
	// +optional
	DeltaTimestamps []LeRobotWindow `json:"deltaTimestamps,omitempty"`

	// Tolerance, in seconds, of a window's offsets from whole frames and
	// of a decoded frame's time from the one asked for, as an exact
	// decimal string ("0.0001", LeRobotDataset's tolerance_s, is the
	// default).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	Tolerance string `json:"tolerance,omitempty"`

	// Frames resizes every camera's frames (a video's, and an image
	// feature's images), in the sidecar, as an image column's images are
	// (torchvision's Resize(resize) then CenterCrop((height, width)) on a
	// Pillow image of the frame): each camera is then served as (3,
	// height, width). Default: each camera at its own size. draft is for
	// JPEGs and is refused here.
	// +kubebuilder:validation:XValidation:rule="!has(self.draft) || !self.draft",message="lerobot.frames.draft: draft decodes JPEGs smaller; video frames are decoded whole"
	// +optional
	Frames *ImageDecode `json:"frames,omitempty"`

	// Cameras is what a video camera's column holds: Frames (the
	// default), its frames decoded in the sidecar, uint8 (3, H, W); or
	// Clips (an image feature's images are decoded either way), the
	// compressed video for the trainer to decode itself (on its GPU,
	// with torchcodec): per sample an MP4 of its frames from the keyframe
	// they decode from, and KEY_time, the second each frame is shown at
	// in it (shardfeed.video.decode_clips decodes them).
	// +kubebuilder:validation:Enum=Frames;Clips
	// +optional
	Cameras string `json:"cameras,omitempty"`
}

// The values of spec.streams[].lerobot.cameras.
const (
	CamerasFrames = "Frames"
	CamerasClips  = "Clips"
)

// LeRobotWindow is the window of one key.
type LeRobotWindow struct {
	// Key is the data column or camera ("observation.state",
	// "observation.images.top").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key"`

	// Seconds are the offsets, as exact decimal strings ("-0.1", "0").
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	Seconds []string `json:"seconds"`
}

// Tokenize serves a text column as token ids: a Hugging Face
// tokenizer.json's, exactly as the tokenizers library gives them.
type Tokenize struct {
	// Tokenizer is the tokenizer.json.
	Tokenizer TokenizerFile `json:"tokenizer"`

	// Column is the text column (utf8) tokenized.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Column string `json:"column"`

	// Output is the column of the ids: a list of int32 a row. It is added
	// beside the text column.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:default=input_ids
	// +optional
	Output string `json:"output,omitempty"`

	// AddSpecialTokens adds the tokenizer's special tokens around each
	// document (its post-processor's: a begin-of-text token, BERT's [CLS]
	// and [SEP]), as tokenizers' encode does by default.
	// +kubebuilder:default=true
	// +optional
	AddSpecialTokens *bool `json:"addSpecialTokens,omitempty"`

	// EndOfDocument, if set, is a token of the tokenizer (its content,
	// e.g. <|endoftext|>) appended to each document's ids: what separates
	// documents in a pretraining corpus.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	EndOfDocument string `json:"endOfDocument,omitempty"`

	// Chat, if set, makes column a conversation (a list of {role,
	// content} messages, or a string of their JSON) rendered with a chat
	// template, then tokenized (without the post-processor's special
	// tokens: the template writes its own), with a loss mask that keeps
	// the assistant's tokens.
	// +optional
	Chat *ChatTemplate `json:"chat,omitempty"`
}

// ChatTemplate renders conversations as transformers' apply_chat_template
// does (docs/tokenize.md, chat).
type ChatTemplate struct {
	// Template is the Jinja chat template: a model's own (tokenizer_config
	// .json's chat_template) where its constructs are supported, else the
	// sidecar refuses it naming the construct. `{% generation %}` …
	// `{% endgeneration %}` marks what the assistant says: the tokens of
	// the loss mask.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	Template string `json:"template"`

	// BOSToken is the template's bos_token (BOSToken and EOSToken are
	// tokenizer_config.json's).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	BOSToken string `json:"bosToken,omitempty"`
	// EOSToken is the template's eos_token.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	EOSToken string `json:"eosToken,omitempty"`

	// AssistantStart and AssistantEnd mark what the assistant says in a
	// template without {% generation %} (a model's own, as it is): the
	// mask holds the text after each AssistantStart (its header, e.g.
	// "<|im_start|>assistant\n") through the AssistantEnd that follows
	// (its end of turn, e.g. "<|im_end|>"), as TRL's completion-only
	// collator marks a response. A template with a generation block takes
	// neither.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	AssistantStart string `json:"assistantStart,omitempty"`
	// AssistantEnd ends what AssistantStart starts (empty: the text's end).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	AssistantEnd string `json:"assistantEnd,omitempty"`

	// LossMask is the column of the mask: a list of uint8 a row, 1 at the
	// assistant's tokens (what {% generation %} wrote) and 0 elsewhere.
	// In a packed dataset it is the packed loss_mask instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:default=assistant_masks
	// +optional
	LossMask string `json:"lossMask,omitempty"`
}

// TokenizerFile is where a tokenizer.json is, and its content's hash.
// +kubebuilder:validation:XValidation:rule="has(self.uri) != has(self.configMapRef)",message="give the tokenizer's uri or its configMapRef, one of them"
type TokenizerFile struct {
	// URI of the tokenizer.json, in a store shardfeed reads (s3://,
	// gs://, az://, file://), reached with the stream's source settings
	// and credentials.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URI string `json:"uri,omitempty"`

	// ConfigMapRef is a key of a ConfigMap in the dataset's namespace
	// that holds the tokenizer.json (a key ending in .gz: gzipped, in
	// binaryData, for a file over the ConfigMap's 1 MiB), mounted into the
	// sidecar read-only.
	// +optional
	ConfigMapRef *ConfigMapKey `json:"configMapRef,omitempty"`

	// SHA256 pins the file's content (hex, as sha256sum prints it): the
	// sidecar refuses a file of another content, and the plan's
	// fingerprint holds it, so a changed tokenizer is a new plan.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256"`
}

// ConfigMapKey names a key of a ConfigMap.
type ConfigMapKey struct {
	// Name of the ConfigMap, in the dataset's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
	// Key of the file in the ConfigMap (data or binaryData).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ColumnDecode is a column the sidecar serves decoded.
type ColumnDecode struct {
	// Column to decode: a binary column of the streams (MDS jpeg, png or
	// bytes; Parquet or ORC binary; WebDataset jpg, png), or a struct of
	// an image's bytes (a Hugging Face Image feature), kept by
	// spec.streams[].columns.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Column string `json:"column"`

	// Image decodes each value, a JPEG or PNG image, to RGB pixels as
	// torchvision's Resize(resize) then CenterCrop((height, width)) on a
	// Pillow image would: the column becomes height × width × 3 uint8
	// per row. Decoding runs in the sidecar, on its cores.
	Image ImageDecode `json:"image"`
}

// ImageDecode is the size images are decoded to.
// +kubebuilder:validation:XValidation:rule="!has(self.resize) || self.resize >= self.height && self.resize >= self.width",message="image.resize is the shorter side before the centre crop: it must be at least height and width"
type ImageDecode struct {
	// Height of the centre crop, in pixels.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	Height int32 `json:"height"`

	// Width of the centre crop, in pixels.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	Width int32 `json:"width"`

	// Resize is the length the shorter side is resized to first, with
	// antialiased bilinear filtering, keeping the aspect ratio. Default:
	// the larger of height and width.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8192
	// +optional
	Resize *int32 `json:"resize,omitempty"`

	// Draft decodes a JPEG at 1/2, 1/4 or 1/8 of its size in the inverse
	// DCT wherever the resize shrinks it at least that much, then resizes
	// that, as Pillow's Image.draft: faster on images much larger than
	// resize, with pixels a few levels from a full decode's. Only the
	// sidecar built with libjpeg-turbo (the image's, the x86-64 wheel's)
	// reduces; the portable build decodes in full.
	// +optional
	Draft bool `json:"draft,omitempty"`
}

// Shuffle configures how samples are shuffled.
// +kubebuilder:validation:XValidation:rule="!has(self.runLength) || !has(self.blockSize) || self.runLength <= self.blockSize",message="shuffle.runLength must be at most shuffle.blockSize: a run is the samples kept together inside a shuffled block"
type Shuffle struct {
	// Enabled turns shuffling on.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Seed of every random choice of the plan.
	// +kubebuilder:default=0
	// +optional
	Seed *int64 `json:"seed,omitempty"`

	// BlockSize is the number of consecutive samples of a split that are
	// shuffled together. Larger blocks mix more and need more cache.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=262144
	// +optional
	BlockSize *int64 `json:"blockSize,omitempty"`

	// RunLength keeps runs of that many consecutive samples together: a
	// block's runs are shuffled, not its samples. 1 shuffles samples. Runs
	// make each batch a few contiguous reads instead of one per sample,
	// which is faster when samples are small (docs/planner.md, runs), and
	// mix less. A run length above 1 makes a plan of version 3.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +kubebuilder:default=1
	// +optional
	RunLength *int64 `json:"runLength,omitempty"`
}

// SidecarSpec configures the data-loading sidecar injected into pods.
type SidecarSpec struct {
	// Image of the sidecar. Empty means the operator's default.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="sidecar.image is an image reference, e.g. ghcr.io/shardfeed/shardfeed:0.1.0, with no spaces"
	Image string `json:"image,omitempty"`

	// Resources of the sidecar container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// CacheLimit bounds the disk the shard cache uses in a pod.
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="sidecar.cacheLimit must be above 0, e.g. 20Gi; leave it out for no limit"
	// +optional
	CacheLimit *resource.Quantity `json:"cacheLimit,omitempty"`

	// Prefetch is the number of shards fetched and decoded ahead of the
	// ones the readers need now.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=2
	// +optional
	Prefetch *int32 `json:"prefetch,omitempty"`

	// HandoffMemory bounds the shared memory the sidecar hands batches over
	// in (the training processes map it: the tensors are views of it, with
	// no copy on their side). Its pages are charged to the pod, so the
	// webhook adds it to the sidecar's memory request (and limit, if set).
	// Default 256Mi; 0 sends the batches through the socket.
	// +kubebuilder:validation:XValidation:rule="!quantity(self).isLessThan(quantity('0'))",message="sidecar.handoffMemory must be 0 or more, e.g. 256Mi"
	// +optional
	HandoffMemory *resource.Quantity `json:"handoffMemory,omitempty"`

	// MetricsPort is the TCP port of the sidecar's Prometheus metrics.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MetricsPort *int32 `json:"metricsPort,omitempty"`
}

// TrainingDatasetSpec declares the data of a training job: its streams, how
// they are mixed, shuffled and split.
// +kubebuilder:validation:XValidation:rule="self.globalBatchSize % self.numSplits == 0",message="globalBatchSize must be a multiple of numSplits: each step takes globalBatchSize/numSplits samples from every split"
// +kubebuilder:validation:XValidation:rule="self.streams.all(s, has(s.proportion)) || self.streams.all(s, !has(s.proportion))",message="give every stream a proportion (relative weights) or none of them (repeat, choose or nothing): the two kinds do not mix"
// +kubebuilder:validation:XValidation:rule="!has(self.epochSize) || self.streams.all(s, !has(s.repeat) && !has(s.choose))",message="epochSize goes with proportions or no weights: with repeat or choose the epoch size follows from them"
// +kubebuilder:validation:XValidation:rule="self.streams == oldSelf.streams",message="spec.streams is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="self.numSplits == oldSelf.numSplits",message="spec.numSplits is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="self.globalBatchSize == oldSelf.globalBatchSize",message="spec.globalBatchSize is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.epochSize) == has(oldSelf.epochSize) && (!has(self.epochSize) || self.epochSize == oldSelf.epochSize)",message="spec.epochSize is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="self.shuffle == oldSelf.shuffle",message="spec.shuffle is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.dropLast) == has(oldSelf.dropLast) && (!has(self.dropLast) || self.dropLast == oldSelf.dropLast)",message="spec.dropLast is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.batching) == has(oldSelf.batching) && (!has(self.batching) || self.batching == oldSelf.batching)",message="spec.batching is immutable: it shapes the plan; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.schedule) == has(oldSelf.schedule)",message="spec.schedule cannot be added to or removed from a TrainingDataset: a scheduled plan draws each stream pass after pass from the first step; a different plan is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.decode) == has(oldSelf.decode) && (!has(self.decode) || self.decode == oldSelf.decode)",message="spec.decode is immutable: every rank of a job must get batches of the same columns; a different decoding is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="has(self.packing) == has(oldSelf.packing) && (!has(self.packing) || self.packing == oldSelf.packing)",message="spec.packing is immutable: its packs are the plan's samples; a different packing is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="!has(self.packing) || !has(self.decode)",message="spec.packing serves only its column's tokens: drop spec.decode"
// +kubebuilder:validation:XValidation:rule="!has(self.packing) || self.streams.all(s, !has(s.columns))",message="a packed dataset serves its packing column and what packing adds, no other: drop spec.streams[].columns"
// +kubebuilder:validation:XValidation:rule="!has(self.schedule) || self.batching != 'per_stream'",message="a schedule mixes every batch's streams in its phase's proportions: drop batching: per_stream"
// +kubebuilder:validation:XValidation:rule="has(self.bucketing) == has(oldSelf.bucketing) && (!has(self.bucketing) || self.bucketing == oldSelf.bucketing)",message="spec.bucketing is immutable: its buckets shape every batch; a different bucketing is a new TrainingDataset"
// +kubebuilder:validation:XValidation:rule="!has(self.bucketing) || !has(self.schedule) || !has(self.bucketing.batchSizes) && !has(self.bucketing.budget)",message="a schedule's phases set the global batch size: drop spec.bucketing.batchSizes (or budget), or spec.schedule"
// +kubebuilder:validation:XValidation:rule="!has(self.bucketing) || !has(self.packing)",message="packs all hold sequenceLength slots, so bucketing them by length sorts nothing: pack or bucket, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.bucketing) || !has(self.bucketing.batchSizes) || self.bucketing.batchSizes.all(b, b % self.numSplits == 0)",message="spec.bucketing.batchSizes must be multiples of numSplits: each step takes a bucket's batch size / numSplits samples from every split"
// +kubebuilder:validation:XValidation:rule="!has(self.bucketing) || !has(self.bucketing.budget) || self.bucketing.budget >= self.numSplits * (has(self.bucketing.boundaries) ? self.bucketing.boundaries[size(self.bucketing.boundaries) - 1] : 1)",message="spec.bucketing.budget holds numSplits samples of the longest bounded bucket at least: raise it, or lower numSplits"
type TrainingDatasetSpec struct {
	// Streams of the dataset, mixed by their weights.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Streams []Stream `json:"streams"`

	// EpochSize is the number of samples per epoch. Empty means the sum of
	// the streams' sizes. Only with relative weights (proportion) or none.
	// +kubebuilder:validation:Minimum=1
	// +optional
	EpochSize *int64 `json:"epochSize,omitempty"`

	// Shuffle settings.
	// +optional
	Shuffle Shuffle `json:"shuffle,omitempty"`

	// NumSplits is the number of splits the epoch is cut into; every world
	// size the job runs at must divide it.
	// +kubebuilder:validation:Minimum=1
	NumSplits int32 `json:"numSplits"`

	// GlobalBatchSize is the number of samples per step over all ranks; a
	// multiple of numSplits.
	// +kubebuilder:validation:Minimum=1
	GlobalBatchSize int64 `json:"globalBatchSize"`

	// DropLast drops the tail of each split that does not fill a batch;
	// false pads it with marked rows (_shardfeed_pad = true).
	// +kubebuilder:default=true
	// +optional
	DropLast *bool `json:"dropLast,omitempty"`

	// Batching says how the streams share a batch: random (every stream's
	// samples shuffled together), stratified (every global batch holds each
	// stream in its proportion of the epoch) or per_stream (every global
	// batch from one stream, the streams' batches interleaved in
	// proportion). Stratified and per_stream cut each stream into the
	// splits on its own (docs/planner.md, batching methods).
	// +kubebuilder:validation:Enum=random;stratified;per_stream
	// +kubebuilder:default=random
	// +optional
	Batching Batching `json:"batching,omitempty"`

	// Schedule plans over training steps instead of epochs: its phases
	// change the streams' proportions and the global batch size, or skip
	// or repeat steps, from a global step on (docs/planner.md, schedules).
	// Each stream is drawn pass after pass, so a sample repeats only after
	// its stream's whole pass. Present or not from the dataset's creation;
	// its phases may be appended while jobs run, each after every job's
	// committed step.
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`

	// Packing packs each stream's documents (the values of a list column
	// of token ids) into sequences of sequenceLength tokens: the plan's
	// samples, batches and steps are then packs (docs/planner.md, packing).
	// shardfeed index --lengths COLUMN --pack-length L counts each shard's
	// packs beside the index.
	// +optional
	Packing *Packing `json:"packing,omitempty"`

	// Bucketing draws every global batch from one bucket of samples, cut
	// by a column's lengths or an image's aspect ratio (docs/planner.md,
	// bucketing). shardfeed index --lengths COLUMN --buckets … (or
	// --aspect-ratios …) writes each bucket's rows beside the index.
	// +optional
	Bucketing *Bucketing `json:"bucketing,omitempty"`

	// MissingColumns says what becomes of a column some streams lack:
	// refuse (the streams must have the same columns, or pick a common
	// set with spec.streams[].columns) or null (every stream's columns are
	// served, null in the rows of the streams that lack them: an image and
	// caption stream beside a token stream). docs/formats.md, promotions.
	// +kubebuilder:validation:Enum=refuse;null
	// +kubebuilder:default=refuse
	// +optional
	MissingColumns MissingColumnsPolicy `json:"missingColumns,omitempty"`

	// Decode lists columns the sidecar serves decoded rather than as the
	// bytes the shards store: images as uint8 tensors (docs/formats.md,
	// decoding images).
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=column
	// +optional
	Decode []ColumnDecode `json:"decode,omitempty"`

	// Tokenize is every stream's tokenization, unless the stream gives its
	// own (spec.streams[].tokenize): a text column served as token ids,
	// tokenized in the sidecar (docs/tokenize.md).
	// +optional
	Tokenize *Tokenize `json:"tokenize,omitempty"`

	// OnCorruptShard says what happens to a shard that stays corrupt after
	// its retries.
	// +kubebuilder:default=fail
	// +optional
	OnCorruptShard CorruptShardPolicy `json:"onCorruptShard,omitempty"`

	// Sidecar configures the injected data-loading sidecar.
	// +optional
	Sidecar SidecarSpec `json:"sidecar,omitempty"`

	// Index makes the operator index, with a Kubernetes Job in the
	// dataset's namespace, each stream that has no index of shardfeed's
	// (or whose source changed since), instead of someone running
	// shardfeed index by hand (docs/operations.md, indexing in the
	// cluster). It does not shape the plan: the index it writes does.
	// +optional
	Index *IndexJob `json:"index,omitempty"`
}

// IndexJob is how the operator's indexing Jobs run: every field the Job
// takes from the dataset is here, and nothing else of the Job is the
// author's to choose (the image, the command and the mounts are the
// operator's).
type IndexJob struct {
	// Streams names the streams indexed so; empty: every stream whose
	// index is shardfeed's (not MDS's, LitData's or Megatron's own).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Streams []string `json:"streams,omitempty"`

	// WriteCredentialsSecretRef names the Secret, in the dataset's
	// namespace, whose credentials may write the index into the stream's
	// store (or source.indexURI's): the Job alone mounts it. The
	// stream's own credentials read the data, as a sidecar's do, and stay
	// read-only. Its keys are those of source.credentialsSecretRef.
	WriteCredentialsSecretRef SecretReference `json:"writeCredentialsSecretRef"`

	// Parallelism is the pods that index a stream at once, each a part of
	// its objects; a final step merges the parts into the index.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:default=4
	// +optional
	Parallelism *int32 `json:"parallelism,omitempty"`

	// Concurrency is the objects a pod reads at once (their footers or
	// headers): a real store answers each in tens of milliseconds. The
	// default, 64, is where indexing at 30 ms a request stopped growing
	// linearly on two cores (docs/benchmarks.md, indexing at a real
	// store's latency: 204-208 objects a second at 16, 476-606 at 64,
	// 504-716 at 256).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +kubebuilder:default=64
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`

	// Resources of each indexing pod's container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector places the indexing pods (on CPU nodes, typically).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the indexing pods.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of the indexing pods.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// QueueName is the Kueue LocalQueue the Jobs are admitted through
	// (the label kueue.x-k8s.io/queue-name), so the platform's quotas
	// apply; the Jobs start suspended for Kueue to admit.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	QueueName string `json:"queueName,omitempty"`

	// TTLSecondsAfterFinished removes a finished Job (and its pods) this
	// long after it ends; the index stays.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +kubebuilder:default=3600
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// Suspend stops the indexing: no Job is created, and a running one is
	// suspended (its pods end; the parts written stay, and indexing goes
	// on from them when it is resumed).
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// RecheckEvery, if set, has the operator list each stream it indexes
	// again this often (a listing Job) and compare it with the stream's
	// index, as `shardfeed plan` does: a source whose objects were added,
	// removed, resized or rewritten is indexed again while no job holds
	// committed progress on the dataset's plan (a job keeps the plan it
	// started with; the dataset then says the source changed and waits).
	// Each check lists the whole stream: hours, for large ones.
	// +optional
	RecheckEvery *metav1.Duration `json:"recheckEvery,omitempty"`
}

// Defaults of spec.index.
const (
	DefaultIndexParallelism = int32(4)
	DefaultIndexConcurrency = int32(64)
	DefaultIndexJobTTL      = int32(3600)
)

// MissingColumnsPolicy says what becomes of a column some streams lack.
type MissingColumnsPolicy string

// The policies of spec.missingColumns.
const (
	// MissingColumnsRefuse refuses streams of different columns.
	MissingColumnsRefuse MissingColumnsPolicy = "refuse"
	// MissingColumnsNull serves every stream's columns, null where a
	// stream lacks one.
	MissingColumnsNull MissingColumnsPolicy = "null"
)

// PackingMethod is how documents are packed into sequences.
// +kubebuilder:validation:Enum=bestFit;firstFit;concatenate
type PackingMethod string

// The packing methods (docs/planner.md, packing).
const (
	// PackingBestFit packs each window of a shard's documents best-fit
	// decreasing: each document whole, the least padding.
	PackingBestFit PackingMethod = "bestFit"
	// PackingFirstFit packs each window's documents in order, each into
	// the first sequence with room for it.
	PackingFirstFit PackingMethod = "firstFit"
	// PackingConcatenate concatenates a shard's documents and cuts them
	// every sequenceLength tokens: no padding but each shard's last
	// sequence; documents are cut across sequences, each token once.
	PackingConcatenate PackingMethod = "concatenate"
)

// OverlongPolicy says what becomes of a document longer than a sequence.
// +kubebuilder:validation:Enum=cut;drop
type OverlongPolicy string

// The overlong policies.
const (
	// OverlongCut cuts it into whole sequences and a rest: every token is
	// delivered.
	OverlongCut OverlongPolicy = "cut"
	// OverlongDrop leaves it out, counted (shardfeed plan shows how many).
	OverlongDrop OverlongPolicy = "drop"
)

// Defaults of spec.packing.
const (
	DefaultPackingMethod = PackingBestFit
	DefaultPackingWindow = int64(1024)
	DefaultOverlong      = OverlongCut
)

// Packing packs documents into fixed-length sequences.
type Packing struct {
	// Column is a list column of every stream: each value a document's
	// token ids.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Column string `json:"column"`

	// SequenceLength is the tokens of a packed sequence.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	SequenceLength int64 `json:"sequenceLength"`

	// Method is bestFit, firstFit or concatenate.
	// +kubebuilder:default=bestFit
	// +optional
	Method PackingMethod `json:"method,omitempty"`

	// Window is how many consecutive documents of a shard are packed
	// together (bestFit, firstFit): more packs tighter and costs more
	// work per document.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:default=1024
	// +optional
	Window *int64 `json:"window,omitempty"`

	// Overlong says what becomes of a document longer than a sequence:
	// cut into whole sequences and a rest, or dropped (counted).
	// +kubebuilder:default=cut
	// +optional
	Overlong OverlongPolicy `json:"overlong,omitempty"`

	// AcrossShards packs consecutive shards of a stream together: each
	// packing unit is the fewest consecutive shards that hold two windows
	// of documents (at most 256 shards), packed in windows of one to two
	// windows' documents, so a window is not capped by a shard's documents
	// (streams of many small row groups or files pack as tightly as one
	// big shard, or tighter). A sidecar fetches a unit's shards together
	// to serve its packs. Counted by shardfeed index --pack-across-shards.
	// +optional
	AcrossShards bool `json:"acrossShards,omitempty"`

	// PadToken is the token id the padding of a sequence holds (its loss
	// mask is 0 there).
	// +kubebuilder:default=0
	// +optional
	PadToken *int64 `json:"padToken,omitempty"`

	// Proportions says what the streams' proportions (and a schedule's)
	// are of: packs (sequence slots, the default) or tokens (what LLM
	// mixtures mean: each stream's packs weighed by its tokens a pack).
	// +kubebuilder:default=packs
	// +optional
	Proportions ProportionUnit `json:"proportions,omitempty"`
}

// ProportionUnit is what a packed dataset's proportions are of.
// +kubebuilder:validation:Enum=packs;tokens
type ProportionUnit string

// The units of a packed dataset's proportions.
const (
	ProportionOfPacks  ProportionUnit = "packs"
	ProportionOfTokens ProportionUnit = "tokens"
)

// Bucketing cuts the samples into buckets by their length (the elements of
// a list column, or an image's pixels) at boundaries, or an image's by its
// width over height at aspect ratios: bucket 0 below the first, bucket k
// at or above the k-th and below the next.
// +kubebuilder:validation:XValidation:rule="has(self.boundaries) != has(self.aspectRatios)",message="give spec.bucketing boundaries (lengths) or aspectRatios (images), one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.boundaries) || self.boundaries.all(b, b > 0) && self.boundaries.isSorted() && self.boundaries.all(b, self.boundaries.filter(c, c == b).size() == 1)",message="spec.bucketing.boundaries are lengths above 0 in ascending order, each once"
// +kubebuilder:validation:XValidation:rule="!(has(self.batchSizes) && has(self.budget))",message="give spec.bucketing batchSizes or a budget, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.budget) || has(self.boundaries)",message="spec.bucketing.budget sizes each bucket's batches by its longest sample, which boundaries bound: bucket by boundaries, or give batchSizes"
// +kubebuilder:validation:XValidation:rule="!has(self.batchSizes) || size(self.batchSizes) == (has(self.boundaries) ? size(self.boundaries) : size(self.aspectRatios)) + 1",message="spec.bucketing.batchSizes has one batch size a bucket: one more than the boundaries or aspect ratios"
type Bucketing struct {
	// Column is the column whose lengths (or images) cut the buckets: a
	// list column, or a binary column of JPEG or PNG images.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Column string `json:"column"`

	// Boundaries are the lengths between buckets (elements of a list, an
	// image's pixels), ascending.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=63
	// +listType=atomic
	// +optional
	Boundaries []int64 `json:"boundaries,omitempty"`

	// AspectRatios are the widths over heights between buckets of images,
	// ascending, as decimals or fractions ("0.75", "4/3").
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=63
	// +kubebuilder:validation:items:Pattern=`^[0-9]+(\.[0-9]+)?(/[1-9][0-9]*)?$`
	// +kubebuilder:validation:items:MaxLength=32
	// +listType=atomic
	// +optional
	AspectRatios []string `json:"aspectRatios,omitempty"`

	// BatchSizes are each bucket's global batch size, multiples of
	// numSplits (default: globalBatchSize for every bucket): a bucket of
	// short samples may take more of them.
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=1
	// +listType=atomic
	// +optional
	BatchSizes []int64 `json:"batchSizes,omitempty"`

	// Budget is the tokens (or pixels) of a global batch: each bucket
	// below a boundary takes the most samples (a multiple of numSplits)
	// whose longest possible length, the boundary less one, fits the
	// budget; the last bucket, unbounded above, takes globalBatchSize.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Budget *int64 `json:"budget,omitempty"`
}

// Schedule is a list of phases over the global steps.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phases) || has(self.phases) && size(self.phases) >= size(oldSelf.phases) && oldSelf.phases.all(p, p in self.phases) && self.phases[size(oldSelf.phases) - 1] == oldSelf.phases[size(oldSelf.phases) - 1]",message="spec.schedule.phases is append-only: keep every phase as it is and add new ones at the end"
// +kubebuilder:validation:XValidation:rule="!has(self.phases) || self.phases.map(p, p.startStep).isSorted()",message="spec.schedule.phases are in the order of their startStep"
type Schedule struct {
	// Phases in the order of their steps: append-only.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Phases []SchedulePhase `json:"phases,omitempty"`
}

// SchedulePhase changes the plan from a global step on (step k of epoch e
// is global step e·K + k, K the steps of an epoch). It sets proportions,
// globalBatchSize or both; or skipSteps or repeatSteps alone.
// +kubebuilder:validation:XValidation:rule="[has(self.proportions) || has(self.globalBatchSize), has(self.skipSteps), has(self.repeatSteps)].filter(x, x).size() == 1",message="a phase changes proportions and globalBatchSize, skips steps, or repeats steps: one of the three"
type SchedulePhase struct {
	// StartStep is the global step the phase starts at.
	// +kubebuilder:validation:Minimum=0
	StartStep int64 `json:"startStep"`

	// Proportions are every stream's weight from startStep on, as exact
	// decimal strings ("0.25", "3"); 0 leaves a stream out.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=stream
	// +optional
	Proportions []PhaseProportion `json:"proportions,omitempty"`

	// GlobalBatchSize is the global batch size from startStep on (a ramp-up):
	// a multiple of numSplits.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GlobalBatchSize int64 `json:"globalBatchSize,omitempty"`

	// SkipSteps skips the data of that many steps (after a loss spike):
	// step startStep gets the data step startStep+skipSteps would have had.
	// Their samples are reported skipped: never delivered, never lost.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SkipSteps int64 `json:"skipSteps,omitempty"`

	// RepeatSteps replays that many steps before startStep: steps
	// startStep onwards get their batches again, marked repeated, and the
	// data then continues where it stopped.
	// +kubebuilder:validation:Minimum=1
	// +optional
	RepeatSteps int64 `json:"repeatSteps,omitempty"`
}

// PhaseProportion is one stream's weight in a phase.
type PhaseProportion struct {
	// Stream is the name of a stream of spec.streams.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Stream string `json:"stream"`
	// Proportion is an exact decimal string ("0.25", "3"); 0 leaves the
	// stream out of the phase.
	// +kubebuilder:validation:Pattern=`^[0-9]{1,10}(\.[0-9]{1,9})?$`
	// +kubebuilder:validation:MaxLength=20
	Proportion string `json:"proportion"`
}

// StreamTotals are the sizes of one stream, read from its index.
type StreamTotals struct {
	// Name of the stream.
	Name string `json:"name"`
	// Samples in the stream.
	Samples int64 `json:"samples"`
	// Bytes of the stream's shards.
	Bytes int64 `json:"bytes"`
	// Shards in the stream.
	Shards int64 `json:"shards"`
	// IndexChecked is when the operator last listed the stream and found
	// its source as its index says (spec.index.recheckEvery).
	// +optional
	IndexChecked *metav1.Time `json:"indexChecked,omitempty"`
}

// JobProgress is the committed progress of one training job.
type JobProgress struct {
	// Job identity.
	Job string `json:"job"`
	// Pods of the job.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// WorldSize is the number of ranks of the job.
	// +optional
	WorldSize int32 `json:"worldSize,omitempty"`
	// DataParallelSize is the job's declared data-parallel size (annotation
	// shardfeed.io/data-parallel-size), when its ranks form replication
	// groups.
	// +optional
	DataParallelSize int32 `json:"dataParallelSize,omitempty"`
	// Epoch of the last commit.
	Epoch int64 `json:"epoch"`
	// Step of the last commit: every rank finished the steps before it.
	Step int64 `json:"step"`
	// LastCommitTime is when the job last committed.
	// +optional
	LastCommitTime *metav1.Time `json:"lastCommitTime,omitempty"`
	// SkippedShards is the number of corrupt shards the job's sidecars
	// delivered as pad rows (onCorruptShard: skip); the job's state
	// ConfigMap names them and says why.
	// +optional
	SkippedShards int32 `json:"skippedShards,omitempty"`
	// SkippedSamples is the number of samples of the skipped shards.
	// +optional
	SkippedSamples int64 `json:"skippedSamples,omitempty"`
	// Reads is what the job's sidecars read, summed over every attempt's
	// reports (each sidecar reports every minute and as it stops).
	// +optional
	Reads *JobReads `json:"reads,omitempty"`
}

// JobReads is what a job's sidecars read: from the object stores, and
// from the node cache (the chart's nodeCache).
type JobReads struct {
	// StoreBytes were downloaded from the object stores, retries included.
	// +optional
	StoreBytes int64 `json:"storeBytes,omitempty"`
	// NodeCacheHits are the shards the node agents gave, each checked
	// against the index.
	// +optional
	NodeCacheHits int64 `json:"nodeCacheHits,omitempty"`
	// NodeCacheBytes are the bytes of those shards: egress the job did
	// not cost.
	// +optional
	NodeCacheBytes int64 `json:"nodeCacheBytes,omitempty"`
	// NodeCacheMisses are the shards the node agents could not give,
	// read from the store instead.
	// +optional
	NodeCacheMisses int64 `json:"nodeCacheMisses,omitempty"`
	// NodeCacheShare is the share of the shard bytes that came from the
	// node, in percent (of NodeCacheBytes and StoreBytes).
	// +optional
	NodeCacheShare string `json:"nodeCacheShare,omitempty"`
}

// TrainingDatasetStatus is what the operator observed of a TrainingDataset.
type TrainingDatasetStatus struct {
	// Conditions: IndexResolved, Ready, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Samples per epoch over all streams.
	// +optional
	Samples int64 `json:"samples,omitempty"`

	// Streams holds the totals of every stream.
	// +listType=map
	// +listMapKey=name
	// +optional
	Streams []StreamTotals `json:"streams,omitempty"`

	// PlanFingerprint identifies the plan; a resume under another
	// fingerprint is refused.
	// +optional
	PlanFingerprint string `json:"planFingerprint,omitempty"`

	// PlanConfigMap is the name of the ConfigMap holding the plan.
	// +optional
	PlanConfigMap string `json:"planConfigMap,omitempty"`

	// StepsPerEpoch is K, the steps of an epoch: step k of epoch e is
	// global step e·K + k, the steps a schedule's phases start at.
	// +optional
	StepsPerEpoch int64 `json:"stepsPerEpoch,omitempty"`

	// Jobs is the committed progress of every job reading this dataset.
	// +listType=map
	// +listMapKey=job
	// +optional
	Jobs []JobProgress `json:"jobs,omitempty"`

	// Indexed is how many of the streams have an index, of how many, and
	// while the operator indexes some (spec.index) how far it is: "1/2",
	// "1/2, 41%".
	// +optional
	Indexed string `json:"indexed,omitempty"`

	// Indexing is where the operator's indexing of each stream without
	// an index stands (spec.index); a stream leaves the list once its
	// index is read.
	// +listType=map
	// +listMapKey=name
	// +optional
	Indexing []StreamIndexing `json:"indexing,omitempty"`
}

// The phases of a stream's indexing in StreamIndexing.
const (
	IndexingListing   = "Listing"
	IndexingParts     = "Indexing"
	IndexingMerging   = "Merging"
	IndexingSuspended = "Suspended"
	IndexingFailed    = "Failed"
	// IndexingChecking lists an indexed stream again to compare it with
	// its index (spec.index.recheckEvery); IndexingHeld found it changed
	// while jobs hold committed progress on the plan of its index.
	IndexingChecking = "Checking"
	IndexingHeld     = "Held"
	// IndexingMeasuring measures an indexed stream's filter selection,
	// lengths and token counts in parts (its shards in ranges, a pod
	// each); IndexingJoining joins them into the files beside its index,
	// with its buckets and packs.
	IndexingMeasuring = "Measuring"
	IndexingJoining   = "Joining"
)

// StreamIndexing is where the operator's indexing of a stream stands: its
// Job, and of the objects its listing found, those indexed so far.
type StreamIndexing struct {
	// Name is the stream's.
	Name string `json:"name"`
	// Phase is Listing, Indexing (the parts), Merging, then, for a stream
	// with a filter, packing, bucketing or tokenize, Measuring (its
	// selection, lengths and tokens, in parts) and Joining; Suspended or
	// Failed (the IndexResolved condition says why); of an indexed stream
	// checked again, Checking, or Held when its source changed and jobs
	// hold committed progress on the plan of its index.
	Phase string `json:"phase"`
	// Job is the Job of the phase.
	// +optional
	Job string `json:"job,omitempty"`
	// Parts is how many parts the listing cut the objects into, one pod
	// each.
	// +optional
	Parts int32 `json:"parts,omitempty"`
	// PartsDone is how many of the parts are indexed.
	// +optional
	PartsDone int32 `json:"partsDone,omitempty"`
	// Objects is how many objects the listing found.
	// +optional
	Objects int64 `json:"objects,omitempty"`
	// Bytes is the size of the objects the listing found.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// ObjectsRead is how many of the objects are indexed so far (each
	// part reports every 10 seconds).
	// +optional
	ObjectsRead int64 `json:"objectsRead,omitempty"`
	// BytesRead is the size of the objects indexed so far.
	// +optional
	BytesRead int64 `json:"bytesRead,omitempty"`
	// Rate is the parts' rate since their Job started, as
	// "1.2k objects/s, 45 MiB/s".
	// +optional
	Rate string `json:"rate,omitempty"`
	// ETA is the time left at that rate, as "3m20s".
	// +optional
	ETA string `json:"eta,omitempty"`
	// StartTime is when the stream's indexing began (its listing Job).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// TrainingDataset declares where the training data of a job lives and how it
// is mixed, shuffled and split. Pods labelled shardfeed.io/dataset=<name> get
// a sidecar that serves them their batches.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tds,categories=shardfeed
// +kubebuilder:printcolumn:name="Streams",type=string,JSONPath=`.spec.streams[*].name`
// +kubebuilder:printcolumn:name="Samples",type=integer,JSONPath=`.status.samples`
// +kubebuilder:printcolumn:name="Splits",type=integer,JSONPath=`.spec.numSplits`
// +kubebuilder:printcolumn:name="Indexed",type=string,JSONPath=`.status.indexed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrainingDataset struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrainingDatasetSpec   `json:"spec,omitempty"`
	Status TrainingDatasetStatus `json:"status,omitempty"`
}

// TrainingDatasetList is a list of TrainingDatasets.
//
// +kubebuilder:object:root=true
type TrainingDatasetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingDataset `json:"items"`
}
