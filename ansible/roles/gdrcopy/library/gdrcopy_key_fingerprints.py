#!/usr/bin/python
# SPDX-License-Identifier: MIT
"""Ansible module: the OpenPGP fingerprints of the primary keys in a key file.

Reads an ASCII-armored or binary public key file on the managed host and
returns the fingerprint of each primary key in it (v4: SHA-1, v5/v6:
SHA-256, upper-case hex), so the role can compare the repository's key with
the one the operator trusts without needing gpg on the host.
"""

from __future__ import annotations

import base64
import hashlib

DOCUMENTATION = r"""
module: gdrcopy_key_fingerprints
short_description: OpenPGP fingerprints of the primary keys in a public key file
options:
  path:
    description: The key file (ASCII-armored or binary).
    type: path
    required: true
"""

PUBLIC_KEY_TAG = 6


def dearmor(data: bytes) -> bytes:
    """The binary packets of an ASCII-armored block, or `data` itself when it is not armored."""
    text = data.decode("ascii", errors="replace")
    if "-----BEGIN PGP" not in text:
        return data
    lines = text.replace("\r", "").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP"))
    body: list[str] = []
    in_headers = True
    for line in lines[start + 1 :]:
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if not line.strip():
                in_headers = False
            elif ":" not in line:
                in_headers = False  # no header block at all
                body.append(line.strip())
            continue
        if line.startswith("="):
            continue  # the CRC-24 line
        body.append(line.strip())
    return base64.b64decode("".join(body))


def packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each OpenPGP packet; ValueError on a malformed stream."""
    out = []
    pos = 0
    while pos < len(data):
        first = data[pos]
        pos += 1
        if not first & 0x80:
            raise ValueError(f"not an OpenPGP packet at byte {pos - 1}")
        if first & 0x40:  # new format
            tag = first & 0x3F
            o1 = data[pos]
            if o1 < 192:
                length, pos = o1, pos + 1
            elif o1 < 224:
                length, pos = ((o1 - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif o1 == 255:
                length, pos = int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
            else:
                raise ValueError("partial body lengths do not occur in key files")
        else:  # old format
            tag = (first >> 2) & 0x0F
            size = {0: 1, 1: 2, 2: 4}.get(first & 3)
            if size is None:
                raise ValueError("indeterminate packet lengths do not occur in key files")
            length, pos = int.from_bytes(data[pos : pos + size], "big"), pos + size
        if pos + length > len(data):
            raise ValueError("truncated packet")
        out.append((tag, data[pos : pos + length]))
        pos += length
    return out


def fingerprint(body: bytes) -> str:
    """The fingerprint of a public-key packet body (RFC 4880 12.2, RFC 9580 5.5.4)."""
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError(f"OpenPGP key version {version} is not supported")


def key_fingerprints(data: bytes) -> list[str]:
    """The fingerprints of the primary keys in a key file's contents."""
    return [fingerprint(body) for tag, body in packets(dearmor(data)) if tag == PUBLIC_KEY_TAG]


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    path = module.params["path"]
    try:
        with open(path, "rb") as f:
            found = key_fingerprints(f.read())
    except (OSError, ValueError, IndexError) as e:
        module.fail_json(msg=f"cannot read the OpenPGP key in {path}: {e}")
    if not found:
        module.fail_json(msg=f"{path} holds no OpenPGP public key")
    module.exit_json(changed=False, fingerprints=found)


if __name__ == "__main__":
    main()
