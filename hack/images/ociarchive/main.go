// Command ociarchive writes a one-layer OCI image archive (an OCI image
// layout in a tar) from local files, without a container engine or a
// registry: what `ctr images import` loads into a node's containerd.
// The archive is reproducible: fixed times, owners and order.
//
//	ociarchive -ref registry.local/shardfeed:e2e -out shardfeed.tar \
//	  -entrypoint /manager -user 65532:65532 bin/manager:/manager bin/shardfeed:/shardfeed
//
// With -platform ARCH=SRC:DEST,... once per architecture it writes an image
// index of them all under one name (make dist's release image).
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

func main() {
	ref := flag.String("ref", "", "image name and tag, e.g. registry.local/shardfeed:e2e")
	out := flag.String("out", "", "the archive to write")
	entry := flag.String("entrypoint", "", "the entrypoint, space-separated")
	user := flag.String("user", "65532:65532", "the user the image runs as")
	digestFile := flag.String("digest-file", "", "write the image's digest (sha256:…) here: its manifest's, or its index's for several platforms")
	var platforms platformFlags
	flag.Var(&platforms, "platform", "ARCH=SRC:DEST[,SRC:DEST...]: the files of one linux architecture (repeatable: an image index of them all); without it, SRC:DEST arguments for linux/amd64")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: ociarchive -ref NAME:TAG -out FILE.tar -entrypoint CMD [-user UID:GID] (SRC:DEST... | -platform ARCH=SRC:DEST,... ...)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if len(platforms) == 0 && flag.NArg() > 0 {
		platforms = append(platforms, platform{arch: "amd64", files: flag.Args()})
	} else if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "ociarchive: give the files as SRC:DEST arguments or with -platform, not both")
		os.Exit(2)
	}
	d, err := run(*ref, *out, *entry, *user, platforms)
	if err == nil && *digestFile != "" {
		err = os.WriteFile(*digestFile, []byte(d+"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociarchive:", err)
		os.Exit(1)
	}
}

type file struct {
	src, dest string
}

// platform is one architecture's files.
type platform struct {
	arch  string
	files []string
}

type platformFlags []platform

func (p *platformFlags) String() string { return fmt.Sprint(*p) }

func (p *platformFlags) Set(v string) error {
	arch, files, ok := strings.Cut(v, "=")
	if !ok || arch == "" || files == "" {
		return fmt.Errorf("%q: want ARCH=SRC:DEST[,SRC:DEST...]", v)
	}
	*p = append(*p, platform{arch: arch, files: strings.Split(files, ",")})
	return nil
}

// run writes the archive and returns the image's digest.
func run(ref, out, entry, user string, platforms []platform) (string, error) {
	if ref == "" || out == "" || entry == "" || len(platforms) == 0 {
		flag.Usage()
		return "", errors.New("-ref, -out, -entrypoint and at least one SRC:DEST are required")
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return "", fmt.Errorf("-ref %q needs a tag (name:tag)", ref)
	}
	blobs := map[string][]byte{}
	var manifests []map[string]any
	for _, p := range platforms {
		md, err := image(p, entry, user, blobs)
		if err != nil {
			return "", fmt.Errorf("linux/%s: %w", p.arch, err)
		}
		manifests = append(manifests, md)
	}
	top := manifests[0]
	if len(manifests) > 1 { // an image index: one name for every architecture
		for i, p := range platforms {
			manifests[i]["platform"] = map[string]string{"architecture": p.arch, "os": "linux"}
		}
		idx, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
		if err != nil {
			return "", err
		}
		blobs[blob(idx)] = idx
		top = descriptor("application/vnd.oci.image.index.v1+json", idx)
	}
	// containerd names the image from io.containerd.image.name; other
	// tools read the tag from org.opencontainers.image.ref.name.
	top["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{top}})
	if err != nil {
		return "", err
	}
	return top["digest"].(string), writeLayout(out, index, blobs)
}

// image adds one architecture's config, layer and manifest to blobs and
// returns the manifest's descriptor.
func image(p platform, entry, user string, blobs map[string][]byte) (map[string]any, error) {
	var files []file
	for _, a := range p.files {
		src, dest, ok := strings.Cut(a, ":")
		if !ok || !path.IsAbs(dest) {
			return nil, fmt.Errorf("%q: want SRC:DEST with an absolute DEST", a)
		}
		files = append(files, file{src, dest})
	}
	layer, err := layerTar(files, user)
	if err != nil {
		return nil, err
	}
	layerDigest := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": p.arch,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": strings.Fields(entry),
			"User":       user,
			"Env":        []string{"PATH=/"},
			"WorkingDir": "/",
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		"history": []map[string]string{{"created_by": "hack/images/ociarchive"}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return nil, err
	}
	for _, b := range [][]byte{config, layer, manifest} {
		blobs[blob(b)] = b
	}
	return descriptor("application/vnd.oci.image.manifest.v1+json", manifest), nil
}

// writeLayout writes the OCI image layout as a tar, in a fixed order.
func writeLayout(out string, index []byte, blobs map[string][]byte) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	names := make([]string, 0, len(blobs))
	for name := range blobs {
		names = append(names, name)
	}
	sort.Strings(names)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, name := range names {
		entries = append(entries, struct {
			name string
			data []byte
		}{name, blobs[name]})
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}

// layerTar is the image's one layer: the files, /etc/passwd and /etc/group
// naming the user, and a writable /tmp.
func layerTar(files []file, user string) ([]byte, error) {
	uid, gid, _ := strings.Cut(user, ":")
	if gid == "" {
		gid = uid
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	var addDir func(string) error
	addDir = func(d string) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		if err := addDir(path.Dir(d)); err != nil {
			return err
		}
		dirs[d] = true
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		return tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: epoch})
	}
	add := func(name string, mode int64, data []byte) error {
		if err := addDir(path.Dir(name)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := addDir("/tmp"); err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/:/sbin/nologin\n", uid, gid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%s:\n", gid)
	if err := add("/etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := add("/etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].dest < files[j].dest })
	for _, f := range files {
		r, err := os.Open(f.src)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(f.src)
		if err != nil {
			return nil, err
		}
		if err := add(f.dest, int64(st.Mode().Perm()|0o444), data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blob(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

func descriptor(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
}
