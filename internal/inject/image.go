package inject

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"golang.org/x/mod/semver"
	corev1 "k8s.io/api/core/v1"
)

// ImagePolicy decides which image a sidecar runs (design §9): the
// operator's default; a job's pinned image, any tag or digest of the
// default's repository (so that a job pinned to the image it started with
// keeps it across an operator upgrade: pods cannot write the pin); or a
// dataset's spec.sidecar.image when it is the default's release or a newer
// one of its repository, or matches an entry the platform team allows. The
// sidecar gets the dataset's storage credentials: a dataset's author may
// not pick an old release of it (with the holes since fixed).
type ImagePolicy struct {
	// Default is the operator's sidecar image.
	Default string
	// Allowed are image references a dataset may name: exact, or ending
	// in ":*" (any tag of the repository) or "@*" (any digest).
	Allowed []string
	// PullSecrets name the Secrets, in each training pod's namespace, the
	// sidecar's image is pulled with (a private registry): the webhook
	// adds those the pod lacks to its imagePullSecrets.
	PullSecrets []string
}

// addPullSecrets gives the pod the Secrets the sidecar's image is pulled
// with, after its own (the kubelet tries each).
func (p ImagePolicy) addPullSecrets(pod *corev1.Pod) {
	for _, name := range p.PullSecrets {
		if !slices.ContainsFunc(pod.Spec.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == name }) {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
}

// Allows reports whether image may run as a sidecar.
func (p ImagePolicy) Allows(image string) bool {
	if image == "" {
		return false
	}
	if image == p.Default {
		return true
	}
	entries := p.Allowed
	if repo := repository(p.Default); repo != "" {
		entries = append([]string{repo + ":*", repo + "@*"}, entries...)
	}
	for _, e := range entries {
		if matchImage(e, image) {
			return true
		}
	}
	return false
}

// Check returns why a dataset's spec.sidecar.image may not run, or nil:
// the default, a release of its repository at least as new (a semantic
// version tag, v optional), or an entry of the list; a digest of the
// repository only as the default or listed (a digest says nothing of its
// release).
func (p ImagePolicy) Check(image string) error {
	if image == "" || image == p.Default || p.listed(image) || p.newerRelease(image) {
		return nil
	}
	allowed := "none"
	if len(p.Allowed) > 0 {
		allowed = strings.Join(p.Allowed, ", ")
	}
	return fmt.Errorf("spec.sidecar.image %q is not an image the platform team allows for sidecars (they receive the dataset's storage credentials): remove it to run the operator's %s, use a release of %s at least as new, or one of the chart's sidecar.allowedImages (%s)",
		image, p.Default, repository(p.Default), allowed)
}

// listed reports whether the platform team's list allows image.
func (p ImagePolicy) listed(image string) bool {
	for _, e := range p.Allowed {
		if matchImage(e, image) {
			return true
		}
	}
	return false
}

// newerRelease reports whether image is a tag of the default's repository
// whose release is at least the default's.
func (p ImagePolicy) newerRelease(image string) bool {
	repo := repository(p.Default)
	if repo == "" || !matchImage(repo+":*", image) {
		return false
	}
	have, ok := release(strings.TrimPrefix(p.Default, repo+":"))
	want, ok2 := release(strings.TrimPrefix(image, repo+":"))
	return ok && ok2 && semver.Compare(want, have) >= 0
}

// release reads a tag as a semantic version ("0.3.1" or "v0.3.1"), in
// golang.org/x/mod/semver's form.
func release(tag string) (string, bool) {
	v := "v" + strings.TrimPrefix(tag, "v")
	return v, semver.IsValid(v)
}

// matchImage matches an image against an allow-list entry: a wildcard
// stands for one tag or one digest, never for more of the repository's name.
func matchImage(entry, image string) bool {
	if prefix, ok := strings.CutSuffix(entry, ":*"); ok {
		tag, ok := strings.CutPrefix(image, prefix+":")
		return ok && tag != "" && !strings.ContainsAny(tag, "/:@")
	}
	if prefix, ok := strings.CutSuffix(entry, "@*"); ok {
		digest, ok := strings.CutPrefix(image, prefix+"@")
		algo, hex, found := strings.Cut(digest, ":")
		return ok && found && algo != "" && hex != "" && !strings.ContainsAny(digest, "/@") && !strings.Contains(hex, ":")
	}
	return entry == image
}

// repository returns an image's repository as written (without tag or
// digest), "" if it does not parse.
func repository(image string) string {
	ref, err := reference.Parse(image)
	if err != nil {
		return ""
	}
	named, ok := ref.(reference.Named)
	if !ok {
		return ""
	}
	return named.Name()
}
