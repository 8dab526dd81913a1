package shardfeed

import (
	"os"
	"path/filepath"
	"testing"
)

// New("") finds the socket where the Python client does: the variable,
// else the pod's, else serve's .shardfeed/feed.sock in the working
// directory (it waited silently on the pod's path on a laptop).
func TestNewFindsTheSocketWhereThePythonClientDoes(t *testing.T) {
	dir := t.TempDir()
	podSocket = filepath.Join(dir, "pod", "feed.sock") // absent, whatever this machine has
	t.Cleanup(func() { podSocket = PodSocket })
	t.Chdir(dir)
	t.Setenv(SocketEnv, "")
	if got := New("").Socket(); got != podSocket {
		t.Errorf("with no socket anywhere: %q, want the pod's %q (errors name it)", got, podSocket)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".shardfeed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, LocalSocket), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := New("").Socket(); got != filepath.Join(dir, LocalSocket) {
		t.Errorf("with serve's socket here: %q, want %q", got, filepath.Join(dir, LocalSocket))
	}
	if err := os.MkdirAll(filepath.Dir(podSocket), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(podSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := New("").Socket(); got != podSocket {
		t.Errorf("with a pod's socket and serve's: %q, want the pod's %q first", got, podSocket)
	}
	t.Setenv(SocketEnv, "/elsewhere.sock")
	if got := New("").Socket(); got != "/elsewhere.sock" {
		t.Errorf("with %s set: %q", SocketEnv, got)
	}
}
