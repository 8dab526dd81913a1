package testenv

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
)

// PythonScript runs script (a path from the repository's root) with the
// python of bin/venv (bin/venv-oracle, bin/venv-iceberg: venv names it)
// and returns what it printed; a failure fails the test with its stderr.
func PythonScript(t testing.TB, venv, script string, args ...string) []byte {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	py, err := binary(filepath.Join(venv, "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, append([]string{filepath.Join(root, filepath.FromSlash(script))}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", script, args, err, stderr.String())
	}
	return stdout.Bytes()
}
