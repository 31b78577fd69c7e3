"""envh-webarena: WebArena, WebShop and MiniWoB++ bridges in a real headless Chromium.

Importing the package is cheap: Playwright and the bridges load when a bridge is built.
"""

__version__ = "0.1.0"
