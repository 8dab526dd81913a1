package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// CacheOptions are what the manager caches: the TrainingDatasets and, of
// the cluster's ConfigMaps, only those shardfeed writes (plans and job
// states), without their managed fields. Nothing else is watched: Secrets
// are read directly and never cached, and the pods' owners (Jobs,
// StatefulSets) are read by name at admission, so a cluster's unrelated
// objects cost the manager no memory.
func CacheOptions() cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{configmaps.LabelManagedBy: configmaps.ManagedBy})},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
