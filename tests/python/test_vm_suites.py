"""Which suite and kernel ABI a --kernel argument means (apt faked)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from gdrkit.system import UserError
from gdrkit.vm import suites
from gdrkit.vm.suites import SUITES, AptQuery, Suite

DEPENDS_TRIXIE = """\
linux-image-amd64
  Depends: linux-image-6.12.57+deb13-amd64
"""

# What each fake suite's apt knows: metapackage target and exact packages.
ARCHIVE = {
    "bullseye": ("5.10.0-35-amd64", {"linux-image-5.10.0-35-amd64", "linux-headers-5.10.0-35-amd64"}),
    "bookworm": ("6.1.0-41-amd64", {"linux-image-6.1.0-41-amd64", "linux-headers-6.1.0-41-amd64",
                                    "linux-image-6.12.48+deb12-amd64", "linux-headers-6.12.48+deb12-amd64"}),
    "trixie": ("6.12.57+deb13-amd64", {"linux-image-6.12.57+deb13-amd64", "linux-headers-6.12.57+deb13-amd64",
                                       "linux-image-6.12.50+deb13-amd64"}),
    "sid": ("6.17.8-amd64", {"linux-image-6.17.8-amd64", "linux-headers-6.17.8-amd64"}),
}  # fmt: skip


class FakeApt:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, suite: Suite) -> AptQuery:
        current, packages = ARCHIVE[suite.name]

        def query(args: Sequence[str]) -> tuple[int, str]:
            self.asked.append((suite.name, args[-1]))
            if args[0] == "pkgnames":
                return 0, "\n".join(p.replace("linux-image-", "linux-headers-") for p in sorted(packages)) + "\n"
            if args[0] == "depends":
                return 0, f"linux-image-amd64\n  Depends: linux-image-{current}\n  Depends: apparmor\n"
            if args[-1] in packages:
                return 0, f"Package: {args[-1]}\nVersion: 1\n"
            return 100, ""

        return query


@pytest.mark.parametrize("name", ["bullseye", "bookworm", "trixie", "sid", "Trixie"])
def test_suite_names_resolve_to_their_current_kernel(name: str) -> None:
    choice = suites.resolve_kernel(name, lists_for=FakeApt())
    assert choice.suite.name == name.lower()
    assert choice.abi == ARCHIVE[name.lower()][0]
    assert choice.image_package == f"linux-image-{choice.abi}"
    assert choice.headers_package == f"linux-headers-{choice.abi}"


def test_current_abi_parses_apt_cache_depends() -> None:
    assert suites.current_abi(lambda args: (0, DEPENDS_TRIXIE)) == "6.12.57+deb13-amd64"
    assert suites.current_abi(lambda args: (100, "")) is None


@pytest.mark.parametrize(
    ("spec", "suite", "abi"),
    [
        ("6.12.57+deb13-amd64", "trixie", "6.12.57+deb13-amd64"),
        ("6.12.57+deb13", "trixie", "6.12.57+deb13-amd64"),
        ("linux-image-5.10.0-35-amd64", "bullseye", "5.10.0-35-amd64"),
        ("6.12.48+deb12-amd64", "bookworm", "6.12.48+deb12-amd64"),  # a backports kernel
        ("6.17.8-amd64", "sid", "6.17.8-amd64"),
    ],
)
def test_versions_find_their_suite(spec: str, suite: str, abi: str) -> None:
    choice = suites.resolve_kernel(spec, lists_for=FakeApt())
    assert (choice.suite.name, choice.abi) == (suite, abi)


def test_the_likely_suite_is_asked_first() -> None:
    fake = FakeApt()
    suites.resolve_kernel("6.12.57+deb13-amd64", lists_for=fake)
    assert {name for name, _ in fake.asked} == {"trixie"}


def test_image_without_headers_is_not_enough() -> None:
    with pytest.raises(UserError, match="linux-headers-6.12.50"):
        suites.resolve_kernel("6.12.50+deb13-amd64", lists_for=FakeApt())


def test_unknown_version_offers_what_the_suite_has() -> None:
    with pytest.raises(UserError) as info:
        suites.resolve_kernel("6.1.0-1-amd64", lists_for=FakeApt())
    assert info.value.hint and "bookworm has 6.1.0-41-amd64" in info.value.hint


def test_unknown_series_says_what_to_do() -> None:
    with pytest.raises(UserError) as info:
        suites.resolve_kernel("4.19.0-1-amd64", lists_for=FakeApt())
    assert info.value.hint and "--kernel trixie" in info.value.hint


def test_similar_abis_keep_flavour_and_order() -> None:
    names = (
        "linux-headers-6.1.0-9-amd64 linux-headers-6.1.0-10-amd64 linux-headers-6.1.0-10-cloud-amd64 "
        "linux-headers-6.1.0-10-common linux-headers-6.12.1+deb12-amd64 linux-headers-amd64"
    )
    query = lambda args: (0, names.replace(" ", "\n"))  # noqa: E731
    assert suites.similar_abis(query, "6.1.0-3-amd64") == ["6.1.0-9-amd64", "6.1.0-10-amd64"]
    assert suites.similar_abis(query, "6.1.0-3-cloud-amd64") == ["6.1.0-10-cloud-amd64"]


def test_nonsense_is_rejected_before_asking_apt() -> None:
    fake = FakeApt()
    with pytest.raises(UserError, match="neither a Debian suite"):
        suites.resolve_kernel("buster-ish", lists_for=fake)
    assert fake.asked == []


def test_candidate_order() -> None:
    assert [s.name for s in suites.candidate_suites("6.1.0-41-amd64")][0] == "bookworm"
    assert [s.name for s in suites.candidate_suites("5.10.0-35-amd64")][0] == "bullseye"
    assert [s.name for s in suites.candidate_suites("6.18.1+deb14-amd64")][0] == "sid"
    assert sorted(s.name for s in suites.candidate_suites("7.0-amd64")) == sorted(SUITES)


def test_sources_lines() -> None:
    assert SUITES["sid"].sources_lines() == ["deb http://deb.debian.org/debian sid main"]
    trixie = SUITES["trixie"].sources_lines()
    assert "deb http://security.debian.org/debian-security trixie-security main" in trixie
    assert "deb http://deb.debian.org/debian trixie-updates main" in trixie
    assert not any("backports" in line for line in SUITES["bullseye"].sources_lines())


def test_private_apt_options_never_name_the_host_sources(tmp_path: Path) -> None:
    options = suites.AptLists(SUITES["trixie"], tmp_path).options()
    assert f"-oDir::Etc::SourceList={tmp_path}/trixie/sources.list" in options
    assert "-oDir::Etc::SourceParts=/dev/null" in options
    assert f"-oDir::State::Lists={tmp_path}/trixie/lists" in options
    assert any(o.startswith("-oDir::Cache=") for o in options)
    assert f"-oDir::State::status={tmp_path}/trixie/dpkg-status" in options, "the host's installed packages stay out"


def test_lists_are_refreshed_once_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def fake_run(argv: Sequence[str], **kwargs: object) -> Done:
        calls.append(list(argv))
        return Done()

    monkeypatch.setattr(suites, "run", fake_run)
    lists = suites.AptLists(SUITES["sid"], tmp_path)
    lists.update()
    lists.update()
    assert len(calls) == 1 and calls[0][:3] == ["apt-get", "-q", "update"]
    # contrib and non-free too: NVIDIA's real driver packages live there.
    assert (tmp_path / "sid/sources.list").read_text() == "deb http://deb.debian.org/debian sid main contrib non-free\n"
    assert (tmp_path / "sid/dpkg-status").read_text() == ""
    lists.update(force=True)
    assert len(calls) == 2
    # Lists fetched for other sources are not fresh, however recent.
    (tmp_path / "sid/sources.list").write_text("deb http://deb.debian.org/debian sid main\n")
    lists.update()
    assert len(calls) == 3


def test_failed_update_names_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Failed:
        returncode, stdout, stderr = 100, "", "E: The repository ... does not have a Release file."

    monkeypatch.setattr(suites, "run", lambda argv, **kwargs: Failed())
    with pytest.raises(UserError, match="apt-get update for sid failed"):
        suites.AptLists(SUITES["sid"], tmp_path).update()


def test_stale_lists_are_used_when_the_mirror_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Result:
        def __init__(self, code: int) -> None:
            self.returncode, self.stdout, self.stderr = code, "", "E: Could not resolve 'deb.debian.org'"

    codes = iter([0, 100])
    monkeypatch.setattr(suites, "run", lambda argv, **kwargs: Result(next(codes)))
    lists = suites.AptLists(SUITES["trixie"], tmp_path)
    lists.update()
    lists.update(force=True)  # fails, but lists from before exist: no error
