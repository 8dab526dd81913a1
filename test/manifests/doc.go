// Package manifests checks the install manifests (kustomize in config/ and
// the Helm chart in charts/) against a real API server: every object they
// render must be accepted as is.
package manifests
