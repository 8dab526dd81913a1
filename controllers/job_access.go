package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/planner"
)

// The sidecar runs with its pod's ServiceAccount, which the operator does
// not own, so before a job's first pod starts the operator creates the
// job's state ConfigMap (pinning the sidecar image and plan version) and a
// Role that lets the pod's ServiceAccount read the plan and update that
// one ConfigMap, by name (design §7). Both are owned by the dataset.

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;update;patch
// +kubebuilder:rbac:groups=data.shardfeed.io,resources=trainingdatasets/finalizers,verbs=update

// JobAccessName is the name of a job's Role and RoleBinding.
func JobAccessName(dataset, job string) string { return "shardfeed-" + dataset + "-" + job }

// pinnedState reads the job's state ConfigMap: the image and plan version
// the job started with, and whether the job has state at all.
func (p *PodInjector) pinnedState(ctx context.Context, ns, dataset, job string) (*configmaps.State, bool, error) {
	var cm corev1.ConfigMap
	err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: configmaps.StateName(dataset, job)}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	st, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		return nil, true, fmt.Errorf("ConfigMap %s/%s: %w", ns, cm.Name, err)
	}
	return st, true, nil
}

// createState creates the job's state ConfigMap pinning image, and returns
// the image the job is pinned to: image, or the one a pod of the same job
// admitted a moment earlier pinned.
func (p *PodInjector) createState(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, image string) (string, error) {
	data, err := configmaps.StateData(&configmaps.State{Dataset: ds.Name, Job: job, SidecarImage: image, PlanVersion: planner.PlanVersion})
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: configmaps.StateName(ds.Name, job), Namespace: ds.Namespace,
			Labels:          jobLabels(ds.Name, job),
			OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)},
		},
		Data: data,
	}
	// Create, not apply: once created, the ConfigMap is the sidecars'.
	err = p.Writer.Create(ctx, cm, ctrl.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		st, _, err := p.pinnedState(ctx, ds.Namespace, ds.Name, job)
		if err != nil || st == nil {
			return "", fmt.Errorf("reading the state of job %q: %w", job, err)
		}
		if st.SidecarImage != "" {
			return st.SidecarImage, nil
		}
		return image, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating ConfigMap %s/%s: %w", ds.Namespace, cm.Name, err)
	}
	return image, nil
}

// grantAccess applies the job's Role and binds the pod's ServiceAccount to
// it; a job whose pods use several ServiceAccounts gets all of them bound.
func (p *PodInjector) grantAccess(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, serviceAccount string) error {
	name := JobAccessName(ds.Name, job)
	owner := metav1ac.OwnerReference().WithAPIVersion(datav1alpha1.GroupVersion.String()).WithKind("TrainingDataset").
		WithName(ds.Name).WithUID(ds.UID).WithController(true).WithBlockOwnerDeletion(true)
	role := rbacv1ac.Role(name, ds.Namespace).
		WithLabels(jobLabels(ds.Name, job)).
		WithOwnerReferences(owner).
		WithRules(
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").
				WithResourceNames(configmaps.PlanName(ds.Name)).WithVerbs("get"),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").
				WithResourceNames(configmaps.StateName(ds.Name, job)).WithVerbs("get", "update"),
		)
	if err := p.Writer.Apply(ctx, role, ctrl.FieldOwner(FieldOwner), ctrl.ForceOwnership); err != nil {
		return fmt.Errorf("applying Role %s/%s: %w", ds.Namespace, name, err)
	}
	return p.bind(ctx, ds, job, serviceAccount)
}

// bind adds serviceAccount to the job's RoleBinding. Subjects is an atomic
// list, so this reads, adds and writes, retrying on a conflict, and never
// drops a ServiceAccount another pod of the job added.
func (p *PodInjector) bind(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, serviceAccount string) error {
	name := JobAccessName(ds.Name, job)
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ds.Namespace, Name: serviceAccount}
	for range 5 {
		var rb rbacv1.RoleBinding
		err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ds.Namespace, Name: name}, &rb)
		switch {
		case apierrors.IsNotFound(err):
			rb = rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace, Labels: jobLabels(ds.Name, job),
					OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{subject},
			}
			err = p.Writer.Create(ctx, &rb, ctrl.FieldOwner(FieldOwner))
		case err != nil:
			return fmt.Errorf("reading RoleBinding %s/%s: %w", ds.Namespace, name, err)
		case slices.Contains(rb.Subjects, subject):
			return nil
		default:
			rb.Subjects = append(rb.Subjects, subject)
			err = p.Writer.Update(ctx, &rb, ctrl.FieldOwner(FieldOwner))
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("binding ServiceAccount %s to Role %s/%s: %w", serviceAccount, ds.Namespace, name, err)
		}
		return nil
	}
	return fmt.Errorf("RoleBinding %s/%s: too many conflicting writes; the pod's creation is retried", ds.Namespace, name)
}

func jobLabels(dataset, job string) map[string]string {
	return map[string]string{configmaps.LabelDataset: dataset, configmaps.LabelJob: job, configmaps.LabelManagedBy: configmaps.ManagedBy}
}

func datasetOwner(ds *datav1alpha1.TrainingDataset) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: datav1alpha1.GroupVersion.String(), Kind: "TrainingDataset",
		Name: ds.Name, UID: ds.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}
