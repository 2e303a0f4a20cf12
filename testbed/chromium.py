"""Chromium and its WebDriver (Debian's ``chromium`` and ``chromium-driver``) for the web console's browser
tests.

``python testbed/chromium.py STAMP`` (the Makefile's step before ``make test``) installs both with
``apt-get`` when ``/usr/bin/chromium`` is missing — non-interactively, through ``sudo -n`` unless run as
root — and touches STAMP once both are there. Where they cannot be installed it warns and exits 0:
``browser_unavailable()`` then names what is missing and the browser tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PACKAGES = ("chromium", "chromium-driver")


def browser_unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when Chromium and its driver are installed."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        return (f"{' and '.join(missing)} not installed (Debian's {' and '.join(PACKAGES)}; `make test` installs "
                f"them with apt-get where it can)")
    return None


@contextlib.contextmanager
def headless_chromium(profile_dir: str, page_load_timeout_s: float = 30) -> Iterator:
    """Headless Chromium under Selenium (a ``webdriver.Chrome``) with a fresh profile in ``profile_dir``, quit
    when the block ends. The flags keep it off the network but for the pages it is sent to."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000", f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(page_load_timeout_s)
    try:
        yield driver
    finally:
        driver.quit()


def install() -> None:
    """``apt-get install`` the packages; ``RuntimeError`` saying why not."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in ([*sudo, "apt-get", "update", "-q"],
                    [*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]):
        try:
            subprocess.run(command, check=True, capture_output=True, env=env, timeout=1200)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            raise RuntimeError(f"{' '.join(command)} failed: {exc} "
                               f"{detail.decode(errors='replace').strip()[-500:]}") from None


if __name__ == "__main__":
    stamp = sys.argv[1] if len(sys.argv) > 1 else None
    if browser_unavailable() is not None:
        try:
            install()
        except RuntimeError as exc:
            # Not fatal: the browser tests skip, naming this.
            print(f"warning: chromium not installed: {exc}", file=sys.stderr)
    reason = browser_unavailable()
    if reason is not None:
        print(f"warning: {reason}", file=sys.stderr)
        sys.exit(0)
    if stamp is not None:
        os.makedirs(os.path.dirname(stamp) or ".", exist_ok=True)
        open(stamp, "w").close()
