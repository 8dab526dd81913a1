package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// A queue such as Kueue admits a job by what its pod templates request,
// before any pod exists: the sidecar, injected into each pod later, would
// not count toward the job's quota. So the templates of a queued job get a
// reservation at its creation, a native sidecar with the sidecar's
// requests, which each pod's injection replaces with the sidecar.

// ReservedCommand is the reservation's command. The container never runs
// where the pod webhook serves its namespace; where it does run, the
// subcommand says why the pod was not injected.
var ReservedCommand = []string{"/shardfeed", "reserved"}

// IsReservation reports whether c is a template's reservation rather than
// the sidecar: its name, and the command no sidecar runs.
func IsReservation(c *corev1.Container) bool {
	return c.Name == SidecarName && slices.Equal(c.Command, ReservedCommand)
}

// Reservation is the reservation for a pod template labelled for ds, to be
// its first init container, or nil where it has the sidecar or a
// reservation already. Its requests are the ones Inject gives that
// template's pods now.
func Reservation(tmpl *corev1.PodTemplateSpec, ds *datav1alpha1.TrainingDataset, images ImagePolicy, defaults corev1.ResourceRequirements) *corev1.Container {
	for _, c := range tmpl.Spec.InitContainers {
		if c.Name == SidecarName {
			return nil
		}
	}
	image := images.Default
	if ds.Spec.Sidecar.Image != "" && images.Check(ds.Spec.Sidecar.Image) == nil {
		image = ds.Spec.Sidecar.Image
	}
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	reservation := corev1.Container{
		Name:            SidecarName,
		Image:           image,
		Command:         ReservedCommand,
		Resources:       sidecarResources(pod, ds, defaults),
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		SecurityContext: sidecarSecurityContext(),
	}
	return &reservation
}

// withoutReservation removes a template's reservation from a pod: the
// sidecar takes its place. Anyone may write one into a pod; removing it
// grants nothing.
func withoutReservation(pod *corev1.Pod) {
	pod.Spec.InitContainers = slices.DeleteFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return IsReservation(&c) })
}
