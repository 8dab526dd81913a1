package controllers

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// DatasetCollector exposes the datasets' status as metrics, read from the
// manager's cache at scrape time: no API request, nothing kept between
// scrapes. Every replica reports what its cache holds (the same values);
// a dashboard takes the max by dataset and job.
type DatasetCollector struct {
	Reader client.Reader

	ready, samples                                     *prometheus.Desc
	epoch, step, lastCommit, pods, skipped, skippedRow *prometheus.Desc
	// The operator's indexing of a stream (status.indexing).
	indexObjects, indexObjectsRead, indexBytes, indexBytesRead *prometheus.Desc
}

// NewDatasetCollector describes the metrics of the datasets r lists.
func NewDatasetCollector(r client.Reader) *DatasetCollector {
	ds := []string{"namespace", "dataset"}
	job := []string{"namespace", "dataset", "job"}
	stream := []string{"namespace", "dataset", "stream"}
	return &DatasetCollector{
		Reader:           r,
		ready:            prometheus.NewDesc("shardfeed_dataset_ready", "1 when the dataset's Ready condition is True for its current generation, else 0.", ds, nil),
		samples:          prometheus.NewDesc("shardfeed_dataset_samples", "Samples per epoch over all of the dataset's streams.", ds, nil),
		epoch:            prometheus.NewDesc("shardfeed_job_committed_epoch", "The epoch of the job's last commit.", job, nil),
		step:             prometheus.NewDesc("shardfeed_job_committed_step", "The step of the job's last commit: every rank finished the steps before it.", job, nil),
		lastCommit:       prometheus.NewDesc("shardfeed_job_last_commit_timestamp_seconds", "When the job last committed (Unix time).", job, nil),
		pods:             prometheus.NewDesc("shardfeed_job_pods", "Pods of the job's newest attempt.", job, nil),
		skipped:          prometheus.NewDesc("shardfeed_job_skipped_shards", "Corrupt shards the job's sidecars delivered as pad rows (onCorruptShard: skip).", job, nil),
		skippedRow:       prometheus.NewDesc("shardfeed_job_skipped_samples", "Samples of the job's skipped shards.", job, nil),
		indexObjects:     prometheus.NewDesc("shardfeed_dataset_indexing_objects", "Objects the listing of a stream the operator indexes found (status.indexing).", stream, nil),
		indexObjectsRead: prometheus.NewDesc("shardfeed_dataset_indexing_objects_read", "Objects of a stream the operator indexes that its parts indexed so far.", stream, nil),
		indexBytes:       prometheus.NewDesc("shardfeed_dataset_indexing_bytes", "Bytes of the objects the listing of a stream the operator indexes found.", stream, nil),
		indexBytesRead:   prometheus.NewDesc("shardfeed_dataset_indexing_bytes_read", "Bytes of the objects of a stream the operator indexes that its parts indexed so far.", stream, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DatasetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.samples, c.epoch, c.step, c.lastCommit, c.pods, c.skipped, c.skippedRow,
		c.indexObjects, c.indexObjectsRead, c.indexBytes, c.indexBytesRead} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *DatasetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list datav1alpha1.TrainingDatasetList
	if err := c.Reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.ready, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i := range list.Items {
		ds := &list.Items[i]
		ready := 0.0
		if cond := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady); cond != nil &&
			cond.Status == "True" && cond.ObservedGeneration == ds.Generation {
			ready = 1
		}
		gauge(c.ready, ready, ds.Namespace, ds.Name)
		gauge(c.samples, float64(ds.Status.Samples), ds.Namespace, ds.Name)
		for _, x := range ds.Status.Indexing {
			gauge(c.indexObjects, float64(x.Objects), ds.Namespace, ds.Name, x.Name)
			gauge(c.indexObjectsRead, float64(x.ObjectsRead), ds.Namespace, ds.Name, x.Name)
			gauge(c.indexBytes, float64(x.Bytes), ds.Namespace, ds.Name, x.Name)
			gauge(c.indexBytesRead, float64(x.BytesRead), ds.Namespace, ds.Name, x.Name)
		}
		for _, j := range ds.Status.Jobs {
			gauge(c.epoch, float64(j.Epoch), ds.Namespace, ds.Name, j.Job)
			gauge(c.step, float64(j.Step), ds.Namespace, ds.Name, j.Job)
			gauge(c.pods, float64(j.Pods), ds.Namespace, ds.Name, j.Job)
			gauge(c.skipped, float64(j.SkippedShards), ds.Namespace, ds.Name, j.Job)
			gauge(c.skippedRow, float64(j.SkippedSamples), ds.Namespace, ds.Name, j.Job)
			if j.LastCommitTime != nil {
				gauge(c.lastCommit, float64(j.LastCommitTime.Unix()), ds.Namespace, ds.Name, j.Job)
			}
		}
	}
}

// AdmissionAPIRequests counts the requests the pod webhook makes to the
// API server beside its cache, by HTTP method: the cost of an admission
// (docs/operator.md) that `shardfeed_admission_api_requests_total /
// controller_runtime_webhook_requests_total` gives per pod.
var AdmissionAPIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "shardfeed_admission_api_requests_total",
	Help: "Requests the pod webhook made to the API server (beside the manager's cache), by method.",
}, []string{"method"})

// DatasetPlans counts the reconciles that read a dataset's indexes from
// its store and planned it. The other reconciles, woken by a job's state
// (each commit, each job's first pod), only gather status.jobs.
// A dataset's series goes with the dataset.
var DatasetPlans = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "shardfeed_dataset_plans_total",
	Help: "Reconciles that read a dataset's indexes and planned it (the others only gathered its jobs' progress).",
}, []string{"namespace", "dataset"})

// DatasetIndexReadBytes and DatasetIndexReadRequests count what the
// reconciles that planned a dataset read of its streams' indexes (and
// their filters' selections): a compact index is read by its header, a few
// MiB for ten million shards, a JSON index whole. They go with the dataset.
var (
	DatasetIndexReadBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardfeed_dataset_index_read_bytes_total",
		Help: "Bytes of the dataset's indexes its planning reconciles read from object storage.",
	}, []string{"namespace", "dataset"})
	DatasetIndexReadRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardfeed_dataset_index_read_requests_total",
		Help: "Requests to object storage the dataset's planning reconciles made for its indexes.",
	}, []string{"namespace", "dataset"})
)

// forgetDatasetMetrics drops a deleted dataset's series.
func forgetDatasetMetrics(namespace, name string) {
	for _, m := range []*prometheus.CounterVec{DatasetPlans, DatasetIndexReadBytes, DatasetIndexReadRequests} {
		m.DeleteLabelValues(namespace, name)
	}
}

// CountAdmissionRequests wraps the transport of the pod webhook's clients
// to count their requests in AdmissionAPIRequests.
func CountAdmissionRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		AdmissionAPIRequests.WithLabelValues(r.Method).Inc()
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
