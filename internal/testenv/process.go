package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// serverProcess is a test server run from bin/, with its log in a
// directory of its own, killed with the test binary.
type serverProcess struct {
	name string
	cmd  *exec.Cmd
	dir  string
}

// startServer runs bin/name with args in a fresh directory and waits until
// ready answers (any HTTP answer counts) within timeout.
func startServer(ctx context.Context, name string, timeout time.Duration, ready string, args ...string) (*serverProcess, error) {
	bin, err := binary(name)
	if err != nil {
		return nil, err
	}
	return startProcess(ctx, name, exec.Command(bin, args...), timeout, ready)
}

// startProcess runs cmd as the server name in a fresh directory and waits
// until ready answers (any HTTP answer counts) within timeout.
func startProcess(ctx context.Context, name string, cmd *exec.Cmd, timeout time.Duration, ready string) (*serverProcess, error) {
	dir, err := os.MkdirTemp("", "shardfeed-"+name+"-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	p := &serverProcess{name: name, dir: dir, cmd: cmd}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return p, nil
		}
		select {
		case <-ctx.Done():
			out, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			_ = p.stop()
			return nil, fmt.Errorf("%s did not answer within %s: %w\n%s", name, timeout, err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop kills the server and removes its directory.
func (p *serverProcess) stop() error {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	return os.RemoveAll(p.dir)
}
