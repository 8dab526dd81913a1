package controllers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// datasetOwner is the owner reference of everything the operator makes
// for a dataset: its controller, deleted with it.
func datasetOwner(ds *datav1alpha1.TrainingDataset) metav1.OwnerReference {
	return *metav1.NewControllerRef(ds, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))
}

// datasetOwnerApply is datasetOwner for server-side apply.
func datasetOwnerApply(ds *datav1alpha1.TrainingDataset) *metav1ac.OwnerReferenceApplyConfiguration {
	o := datasetOwner(ds)
	return metav1ac.OwnerReference().WithAPIVersion(o.APIVersion).WithKind(o.Kind).WithName(o.Name).WithUID(o.UID).
		WithController(*o.Controller).WithBlockOwnerDeletion(*o.BlockOwnerDeletion)
}

// Owner references that block the owner's deletion need update on its
// finalizers (the OwnerReferencesPermissionEnforcement admission plugin).
// +kubebuilder:rbac:groups=data.shardfeed.io,resources=trainingdatasets/finalizers,verbs=update
