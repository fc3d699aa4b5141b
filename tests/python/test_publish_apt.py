"""The done-criterion of publishing: a clean container configured only by the published .sources
file installs gdrcopy with apt, signatures checked (slow).

HEAD's .deb packages (the DKMS set) are published with a throwaway key into
a temporary directory, served over loopback HTTP from a thread, and a
container of the package scenarios' bookworm image (dkms and kernel headers
in it, nothing of ours; host network, so it reaches the loopback server)
runs tests/packaging/apt_from_sources.sh: its own Debian sources removed,
the .sources file copied in, a wrongly keyed copy refused first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gdrkit import containers
from gdrkit.packaging import build, pipeline
from gdrkit.publish import repo
from gdrkit.publish.model import Target
from gdrkit.publish.serve import serve
from gdrkit.stage.packages import checked_packages
from gdrkit.system import ensure_debian_packages
from pkgkit import faults, scenarios
from test_publish_repos import make_key

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1 while the test runs; (directory, URL)."""
    directory = tmp_path / "repo"
    directory.mkdir()
    with serve(directory) as url:
        yield directory, url


def test_apt_installs_gdrcopy_from_the_published_sources_file(tmp_path: Path, served: tuple[Path, str]) -> None:
    out, url = served
    ensure_debian_packages(["reprepro", "gnupg"])
    dist = tmp_path / "dist"
    plan = pipeline.plan_request(faults.deb_request(dist))
    built = checked_packages(plan)
    wanted = [p for p in sorted(built) if build.package_name(p) in scenarios.DKMS_SET]
    signer = make_key(tmp_path / "gnupg")
    inputs = {Target("deb", scenarios.SUITE): [repo.read_package(p) for p in wanted]}
    repo.publish(out, inputs, signer, url)

    other = make_key(tmp_path / "other-gnupg", "someone-else@invalid")
    sources = tmp_path / "sources"
    sources.mkdir()
    published = out / "apt" / f"gdrcopy-{scenarios.SUITE}.sources"
    (sources / "gdrcopy.sources").write_text(published.read_text())
    (sources / "wrong-key.sources").write_text(repo.sources_file(url, scenarios.SUITE, other.public_key()))

    kernel = scenarios.bookworm_kernels()[0]
    image = containers.ensure_image(faults.fault_recipe(kernel))
    command = faults.script_command(
        "apt_from_sources.sh",
        "/sources/gdrcopy.sources",
        "/sources/wrong-key.sources",
        plan.jobs[0].plan.full_version,
        kernel,
    )
    with containers.engine() as engine:
        result, _ = engine.run(
            image,
            command,
            mounts={faults.SCRIPTS: "/faults", sources: "/sources"},
            read_only=True,
            network=True,
            stream=False,
            timeout_s=1200,
        )
    checks = [line for line in result.output.splitlines() if line.startswith(("CHECK:", "FAILED:", faults.PASSED_MARK))]
    print("\n" + "\n".join(checks))
    assert result.status == 0 and faults.PASSED_MARK in result.output, result.output[-6000:]
