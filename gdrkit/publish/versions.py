"""Version ordering as dpkg (deb-version(7)) and rpm (rpmvercmp) define it.

Written from the two documented algorithms; pure functions, no tools run.
"""

from __future__ import annotations


def _deb_order(char: str) -> int:
    # dpkg's weight of a non-digit character: '~' before everything (even
    # the end of the string), letters before the other characters.
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _deb_part(a: str, b: str) -> int:
    """Compare an upstream version or a revision: non-digit runs by weight, digit runs as numbers."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            wa = _deb_order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            wb = _deb_order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if wa != wb:
                return -1 if wa < wb else 1
            i += 1
            j += 1
        start_a, start_b = i, j
        while i < len(a) and a[i].isdigit():
            i += 1
        while j < len(b) and b[j].isdigit():
            j += 1
        na = int(a[start_a:i] or "0")
        nb = int(b[start_b:j] or "0")
        if na != nb:
            return -1 if na < nb else 1
    return 0


def _deb_split(version: str) -> tuple[int, str, str]:
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "0", version
    if not epoch.isdigit():
        raise ValueError(f"bad epoch in Debian version {version!r}")
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    if not upstream or not upstream[0].isdigit():
        raise ValueError(f"Debian version {version!r} must start with a digit")
    return int(epoch), upstream, revision


def compare_deb(a: str, b: str) -> int:
    """-1, 0 or 1 as dpkg --compare-versions orders `a` and `b`."""
    ea, ua, ra = _deb_split(a)
    eb, ub, rb = _deb_split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _deb_part(ua, ub) or _deb_part(ra, rb)


def _rpm_segments(text: str) -> list[str]:
    """The segments rpmvercmp compares: digit runs, letter runs, '~' and '^' (separators dropped)."""
    segments: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in "~^":
            segments.append(char)
            i += 1
        elif char.isdigit() or (char.isascii() and char.isalpha()):
            same = str.isdigit if char.isdigit() else (lambda c: c.isascii() and c.isalpha())
            start = i
            while i < len(text) and same(text[i]):
                i += 1
            segments.append(text[start:i])
        else:
            i += 1
    return segments


def rpmvercmp(a: str, b: str) -> int:
    """-1, 0 or 1 as rpm orders two version (or release) strings."""
    if a == b:
        return 0
    sa, sb = _rpm_segments(a), _rpm_segments(b)
    for x, y in zip(sa, sb):
        if x == y:
            continue
        # '~' sorts before anything; '^' after the end of the other string
        # (below) but before any other segment: here, both sort first.
        if x in "~^" or y in "~^":
            return -1 if x in "~^" and (y not in "~^" or x == "~") else 1
        if x.isdigit() != y.isdigit():
            return 1 if x.isdigit() else -1  # a number is newer than letters
        if x.isdigit():
            if int(x) != int(y):
                return -1 if int(x) < int(y) else 1
            continue
        return -1 if x < y else 1
    if len(sa) == len(sb):
        return 0
    longer, sign = (sa, 1) if len(sa) > len(sb) else (sb, -1)
    rest = longer[min(len(sa), len(sb))]
    # What one has beyond the other makes it newer, unless it starts with '~' (a pre-release).
    return -sign if rest == "~" else sign


def compare_rpm(a: str, b: str) -> int:
    """Order two [epoch:]version-release strings as rpm does."""

    def split(evr: str) -> tuple[int, str, str]:
        epoch, colon, rest = evr.partition(":")
        if not colon:
            epoch, rest = "0", evr
        version, _, release = rest.rpartition("-") if "-" in rest else (rest, "", "")
        return int(epoch or "0"), version, release

    ea, va, ra = split(a)
    eb, vb, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return rpmvercmp(va, vb) or rpmvercmp(ra, rb)


def compare(kind: str, a: str, b: str) -> int:
    """Order two versions of packages of `kind` ("deb" or "rpm")."""
    if kind == "deb":
        return compare_deb(a, b)
    if kind == "rpm":
        return compare_rpm(a, b)
    raise ValueError(f"unknown package kind {kind!r}")
