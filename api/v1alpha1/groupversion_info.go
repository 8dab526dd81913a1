// Package v1alpha1 contains the API types of the data.shardfeed.io group.
//
// +kubebuilder:object:generate=true
// +groupName=data.shardfeed.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "data.shardfeed.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	// It is apimachinery's, not controller-runtime's, so that importing the
	// API pulls in no controller machinery.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TrainingDataset{}, &TrainingDatasetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
