// Command sbom writes the SPDX 2.3 software bill of materials of a
// shardfeed release: each Go binary, with the module versions the Go
// toolchain recorded in it (debug/buildinfo) and, for the builds that link
// C libraries statically (-tags libjpeg: libjpeg-turbo; -tags ffmpeg:
// FFmpeg and dav1d), those libraries; and the Python client's wheels, each
// with the binary it bundles. make dist runs it.
//
//	sbom -version 0.2.0 -out shardfeed-0.2.0.spdx.json -created 2026-11-27T10:00:00Z -libjpeg 2.1.5 -ffmpeg 7.1.5 -dav1d 1.5.1 \
//	  -wheel shardfeed-0.2.0-py3-none-manylinux_2_17_x86_64.whl dist/bin/linux-amd64/shardfeed ...
package main

import (
	"archive/zip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	version := flag.String("version", "", "the release's version (0.2.0)")
	out := flag.String("out", "", "the SBOM to write (SPDX 2.3 JSON)")
	created := flag.String("created", "", "the creation time (RFC 3339; the commit's, so the SBOM is reproducible)")
	versions := map[string]*string{}
	for _, l := range cLibraries {
		versions[l.Name] = flag.String(l.Flag, "", fmt.Sprintf("the version of the %s the -tags %s binaries link statically", l.Name, l.Tag))
	}
	var wheels multi
	flag.Var(&wheels, "wheel", "a wheel of the release (repeatable)")
	flag.Parse()
	given := map[string]string{}
	for name, v := range versions {
		given[name] = *v
	}
	if err := run(*version, *out, *created, given, wheels, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type pkg struct {
	Name             string   `json:"name"`
	SPDXID           string   `json:"SPDXID"`
	VersionInfo      string   `json:"versionInfo,omitempty"`
	PackageFileName  string   `json:"packageFileName,omitempty"`
	DownloadLocation string   `json:"downloadLocation"`
	FilesAnalyzed    bool     `json:"filesAnalyzed"`
	Checksums        []sum    `json:"checksums,omitempty"`
	LicenseConcluded string   `json:"licenseConcluded"`
	LicenseDeclared  string   `json:"licenseDeclared"`
	CopyrightText    string   `json:"copyrightText"`
	PrimaryPurpose   string   `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []extRef `json:"externalRefs,omitempty"`
}

type sum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type extRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func id(kind, name, version string) string {
	return "SPDXRef-" + kind + "-" + strings.Trim(unsafeID.ReplaceAllString(name+"-"+version, "-"), "-")
}

func fileSum(path string) ([]sum, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(b)
	return []sum{{"SHA256", hex.EncodeToString(h[:])}}, nil
}

// cLibrary is a C library a build tag links statically.
type cLibrary struct {
	Tag, Name, Flag, Download, License string
}

// cLibraries are the C libraries of the cgo builds, by their tags.
var cLibraries = []cLibrary{
	{Tag: "libjpeg", Name: "libjpeg-turbo", Flag: "libjpeg", Download: "https://libjpeg-turbo.org/", License: "IJG AND BSD-3-Clause AND Zlib"},
	{Tag: "ffmpeg", Name: "FFmpeg", Flag: "ffmpeg", Download: "https://ffmpeg.org/releases/", License: "LGPL-2.1-or-later"},
	{Tag: "ffmpeg", Name: "dav1d", Flag: "dav1d", Download: "https://code.videolan.org/videolan/dav1d", License: "BSD-2-Clause"},
}

func run(version, out, created string, cVersions map[string]string, wheels, binaries []string) error {
	if version == "" || out == "" || created == "" || len(binaries) == 0 {
		return errors.New("give -version, -out, -created and the release's Go binaries")
	}
	var pkgs []pkg
	var rels []relationship
	modules := map[string]pkg{}
	binIDs := map[string]string{} // a binary's SHA-256 → its id
	for _, path := range binaries {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		goarch, tags := "", ""
		for _, s := range info.Settings {
			switch s.Key {
			case "GOARCH":
				goarch = s.Value
			case "-tags":
				tags = "," + s.Value + ","
			}
		}
		name := filepath.Base(path)
		sums, err := fileSum(path)
		if err != nil {
			return err
		}
		bin := pkg{Name: name + " (linux/" + goarch + ")", SPDXID: id("Binary", name+"-"+goarch, version), VersionInfo: version,
			PackageFileName: name, DownloadLocation: "NOASSERTION", Checksums: sums, LicenseConcluded: "NOASSERTION",
			LicenseDeclared: "Apache-2.0", CopyrightText: "NOASSERTION", PrimaryPurpose: "APPLICATION",
			ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", fmt.Sprintf("pkg:golang/%s@v%s?goarch=%s", info.Main.Path, version, goarch)}}}
		pkgs = append(pkgs, bin)
		binIDs[sums[0].ChecksumValue] = bin.SPDXID
		rels = append(rels, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", bin.SPDXID})
		for _, l := range cLibraries {
			if !strings.Contains(tags, ","+l.Tag+",") {
				continue
			}
			rel, err := linkC(modules, bin.SPDXID, path, l, cVersions[l.Name])
			if err != nil {
				return err
			}
			rels = append(rels, rel)
		}
		goID := id("Go", "stdlib", info.GoVersion)
		if _, ok := modules[goID]; !ok {
			modules[goID] = pkg{Name: "stdlib", SPDXID: goID, VersionInfo: info.GoVersion, DownloadLocation: "https://go.dev/dl/",
				LicenseConcluded: "NOASSERTION", LicenseDeclared: "BSD-3-Clause", CopyrightText: "NOASSERTION", PrimaryPurpose: "LIBRARY",
				ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + strings.TrimPrefix(info.GoVersion, "go")}}}
		}
		rels = append(rels, relationship{bin.SPDXID, "DEPENDS_ON", goID})
		for _, d := range info.Deps {
			m := d
			download := "https://proxy.golang.org/" + d.Path + "/@v/" + d.Version + ".zip"
			if r := d.Replace; r != nil {
				if strings.HasPrefix(r.Path, ".") || filepath.IsAbs(r.Path) { // this repository's own module: its name, its source here
					download = "NOASSERTION"
				} else {
					m, download = r, "https://proxy.golang.org/"+r.Path+"/@v/"+r.Version+".zip"
				}
			}
			mid := id("Go", m.Path, m.Version)
			if _, ok := modules[mid]; !ok {
				modules[mid] = pkg{Name: m.Path, SPDXID: mid, VersionInfo: m.Version, DownloadLocation: download,
					LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION", PrimaryPurpose: "LIBRARY",
					Checksums:    h1(m.Sum),
					ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + m.Path + "@" + m.Version}}}
			}
			rels = append(rels, relationship{bin.SPDXID, "DEPENDS_ON", mid})
		}
	}
	for _, w := range wheels {
		p, contains, err := wheelPackage(w, version, binIDs)
		if err != nil {
			return err
		}
		pkgs = append(pkgs, p)
		rels = append(rels, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", p.SPDXID}, contains)
	}
	ids := make([]string, 0, len(modules))
	for k := range modules {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	for _, k := range ids {
		pkgs = append(pkgs, modules[k])
	}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "shardfeed-" + version,
		"documentNamespace": "https://github.com/shardfeed/shardfeed/releases/" + version + "/sbom",
		"creationInfo":      map[string]any{"created": created, "creators": []string{"Tool: shardfeed-hack-sbom", "Organization: shardfeed"}},
		"packages":          pkgs,
		"relationships":     rels,
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// h1 is a module's go.sum hash as an SPDX checksum (SHA256 of its tree).
func h1(s string) []sum {
	v, ok := strings.CutPrefix(s, "h1:")
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil
	}
	return []sum{{"SHA256", hex.EncodeToString(raw)}}
}

// wheelPackage is a wheel's package, and its relationship to the binary
// it bundles (among binIDs, by checksum).
func wheelPackage(w, version string, binIDs map[string]string) (pkg, relationship, error) {
	sums, err := fileSum(w)
	if err != nil {
		return pkg{}, relationship{}, err
	}
	base := filepath.Base(w)
	p := pkg{Name: "shardfeed (" + base + ")", SPDXID: id("Wheel", base, version), VersionInfo: version, PackageFileName: base,
		DownloadLocation: "NOASSERTION", Checksums: sums, LicenseConcluded: "NOASSERTION", LicenseDeclared: "Apache-2.0",
		CopyrightText: "NOASSERTION", PrimaryPurpose: "LIBRARY",
		ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:pypi/shardfeed@" + version}}}
	bundled, err := bundledSum(w)
	if err != nil {
		return pkg{}, relationship{}, err
	}
	b, ok := binIDs[bundled]
	if !ok {
		return pkg{}, relationship{}, fmt.Errorf("%s bundles a binary that is none of those given", base)
	}
	return p, relationship{p.SPDXID, "CONTAINS", b}, nil
}

// linkC adds the C library l at version to modules (once) and says that
// the binary bin (at path) links it statically.
func linkC(modules map[string]pkg, bin, path string, l cLibrary, version string) (relationship, error) {
	if version == "" {
		return relationship{}, fmt.Errorf("%s links %s (-tags %s): give its version with -%s", path, l.Name, l.Tag, l.Flag)
	}
	cid := id("C", l.Name, version)
	if _, ok := modules[cid]; !ok {
		modules[cid] = pkg{Name: l.Name, SPDXID: cid, VersionInfo: version, DownloadLocation: l.Download,
			LicenseConcluded: "NOASSERTION", LicenseDeclared: l.License, CopyrightText: "NOASSERTION",
			PrimaryPurpose: "LIBRARY", ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:generic/" + strings.ToLower(l.Name) + "@" + version}}}
	}
	return relationship{bin, "STATIC_LINK", cid}, nil
}

// bundledSum is the SHA-256 of the binary a wheel bundles.
func bundledSum(wheel string) (string, error) {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return "", err
	}
	defer func() { _ = z.Close() }()
	f, err := z.Open("shardfeed/_bin/shardfeed")
	if err != nil {
		return "", fmt.Errorf("%s: %w", wheel, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", wheel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
