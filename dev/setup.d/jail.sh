# The jail for untrusted contract code (envh.jail): Debian bubblewrap for user/pid/net/mount
# namespaces, and google-re2 (a core dependency) for linear-time regular expressions.
# Sourced by dev/setup.sh with $PY set and the repository root as working directory.

envh_jail_setup() {
  if ! command -v bwrap >/dev/null 2>&1; then
    echo "jail.sh: installing bubblewrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 || {
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null || return 1
    }
  fi
  "$PY" -c "import re2" 2>/dev/null || "$PY" -m pip install -q "google-re2>=1.1" || return 1
  # namespaces must work here (as root in a container they do; some kernels forbid them)
  bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib \
    --symlink usr/lib64 /lib64 --symlink usr/bin /bin -- /usr/bin/true || {
      echo "jail.sh: bubblewrap is installed but cannot create namespaces on this machine" >&2
      return 1
    }
}

envh_jail_setup || return 1
