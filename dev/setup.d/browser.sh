# Headless Chromium for envh-webarena: sourced by dev/setup.sh with $PY (the venv's
# python) set and the repository root as the working directory. Idempotent and quick
# once done:
#   1. apt-get install chromium (Debian's build; Playwright drives it through
#      executable_path=/usr/bin/chromium, since Playwright's own browser download is
#      unreachable here: never run `playwright install`);
#   2. pip install -e plugins/envh-webarena, which pulls playwright, miniwob (all
#      MiniWoB++ task pages ship inside its wheel), bm25s and rapidfuzz.
# BrowserGym is not installed: browsergym-core pins playwright==1.44 and lxml<6 and pulls
# mcp[cli]; the plugin drives Playwright itself (see plugins/envh-webarena/README.md).

envh_browser_setup() {
  local py="${PY:-python3}"
  if [ ! -x /usr/bin/chromium ]; then
    echo "browser.sh: apt-get install chromium"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || {
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null || return 1
    }
  fi
  if "$py" -c "import playwright.sync_api, miniwob, bm25s, rapidfuzz, envh_webarena" >/dev/null 2>&1; then
    return 0
  fi
  local targets=(-e plugins/envh-webarena)
  "$py" -c "import envh" >/dev/null 2>&1 || targets=(-e core "${targets[@]}")
  echo "browser.sh: pip install ${targets[*]}"
  "$py" -m pip install -q "${targets[@]}" || return 1
  "$py" -c "import playwright.sync_api, miniwob, bm25s, rapidfuzz" || return 1
}

envh_browser_setup || { echo "browser.sh: setup failed" >&2; return 1 2>/dev/null || exit 1; }
