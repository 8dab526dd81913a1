package shardfeed

import (
	"os/exec"
	"strings"
	"testing"
)

// The client is a module a user's program adds alone: what it builds
// imports nothing of Kubernetes and nothing of the operator's module.
func TestTheClientModuleImportsNoKubernetesNorTheOperator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/shardfeed/shardfeed/clients/go/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") ||
			(strings.HasPrefix(p, "github.com/shardfeed/shardfeed/") && !strings.HasPrefix(p, "github.com/shardfeed/shardfeed/clients/go/")) {
			t.Errorf("the client builds %s", p)
		}
	}
}
