"""The browser view of the README: `bringup serve` on the live simulated deployment, photographed by Chromium.

    python screenshots/make_browser_screenshot.py     # writes screenshots/browser.png (needs chromium, playwright)

Real parts throughout: the simulated SGLang server as processes, `bringup serve` (textual-serve) as a subprocess,
Debian's Chromium driven by Playwright, the deployment started by the CLI. Takes about half a minute.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.helpers.browser import CHROMIUM, Screen, chromium, env, serve  # noqa: E402
from tests.helpers.simdeploy import write_config  # noqa: E402


def bringup(cfg: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], check=True, env=env(),
                   cwd=cfg.parent, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


def ready_for(text: str) -> float:
    """Seconds the lifecycle panel says the deployment has been ready (0 before)."""
    m = re.search(r"READY\s.*?\n.*?for (\d+(?:\.\d+)?)s", text)
    return float(m[1]) if m else 0.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = write_config(Path(tmp), time_scale=0.3)
        try:
            with serve(cfg, "sim") as served, chromium(CHROMIUM) as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 820})
                screen = Screen(page)
                page.goto(served.url)
                screen.wait_text("STOPPED")
                bringup(cfg, "start", "sim", "--no-wait")
                # ready long enough for the throughput chart to have a history
                screen.wait_for("ready for 20 s", lambda t: ready_for(t) >= 20, timeout=180)
                page.screenshot(path=str(HERE / "browser.png"))
                print("wrote browser.png")
                page.close()
        finally:
            subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), "stop", "sim"], env=env(),
                           cwd=cfg.parent, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
