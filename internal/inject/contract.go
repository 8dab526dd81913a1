package inject

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
)

// SidecarContract reads what the webhook told the pod's sidecar, and
// refuses a sidecar it did not inject.
func SidecarContract(pod *corev1.Pod) (sidecarconfig.Config, error) {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name != SidecarName {
			continue
		}
		contract, err := sidecarconfig.FromContainer(c)
		if err != nil {
			return contract, err
		}
		if contract.Dataset == "" || contract.Job == "" || contract.Attempt == "" || contract.Generation < 1 || contract.Generation > progress.MaxGeneration {
			return contract, errors.New("its sidecar was not injected by this operator (no dataset, job, attempt or generation): recreate the pod")
		}
		return contract, nil
	}
	return sidecarconfig.Config{}, fmt.Errorf("it has no %s container: only an injected pod's sidecar records progress", SidecarName)
}
