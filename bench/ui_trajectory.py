"""How long a trajectory page of ``envh ui`` takes to open in Chromium, by episode length.

Episodes as the runner records them (``plugins/envh-ui/tests/ui_long_episodes.py``: every step a
model turn, a sliding context window) of 50 and of 5,000 steps, plus a 200-turn chat whose
every turn resends the whole history, are written to a real trajectory store; the app is
served by uvicorn on loopback and each page opened in the system Chromium (Playwright):
the time from navigation until the first step is visible (the first open, and the best of
``--repeats``), and the page's HTML bytes.

Last line: one JSON object whose ``ratio`` is the 5,000-step page's first open time ÷ the
50-step page's (1.0: a page's cost does not grow with the episode).

    python bench/ui_trajectory.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "plugins" / "envh-ui" / "tests"))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def _serve(app):  # type: ignore[no-untyped-def]
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, sock.getsockname()[1]


def _open(page, url: str, repeats: int) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """Seconds to the first step visible: the first open (the server reads the episode)
    and the best of ``repeats`` (it keeps the last two read); the HTML bytes."""
    times, size = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        response = page.goto(url)
        page.locator("#steps tr.step").first.wait_for(state="visible")
        times.append(time.perf_counter() - start)
        size = len(response.body())
    return times[0], min(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from envh_ui.app import create_app
    from playwright import sync_api
    from ui_long_episodes import episode, write

    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), [episode(50, window=4, key="short"), episode(5000, window=4, key="long"),
                          episode(200, key="chat")])
        app = create_app([tmp], token="bench")
        server, port = _serve(app)
        base = f"http://{app.state.name}:{port}"
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.goto(f"{base}/?token=bench")
            figures = {name: _open(page, f"{base}/traj/0/{seq}", args.repeats)
                       for name, seq in (("steps_50", 1), ("steps_5000", 2), ("chat_200", 3))}
            browser.close()
        server.should_exit = True
    for name, (first, best, size) in figures.items():
        print(f"{name:>11}: opens in {first * 1000:7.1f} ms first, {best * 1000:7.1f} ms again, "
              f"{size / 1000:8.1f} KB of HTML")
    print(json.dumps({"ratio": round(figures["steps_5000"][0] / figures["steps_50"][0], 3),
                      **{f"{name}_first_s": round(f, 4) for name, (f, _, _) in figures.items()},
                      **{f"{name}_again_s": round(b, 4) for name, (_, b, _) in figures.items()},
                      **{f"{name}_bytes": n for name, (_, _, n) in figures.items()}}))


if __name__ == "__main__":
    main()
