package main

import "golang.org/x/sys/unix"

// notDumpable makes the process not dumpable: another process of the same
// user on the node (a container run as root with the host's process
// namespace) then needs CAP_SYS_PTRACE to open its /proc/<pid>/root,
// where the agent's cache and key are.
func notDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
