package v1alpha1

// Condition types of a TrainingDataset (status.conditions).
const (
	// ConditionIndexResolved is True when every stream's index was read.
	ConditionIndexResolved = "IndexResolved"
	// ConditionReady is True when the plan ConfigMap holds the current plan.
	ConditionReady = "Ready"
	// ConditionDegraded is True when something needs a person: the spec
	// cannot be planned, or the plan cannot be written.
	ConditionDegraded = "Degraded"
)

// Reasons of the conditions and of the operator's events, CamelCase as
// metav1.Condition wants.
const (
	ReasonIndexRead        = "IndexRead"
	ReasonIndexUnreachable = "IndexUnreachable"
	ReasonCredentials      = "CredentialsMissing"
	ReasonPlanned          = "Planned"
	ReasonInvalidPlan      = "InvalidPlan"
	ReasonApplyFailed      = "PlanConfigMapFailed"
	ReasonWaitingForIndex  = "WaitingForIndex"
	ReasonHealthy          = "Healthy"
	// ReasonSourceNotAllowed: a stream's source is outside what the
	// platform team allows (file://, an endpoint off the allow-list, the
	// operator's own identity in a namespace not allowed it).
	ReasonSourceNotAllowed = "SourceNotAllowed"
	// ReasonConfigMapNotOwned: a ConfigMap of the plan's name exists that
	// shardfeed did not create for this dataset; it is never adopted.
	ReasonConfigMapNotOwned = "ConfigMapNotOwned"
	// ReasonIndexTooLarge: an index is over the operator's cap.
	ReasonIndexTooLarge = "IndexTooLarge"
	// ReasonIndexing: the operator's Jobs are indexing a stream
	// (spec.index); ReasonIndexingFailed: one of them failed.
	ReasonIndexing       = "Indexing"
	ReasonIndexingFailed = "IndexingFailed"
	// ReasonSourceChanged is the reason of the Warning event for an
	// indexed stream whose source changed while jobs hold committed
	// progress on the plan of its index (spec.index.recheckEvery).
	ReasonSourceChanged = "SourceChanged"
	// ReasonShardSkipped is the reason of the Warning event for shards a
	// job's sidecars delivered as pad rows (onCorruptShard: skip).
	ReasonShardSkipped = "ShardSkipped"
)
