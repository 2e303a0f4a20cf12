"""kcat, librdkafka's command-line client, from Debian's packages, for the interop tests.

``python testbed/kcat.py DIR`` (the Makefile's ``.tools/kcat``) downloads the pinned packages with
``apt-get download`` and unpacks them into DIR with ``dpkg-deb -x``; nothing is installed on the
machine. ``kcat_command()`` is the command and environment that run it with its own librdkafka, or
None when it could not be fetched (the tests that need it then skip, saying so).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

#: Debian bookworm's kcat and the two libraries it needs beyond a base system.
PACKAGES = ("kcat=1.7.1-2", "librdkafka1=2.0.2-1", "libyajl2=2.1.0-3+deb12u2")
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".tools", "kcat")


def fetch(target: str) -> None:
    """Download and unpack ``PACKAGES`` into ``target``; ``RuntimeError`` saying why not."""
    with tempfile.TemporaryDirectory() as work:
        try:
            subprocess.run(["apt-get", "download", *PACKAGES], cwd=work, check=True, capture_output=True,
                           timeout=300)
            os.makedirs(target, exist_ok=True)
            for deb in sorted(glob.glob(os.path.join(work, "*.deb"))):
                subprocess.run(["dpkg-deb", "-x", deb, target], check=True, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            raise RuntimeError(f"kcat not fetched: {exc} {detail.decode(errors='replace').strip()}") from None


def kcat_command(directory: str = DEFAULT_DIR) -> tuple[list[str], dict[str, str]] | None:
    binary = os.path.join(directory, "usr", "bin", "kcat")
    if not os.access(binary, os.X_OK):
        return None
    libraries = glob.glob(os.path.join(directory, "usr", "lib", "*-linux-gnu"))  # Debian's multiarch dir
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [*libraries, os.environ.get(
        "LD_LIBRARY_PATH")])))
    return [binary], env


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    try:
        fetch(target)
    except RuntimeError as exc:
        # Not fatal: the kcat interop tests skip, naming this.
        print(f"warning: {exc}", file=sys.stderr)
        sys.exit(0)
    open(os.path.join(target, ".fetched"), "w").close()
