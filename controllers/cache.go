package controllers

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/indexjob"
)

// CacheOptions are what the manager caches: the TrainingDatasets and, of
// the cluster's ConfigMaps, only those shardfeed writes (plans and job
// states) and of the Jobs those that index a dataset, without their
// managed fields. Nothing else is watched: Secrets
// are read directly and never cached, and the pods' owners (Jobs,
// StatefulSets) are read by name at admission, so a cluster's unrelated
// objects cost the manager no memory.
func CacheOptions() cache.Options {
	indexingJobs, err := labels.Parse(indexjob.LabelDataset)
	if err != nil {
		panic(err) // a constant's syntax
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{configmaps.LabelManagedBy: configmaps.ManagedBy})},
			// Of the Jobs, the indexing Jobs it creates (spec.index).
			&batchv1.Job{}: {Label: indexingJobs},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
