// Command ociarchive writes a one-layer OCI image archive (an OCI image
// layout in a tar) from local files, without a container engine or a
// registry: what `ctr images import` loads into a node's containerd.
// The archive is reproducible: fixed times, owners and order.
//
//	ociarchive -ref registry.local/shardfeed:e2e -out shardfeed.tar \
//	  -entrypoint /manager -user 65532:65532 bin/manager:/manager bin/shardfeed:/shardfeed
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
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: ociarchive -ref NAME:TAG -out FILE.tar -entrypoint CMD [-user UID:GID] SRC:DEST...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*ref, *out, *entry, *user, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ociarchive:", err)
		os.Exit(1)
	}
}

type file struct {
	src, dest string
}

func run(ref, out, entry, user string, args []string) error {
	if ref == "" || out == "" || entry == "" || len(args) == 0 {
		flag.Usage()
		return errors.New("-ref, -out, -entrypoint and at least one SRC:DEST are required")
	}
	var files []file
	for _, a := range args {
		src, dest, ok := strings.Cut(a, ":")
		if !ok || !path.IsAbs(dest) {
			return fmt.Errorf("%q: want SRC:DEST with an absolute DEST", a)
		}
		files = append(files, file{src, dest})
	}
	layer, err := layerTar(files, user)
	if err != nil {
		return err
	}
	layerDigest := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
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
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return fmt.Errorf("-ref %q needs a tag (name:tag)", ref)
	}
	md := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	// containerd names the image from io.containerd.image.name; other
	// tools read the tag from org.opencontainers.image.ref.name.
	md["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{md}})
	if err != nil {
		return err
	}

	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blob(config), config},
		{blob(layer), layer},
		{blob(manifest), manifest},
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
