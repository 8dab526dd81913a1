"""Checks a release that make dist wrote, as a user of each artifact would
find it (make test-dist runs it; the e2e test then installs its chart and
image):

- SHA256SUMS verifies every file, and lists every artifact;
- the versions agree: `shardfeed --version` of the wheel installed in a
  fresh venv, `shardfeed.__version__` there, the wheels' names, the chart's
  version and appVersion, the image's name, dist/<version>.env;
- with SHARDFEED_VERIFY_KEY (a public key in PEM), SHA256SUMS and the
  provenance carry valid signatures of it, whatever the build says;
- each wheel is tagged for its architecture and bundles that
  architecture's static binary; the x86_64 one links libjpeg-turbo and
  FFmpeg (its `shardfeed version` says so) and ships their licences, as
  the amd64 image does in /licenses; the aarch64 one links FFmpeg (its
  `shardfeed version` under qemu-user says so) and ships its licences, as
  the arm64 image does;
- the image archive is an OCI index of linux/amd64 and linux/arm64, whose
  digest the chart pins, and each architecture's archive holds the same
  manifest as the index names;
- the SBOM is SPDX 2.3 and names the Go modules the binaries were built
  with (as `go version -m` reports them) and each wheel.

    python hack/check_dist.py dist/<version>
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from pathlib import Path
from typing import NoReturn

ELF_MACHINE = {"x86_64": 62, "aarch64": 183}
# The licence texts shipped beside the amd64 sidecar's statically linked C
# libraries (hack/build-sidecar.sh --licenses): in the image's /licenses
# and the x86_64 wheel's shardfeed/_bin/licenses.
LICENSES = {"FFmpeg/COPYING.LGPLv2.1", "FFmpeg/LICENSE.md", "FFmpeg/SOURCE", "dav1d/COPYING", "libjpeg-turbo/copyright"}
# The arm64 builds link FFmpeg and dav1d, and decode JPEG in Go.
ARM64_LICENSES = LICENSES - {"libjpeg-turbo/copyright"}
# What a binary linking the LGPL FFmpeg says in `shardfeed version`.
VIDEO_DECODER = re.compile(r"\nVideo decoder: FFmpeg \S+ \(LGPL version 2\.1 or later; cgo\): .*\bh264, hevc, libdav1d\b")


def fail(msg: str) -> NoReturn:
    print(f"check_dist: {msg}", file=sys.stderr)
    sys.exit(1)


def pep440(v: str) -> str:
    """The Python version of a release version, as setup.py writes it."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)-(rc|alpha|beta)\.(\d+)", v)
    if m:
        return m.group(1) + {"rc": "rc", "alpha": "a", "beta": "b"}[m.group(2)] + m.group(3)
    m = re.fullmatch(r"(\d+\.\d+\.\d+)-dev\.(\d+)\.g([0-9a-f]+)", v)
    if m:
        return f"{m.group(1)}.dev{m.group(2)}+g{m.group(3)}"
    return v


def oci(path: Path) -> tuple[dict, dict[str, bytes]]:
    with tarfile.open(path) as tar:
        blobs = {}
        for m in tar.getmembers():
            if m.isfile():
                f = tar.extractfile(m)
                assert f is not None
                blobs[m.name] = f.read()
    return json.loads(blobs["index.json"]), blobs


def blob(blobs: dict[str, bytes], digest: str) -> bytes:
    data = blobs["blobs/sha256/" + digest.removeprefix("sha256:")]
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        fail(f"blob {digest} does not hash to its digest")
    return data


def matches(path: Path, digest: str) -> bool:
    """Whether the file's SHA-256 is digest (hex), as sha256sum -c checks."""
    return hashlib.sha256(path.read_bytes()).hexdigest() == digest


def verify(public_key: str, data: Path, signature: Path) -> bool:
    """Whether signature (base64 Ed25519) is the key's over data: openssl, as docs/releasing.md says."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "sig"
        try:  # strictly, as base64 -d reads it
            raw.write_bytes(base64.b64decode(signature.read_bytes().rstrip(b"\n"), validate=True))
        except ValueError:
            return False
        done = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", public_key, "-rawin",
                               "-in", str(data), "-sigfile", str(raw)], capture_output=True, text=True)
    return done.returncode == 0


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    # The build's record, beside the folder: not an artifact, not trusted
    # for anything a signature decides.
    env = dict(line.split("=", 1) for line in (out.parent / f"{out.name}.env").read_text().splitlines() if line)
    v = env["DIST_VERSION"]

    # Checksums: every artifact listed, every line verified.
    listed = {}
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.lstrip("*")] = digest
    signatures = {f"SHA256SUMS.sig", f"shardfeed-{v}.provenance.json.sig"}
    artifacts = {p.name for p in out.iterdir() if p.name != "SHA256SUMS" and p.name not in signatures}
    if set(listed) != artifacts:
        fail(f"SHA256SUMS lists {sorted(listed)}, the folder holds {sorted(artifacts)}")
    for name, digest in listed.items():
        if not matches(out / name, digest):
            fail(f"{name} does not match SHA256SUMS")
    # A tampered artifact (a byte of the krew manifest) is refused.
    with tempfile.TemporaryDirectory() as tmp:
        tampered = Path(tmp) / f"kubectl-shardfeed-{v}.krew.yaml"
        data = bytearray((out / tampered.name).read_bytes())
        data[len(data) // 2] ^= 1
        tampered.write_bytes(bytes(data))
        if matches(tampered, listed[tampered.name]):
            fail("a tampered artifact matches SHA256SUMS")

    # The provenance names every artifact by the digest SHA256SUMS gives.
    statement = json.loads((out / f"shardfeed-{v}.provenance.json").read_text())
    subjects = {sub["name"]: sub["digest"]["sha256"] for sub in statement["subject"]}
    if statement["_type"] != "https://in-toto.io/Statement/v1" or statement["predicateType"] != "https://slsa.dev/provenance/v1":
        fail(f"the provenance is a {statement['_type']} of {statement['predicateType']}")
    if subjects != {n: d for n, d in listed.items() if n != f"shardfeed-{v}.provenance.json"}:
        fail(f"the provenance names {sorted(subjects)}, SHA256SUMS lists {sorted(listed)}")
    params = statement["predicate"]["buildDefinition"]["externalParameters"]
    if params["version"] != v or not re.fullmatch(r".*@[0-9a-f]{40}", params["source"]):
        fail(f"the provenance's parameters are {params}")

    # The signatures, with the public key the release's users are given
    # (SHARDFEED_VERIFY_KEY), checked as docs/releasing.md tells them to:
    # with a key, both are required, whatever the build's record says.
    key = os.environ.get("SHARDFEED_VERIFY_KEY")
    if key:
        for name in sorted(signatures):
            if not (out / name).is_file():
                fail(f"{name} is missing: the release is not signed")
            if not verify(key, out / name.removesuffix(".sig"), out / name):
                fail(f"{name} does not verify with {key}")
        # A tampered file must not verify.
        with tempfile.TemporaryDirectory() as tmp:
            forged = Path(tmp) / "SHA256SUMS"
            forged.write_bytes((out / "SHA256SUMS").read_bytes().replace(listed[f"shardfeed-{v}.tgz"].encode(), b"0" * 64))
            if verify(key, forged, out / "SHA256SUMS.sig"):
                fail("a tampered SHA256SUMS verifies: the signature check proves nothing")
            # Nor one file's signature another's, nor a signature with
            # anything around it.
            if verify(key, out / "SHA256SUMS", out / f"shardfeed-{v}.provenance.json.sig"):
                fail("the provenance's signature verifies SHA256SUMS")
            padded = Path(tmp) / "padded.sig"
            padded.write_bytes(b"!" + (out / "SHA256SUMS.sig").read_bytes())
            if verify(key, out / "SHA256SUMS", padded):
                fail("a signature with a stray character verifies: base64 is read leniently")
    elif any((out / name).exists() for name in signatures):
        fail("the release is signed: give its public key in SHARDFEED_VERIFY_KEY to check it")

    # The wheels: one per architecture, each with its binary.
    py = pep440(v)
    wheels = {}
    for machine in ("x86_64", "aarch64"):
        found = sorted(out.glob(f"shardfeed-*-py3-none-manylinux_2_17_{machine}.manylinux2014_{machine}.whl"))
        if len(found) != 1:
            fail(f"no one {machine} wheel (the folder holds {sorted(artifacts)})")
        name = found[0].name
        with zipfile.ZipFile(out / name) as z:
            elf = z.read("shardfeed/_bin/shardfeed")
            names = set(z.namelist())
            metadata = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
            text = z.read(metadata[0]).decode()
        if elf[:4] != b"\x7fELF" or int.from_bytes(elf[18:20], "little") != ELF_MACHINE[machine]:
            fail(f"{name} bundles no {machine} binary")
        if f"\nVersion: {py}\n" not in text:
            fail(f"{name}'s METADATA says another version than {py}")
        want = LICENSES if machine == "x86_64" else ARM64_LICENSES
        if not want <= {n.removeprefix("shardfeed/_bin/licenses/") for n in names}:
            fail(f"{name} bundles a binary that links {', '.join(sorted({n.split('/')[0] for n in want}))} without all of their licences {sorted(want)}")
        if machine == "aarch64":
            said = run_arm64(elf, "version")
            if not VIDEO_DECODER.search(said):
                fail(f"the aarch64 wheel's shardfeed (under qemu-user) does not decode video with the LGPL FFmpeg: {said.strip()!r}")
        wheels[machine] = out / name

    # The host's wheel in a fresh venv: the CLI and the package agree.
    with tempfile.TemporaryDirectory() as tmp:
        venv.EnvBuilder(with_pip=True).create(tmp)
        pip = [f"{tmp}/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index"]
        subprocess.run([*pip, str(wheels[os.uname().machine])], check=True)
        cli = subprocess.run([f"{tmp}/bin/shardfeed", "--version"], capture_output=True, text=True, check=True).stdout
        if not cli.startswith(f"shardfeed v{v} "):
            fail(f"the wheel's shardfeed --version says {cli.strip()!r}, want v{v}")
        jpeg = subprocess.run([f"{tmp}/bin/shardfeed", "version"], capture_output=True, text=True, check=True).stdout
        if os.uname().machine == "x86_64" and "JPEG decoder: libjpeg-turbo" not in jpeg:
            fail(f"the x86_64 wheel's shardfeed decodes JPEGs without libjpeg-turbo: {jpeg.strip()!r}")
        if os.uname().machine == "x86_64" and not VIDEO_DECODER.search(jpeg):
            fail(f"the x86_64 wheel's shardfeed does not decode video with the LGPL FFmpeg (h264, hevc, AV1): {jpeg.strip()!r}")
        got = subprocess.run([f"{tmp}/bin/python", "-c", "import shardfeed; print(shardfeed.__version__)"],
                             capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]}).stdout.strip()
        if got != py:
            fail(f"shardfeed.__version__ is {got}, want {py}")

    # The kubectl plugin: an archive per architecture with its binary and
    # the license, the host's saying this version, and a krew manifest
    # whose checksums are the archives'.
    archs = {"x86_64": "amd64", "aarch64": "arm64"}
    manifest = (out / f"kubectl-shardfeed-{v}.krew.yaml").read_text()
    if f"\n  version: v{v}\n" not in manifest:
        fail(f"the krew manifest names another version than v{v}")
    for machine, arch in archs.items():
        name = f"kubectl-shardfeed-{v}-linux-{arch}.tar.gz"
        with tarfile.open(out / name) as t:
            if sorted(t.getnames()) != ["LICENSE", "kubectl-shardfeed"]:
                fail(f"{name} holds {t.getnames()}, want kubectl-shardfeed and LICENSE")
            member = t.extractfile("kubectl-shardfeed")
            assert member is not None
            elf = member.read()
        if elf[:4] != b"\x7fELF" or int.from_bytes(elf[18:20], "little") != ELF_MACHINE[machine]:
            fail(f"{name} holds no {machine} binary")
        if f"sha256: {listed[name]}\n" not in manifest or f"/{name}\n" not in manifest:
            fail(f"the krew manifest does not give {name} with its checksum {listed[name]}")
        if machine == os.uname().machine:
            with tempfile.TemporaryDirectory() as tmp:
                plugin = Path(tmp) / "kubectl-shardfeed"
                plugin.write_bytes(elf)
                plugin.chmod(0o755)
                said = json.loads(subprocess.run([str(plugin), "version", "-o", "json"], capture_output=True, text=True,
                                                 check=True).stdout)
            if said["version"] != f"v{v}" or not said.get("commit"):
                fail(f"kubectl shardfeed version says {said}, want v{v} and its commit")

    # The image: an index of both architectures, named <repository>:<v>.
    index, blobs = oci(out / f"shardfeed-image-{v}.tar")
    top = index["manifests"][0]
    if top["annotations"]["io.containerd.image.name"] != env["DIST_IMAGE_NAME"] or not env["DIST_IMAGE_NAME"].endswith(f":{v}"):
        fail(f"the image is named {top['annotations']}, want {env['DIST_IMAGE_NAME']}")
    if top["mediaType"] != "application/vnd.oci.image.index.v1+json" or env["DIST_IMAGE"] != f"{env['DIST_IMAGE_REPOSITORY']}@{top['digest']}":
        fail(f"the image's top descriptor is {top}, dist.env says {env['DIST_IMAGE']}")
    platforms = {}
    for m in json.loads(blob(blobs, top["digest"]))["manifests"]:
        manifest = json.loads(blob(blobs, m["digest"]))
        config = json.loads(blob(blobs, manifest["config"]["digest"]))
        if config["architecture"] != m["platform"]["architecture"] or config["config"]["Entrypoint"] != ["/manager"]:
            fail(f"the {m['platform']} manifest's config says {config['architecture']}, {config['config']}")
        layer = blob(blobs, manifest["layers"][0]["digest"])
        with tarfile.open(fileobj=io.BytesIO(layer)) as t:
            files = set(t.getnames())
        want = LICENSES if config["architecture"] == "amd64" else ARM64_LICENSES
        if not {"licenses/" + n for n in want} <= files:
            fail(f"the {config['architecture']} image's sidecar links {', '.join(sorted({n.split('/')[0] for n in want}))}, but /licenses lacks some of {sorted(want)}")
        platforms[config["architecture"]] = m["digest"]
        single, _ = oci(out / f"shardfeed-image-{v}-linux-{config['architecture']}.tar")
        if single["manifests"][0]["digest"] != m["digest"]:
            fail(f"shardfeed-image-{v}-linux-{config['architecture']}.tar holds another image than the index's")
    if sorted(platforms) != ["amd64", "arm64"]:
        fail(f"the image index has {sorted(platforms)}, want amd64 and arm64")

    # The chart: this version, its image pinned by the index's digest.
    with tarfile.open(out / f"shardfeed-{v}.tgz") as tar:
        chart = tar.extractfile("shardfeed/Chart.yaml").read().decode()  # type: ignore[union-attr]
        values = tar.extractfile("shardfeed/values.yaml").read().decode()  # type: ignore[union-attr]
    def field(text: str, key: str, indent: str = "") -> str:  # the first "key: value" line's value, unquoted
        m = re.search(rf"^{indent}{key}: *\"?([^\"\n]*)\"?$", text, re.M)
        return m.group(1) if m else ""

    if field(chart, "version") != v or field(chart, "appVersion") != v:
        fail(f"the chart's version is {field(chart, 'version')} and its appVersion {field(chart, 'appVersion')}, want {v}")
    repo, digest = field(values, "repository", "  "), field(values, "digest", "  ")  # image: comes first
    if repo != env["DIST_IMAGE_REPOSITORY"] or digest != top["digest"]:
        fail(f"the chart's values name the image {repo}@{digest}, not {env['DIST_IMAGE']}")

    # The SBOM: every module of the binary, every wheel.
    sbom = json.loads((out / f"shardfeed-{v}.spdx.json").read_text())
    if sbom["spdxVersion"] != "SPDX-2.3" or sbom["name"] != f"shardfeed-{v}":
        fail(f"the SBOM is {sbom['spdxVersion']} {sbom['name']}")
    purls = {r["referenceLocator"] for p in sbom["packages"] for r in p.get("externalRefs", [])}
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheels[os.uname().machine]) as z:
        z.extract("shardfeed/_bin/shardfeed", tmp)
        mods = subprocess.run(["go", "version", "-m", f"{tmp}/shardfeed/_bin/shardfeed"], capture_output=True, text=True, check=True).stdout
    deps = [line.split()[1:3] for line in io.StringIO(mods) if line.strip().startswith("dep")]
    missing = [f"{p}@{ver}" for p, ver in deps if f"pkg:golang/{p}@{ver}" not in purls]
    if not deps or missing:
        fail(f"the SBOM lacks {missing[:5]} of the binary's {len(deps)} modules")
    if f"pkg:pypi/shardfeed@{v}" not in purls:
        fail("the SBOM names no wheel")
    # The x86_64 wheel bundles the sidecar's build, libjpeg-turbo linked in.
    ids = {p["SPDXID"]: p for p in sbom["packages"]}
    contains = {ids[r["spdxElementId"]]["packageFileName"]: r["relatedSpdxElement"] for r in sbom["relationships"]
                if r["relationshipType"] == "CONTAINS" and r["spdxElementId"] in ids}
    linked = {(r["spdxElementId"], ids[r["relatedSpdxElement"]]["name"]) for r in sbom["relationships"]
              if r["relationshipType"] == "STATIC_LINK" and r["relatedSpdxElement"] in ids}
    for machine, libs in (("x86_64", ("libjpeg-turbo", "FFmpeg", "dav1d")), ("aarch64", ("FFmpeg", "dav1d"))):
        for lib in libs:
            if (contains.get(wheels[machine].name), lib) not in linked:
                fail(f"the SBOM does not say the {machine} wheel's binary links {lib} ({contains.get(wheels[machine].name)})")
    print(f"check_dist: shardfeed {v}: {len(artifacts)} artifacts verified; wheel {py}, image {top['digest'][:19]}…, "
          f"chart {v}, SBOM of {len(sbom['packages'])} packages")


def run_arm64(elf: bytes, *args: str) -> str:
    """Runs an aarch64 static binary under qemu-user (make tools-debian's
    qemu-user) and returns what it printed."""
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        fail("qemu-aarch64 is missing: make tools-debian installs qemu-user, which runs the arm64 binaries' checks")
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "shardfeed"
        binary.write_bytes(elf)
        binary.chmod(0o755)
        return subprocess.run([qemu, str(binary), *args], capture_output=True, text=True, check=True).stdout


if __name__ == "__main__":
    main()
