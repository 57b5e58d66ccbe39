"""docs/asset-graph.png: the Dagster UI's asset graph (``/asset-groups``, every group of the code location),
taken with headless Chromium (Debian's ``chromium``, as ``tests/e2e/test_ui.py``) from ``dg dev`` on a fresh run
history and data root; about 3 minutes on 2 busy CPUs:

    .venv/bin/python benchmarks/asset_graph.py           # writes docs/asset-graph.png

The browser test writes the same file after its own "Materialize all" run (``ENVSIM_UPDATE_DOCS=1``)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.ui_server import DagsterServer  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Chromium on loopback only, without its background traffic (docs: tests/e2e/test_ui.py)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]


def screenshot(url: str, out: Path) -> None:
    """The asset graph at ``url`` as ``out``, once its "Materialize all" button shows (the graph has loaded)."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="chromium-profile-"),
            executable_path=CHROMIUM,
            headless=True,
            viewport={"width": 1600, "height": 1000},
            args=CHROMIUM_ARGS,
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/asset-groups", wait_until="domcontentloaded")
            expect(page.get_by_role("button", name="Materialize all")).to_be_visible(timeout=120_000)
            page.wait_for_timeout(3000)  # the layout settles
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "asset-graph.png")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="asset-graph-") as tmp:
        server = DagsterServer(Path(tmp) / "dagster_home", Path(tmp) / "data", Path(tmp) / "dagster.log")
        try:
            screenshot(server.start(timeout=600).url, args.out)
        finally:
            server.stop()
    print(f"asset graph -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
