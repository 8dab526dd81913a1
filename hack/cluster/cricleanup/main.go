// Command cricleanup stops and removes every pod sandbox of a containerd
// over the CRI (what crictl rmp -fa does; crictl is not packaged here):
// the containers are killed, CNI releases the pods' addresses and
// interfaces, and their network namespaces go. hack/cluster-down.sh runs
// it before it stops containerd, so that nothing is left behind.
//
//	cricleanup /path/to/containerd.sock
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cricleanup CONTAINERD_SOCKET")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "cricleanup:", err)
		os.Exit(1)
	}
}

func run(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var failed error
	for _, sb := range list.Items {
		name := sb.Metadata.Namespace + "/" + sb.Metadata.Name
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			failed = fmt.Errorf("stopping %s: %w", name, err)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			failed = fmt.Errorf("removing %s: %w", name, err)
		}
	}
	fmt.Printf("cricleanup: %d pod sandboxes removed\n", len(list.Items))
	return failed
}
