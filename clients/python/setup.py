"""The platform wheel: the package with the static shardfeed binary in
shardfeed/_bin/ (make wheel puts it there), tagged py3-none-<platform> as
ruff's and uv's wheels are: any Python 3, this OS and CPU. Without the
binary it builds a pure wheel that finds shardfeed on PATH."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from setuptools import Distribution, setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
BUNDLED = HERE / "src" / "shardfeed" / "_bin" / "shardfeed"
# A static Go binary needs no libc symbols: manylinux2014 fits any glibc
# Linux of the last decade.
PLATFORMS = {("Linux", "x86_64"): "manylinux_2_17_x86_64.manylinux2014_x86_64",
             ("Linux", "aarch64"): "manylinux_2_17_aarch64.manylinux2014_aarch64"}


def version() -> str:
    """PEP 440 from the project's version ($SHARDFEED_VERSION, as the
    Makefile or make dist gives it): v1.2.3 → 1.2.3; v1.2.3-4-gabc →
    1.2.3.post4+gabc; a release candidate 1.2.3-rc.1 → 1.2.3rc1; make dist's
    development build 1.2.3-dev.5.gabc → 1.2.3.dev5+gabc; a bare commit → the
    package's base version as a dev build of it."""
    base = re.search(r'_BASE_VERSION = "([^"]+)"', (HERE / "src" / "shardfeed" / "__init__.py").read_text()).group(1)  # type: ignore[union-attr]
    given = os.environ.get("SHARDFEED_VERSION", "").strip()
    m = re.fullmatch(r"v?(\d+\.\d+\.\d+)(?:-(\d+)-g([0-9a-f]+))?(-dirty)?", given)
    if m:
        out = m.group(1)
        if m.group(2):
            out += f".post{m.group(2)}+g{m.group(3)}"
        return out
    m = re.fullmatch(r"v?(\d+\.\d+\.\d+)-(rc|alpha|beta)\.(\d+)", given)
    if m:
        return m.group(1) + {"rc": "rc", "alpha": "a", "beta": "b"}[m.group(2)] + m.group(3)
    m = re.fullmatch(r"v?(\d+\.\d+\.\d+)-dev\.(\d+)\.g([0-9a-f]+)", given)
    if m:
        return f"{m.group(1)}.dev{m.group(2)}+g{m.group(3)}"
    m = re.fullmatch(r"([0-9a-f]{7,40})(-dirty)?", given)
    if m:
        return f"{base}.dev0+g{m.group(1)}"
    if given:
        raise SystemExit(f"SHARDFEED_VERSION={given!r} is no version make dist or git describe gives (v1.2.3, 1.2.3-rc.1, 1.2.3-dev.5.gabc)")
    return base


class BinaryDistribution(Distribution):
    """A distribution with platform content: the package goes to the
    wheel's root (platlib), not to .data/purelib."""

    def has_ext_modules(self) -> bool:
        return BUNDLED.exists()


class PlatformWheel(bdist_wheel):  # type: ignore[misc]
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = not BUNDLED.exists()

    def get_tag(self) -> tuple[str, str, str]:
        if not BUNDLED.exists():
            return super().get_tag()  # type: ignore[no-any-return]
        # make dist builds each architecture's wheel on one machine.
        key = (platform.system(), os.environ.get("SHARDFEED_WHEEL_MACHINE") or platform.machine())
        if key not in PLATFORMS:
            raise SystemExit(f"no wheel platform tag for {key}: add it to PLATFORMS in setup.py")
        return "py3", "none", PLATFORMS[key]


setup(version=version(), distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
