"""What every executor shares: the protocol, the worker configuration (secrets
scrubbing, resource limits, plugins), and the retry rule for attempts that died with
their worker.

An executor's ``run(requests)`` yields trajectories as episodes finish, in any order:
one final trajectory per request, preceded by a non-final ``infra_error`` trajectory for
each attempt lost to a crashed or hung worker (retried up to ``retries`` times).
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import resource
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import attrs

from ... import errors
from ...hostpaths import fixed_part, marked_untrusted
from ..runner import infra_failure, next_attempt
from ..trajectory import EpisodeRequest, Trajectory

SECRET_PATTERNS = (
    # by what the name says, wherever it says it (``API_KEY``, ``PGPASSWORD``, ``SECRET_KEY``);
    # ``*TOKEN`` and ``*_TOKEN_*``, not ``*TOKEN*``: TOKENIZERS_PARALLELISM is not a secret
    "*API_KEY*", "*APIKEY*", "*TOKEN", "*_TOKEN_*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_PWD", "*_PASS",
    "*ACCESS_KEY*", "*PRIVATE_KEY*", "*_KEY", "*CREDENTIAL*", "*_PAT", "*_DSN", "DATABASE_URL", "*_DATABASE_URL",
    "*CONNECTION_STRING*", "KUBECONFIG", "DOCKER_AUTH_CONFIG",
    "AWS_*", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_*", "GCLOUD_*", "GCP_*",
    "CLOUDSDK_*", "AZURE_*", "ARM_CLIENT_SECRET", "ARM_ACCESS_KEY", "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "NETRC", "SSH_AUTH_SOCK",
)


class Executor(Protocol):
    """Runs episodes somewhere; ``workers`` episodes at once."""

    workers: int

    def run(self, requests: Iterable[EpisodeRequest]) -> Iterator[Trajectory]:
        """Yield trajectories as episodes finish (attempts lost to infrastructure too)."""

    def close(self) -> None:
        """Stop workers and release resources. Idempotent."""


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def scrub_environ(environ: Mapping[str, str], pass_env: Iterable[str] | bool = ()) -> dict[str, str]:
    """A copy of ``environ`` without secrets. ``pass_env=True`` keeps everything (the
    user opted in); a list of names keeps just those (e.g. ``OPENAI_API_KEY`` for an
    LLM policy running in the worker)."""
    if pass_env is True:
        return dict(environ)
    keep = set(pass_env or ())
    return {k: v for k, v in environ.items() if k in keep or not is_secret(k)}


@attrs.frozen(kw_only=True)
class WorkerConfig:
    """How to set up an episode worker. ``memory_mb`` caps the private writable memory
    (``RLIMIT_DATA``: heap and anonymous mappings), not the address space, so runtimes that
    reserve large address ranges they never touch (Chromium's V8, JVMs, CUDA) still start.
    It is a per-process limit: each process the worker starts (each Chromium renderer)
    inherits the whole cap, so a worker's process tree is not bounded in sum (bound that
    with a memory cgroup or a container limit around the run);
    ``cpu_s`` is a CPU-time budget per episode (an episode over it ends as a timeout);
    ``plugins`` are importable modules registered besides (or instead of) entry points."""

    memory_mb: int | None = None
    cpu_s: float | None = None
    plugins: tuple[str, ...] = ()
    entry_points: bool = True


def worker_config(options: Mapping[str, Any]) -> WorkerConfig:
    return WorkerConfig(memory_mb=options.get("memory_mb"), cpu_s=options.get("cpu_s"),
                        plugins=tuple(options.get("plugins") or ()),
                        entry_points=bool(options.get("entry_points", True)))


def apply_memory_limit(config: WorkerConfig) -> None:
    """Cap this process's private writable memory (soft and hard: the episode cannot raise
    it). ``RLIMIT_AS`` would count reservations: Chromium reserves hundreds of GiB for V8
    and dies silently at launch under a smaller address-space cap."""
    if config.memory_mb:
        limit = int(config.memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def arm_cpu_budget(config: WorkerConfig) -> None:
    """Allow ``cpu_s`` more CPU seconds from now (warm workers accumulate CPU time)."""
    if not config.cpu_s:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + config.cpu_s) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def make_worker_registry(config: WorkerConfig) -> Any:
    """The registry of a worker: entry points (unless disabled) plus ``plugins``."""
    from ...plugins import make_plugin_manager, set_registry

    modules = [importlib.import_module(name) for name in config.plugins]
    reg = make_plugin_manager(entry_points=config.entry_points, plugins=modules)
    set_registry(reg)
    return reg


def as_played(request: EpisodeRequest, timeout_s: float | None) -> EpisodeRequest:
    """``request`` as an executor plays it: with the executor's time limit where it has
    none, and with the host paths this process grants (``envh.hostpaths.grants``), which
    a worker of its own does not know otherwise."""
    from ...hostpaths import grants

    changes: dict[str, Any] = {}
    if request.timeout_s is None and timeout_s:
        changes["timeout_s"] = float(timeout_s)
    if (granted := grants(request.data)) != request.data:
        changes["data"] = granted
    return attrs.evolve(request, **changes) if changes else request


def lost_attempt(request: EpisodeRequest, message: str, retries: int, worker: str = "",
                 detail: str | None = None) -> tuple[Trajectory, EpisodeRequest | None]:
    """The infra-error trajectory of an attempt lost with its worker, and the retry to
    schedule (``None`` once ``retries`` retries were spent: that trajectory is final).
    ``detail`` is what the worker last wrote (its traceback, when it had one)."""
    final = request.attempt >= retries
    record = infra_failure(request, message, final=final, worker=worker, detail=detail)
    return record, None if final else next_attempt(request)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is unresponsive"
    if returncode < 0:
        import signal

        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def worker_user(user: str | int | None) -> tuple[int, int] | None:
    """The (uid, gid) workers run as. ``"auto"``: ``nobody`` when this process is root
    (so a worker cannot read the parent's ``/proc/<pid>/environ`` or root's files), else
    unchanged; ``None`` or ``"root"`` with a root parent: unchanged; a name or uid: that user."""
    import pwd

    if user is None or user == "":
        return None
    if user == "auto":
        if os.geteuid() != 0:
            return None
        user = "nobody"
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(str(user))
    except KeyError as exc:
        raise errors.EnvhError(f"Unknown worker user {user!r}: choose an existing user (e.g. nobody) or "
                               "'auto'.") from exc
    if entry.pw_uid == os.geteuid():
        return None
    if os.geteuid() != 0:
        raise errors.EnvhError(f"Workers can run as {entry.pw_name!r} only when envh runs as root.")
    return entry.pw_uid, entry.pw_gid


def prepare_work_dir(path: str, owner: tuple[int, int] | None) -> str:
    """The workers' own directory (their cwd, HOME and TMPDIR), owned by the worker user
    and closed to everyone else."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if owner is not None:
        os.chown(path, *owner)
    os.chmod(path, 0o700)
    return path


def spec_bridges(spec: Any) -> set[str]:
    """Every bridge a spec's data names: its own and its chain legs', at any depth."""
    found: set[str] = set()
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("bridge"), str):
                found.add(value["bridge"])
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def bridge_host_access(requests: Iterable[EpisodeRequest], registry: Any = None) -> frozenset[str]:
    """What the requests' bridges and policies declare they must reach (``host_access``)."""
    from ...plugins import get_registry

    names: set[str] = set()
    seen: set[str] = set()
    requests_seen = list(requests)
    for request in requests_seen:
        if request.spec_id not in seen:
            seen.add(request.spec_id)
            names |= spec_bridges(request.spec)
    access: set[str] = set()
    for name in names:
        try:
            info = (registry or get_registry()).bridge(name)
        except Exception:  # noqa: BLE001 - an unknown bridge fails in the worker, with its cause
            continue
        access.update(getattr(info, "host_access", ()))
    from ..warm import parse_policy_spec

    for policy in {r.policy for r in requests_seen}:
        try:
            info = (registry or get_registry()).policy(parse_policy_spec(policy)[0])
        except Exception:  # noqa: BLE001 - an unknown policy fails in the worker, with its cause
            continue
        access.update(getattr(info, "host_access", ()))
    return frozenset(access)


def _bridge_configs(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """(bridge name, its config) for a spec's data and every chain leg in it."""
    found: list[tuple[str, dict[str, Any]]] = []
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("bridge"), str):
                config = value.get("config")
                found.append((value["bridge"], config if isinstance(config, dict) else {}))
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def _untrusted(request: EpisodeRequest) -> bool:
    """Whether a request's spec is untrusted: the planner did not trust it (the default), or
    part of its data is marked ``trust: untrusted``."""
    return request.trust != "trusted" or marked_untrusted(request.spec)


def _carries_code(spec: Any) -> bool:
    """Whether a spec's data holds code that runs when it is built: contract ``code`` or
    ``cls``, a curriculum's coach policy."""
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("kind") == "contract" or value.get("type") == "coach":
                return True
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _layers(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """(kind, layer) for every component layer in a spec's data, chain legs' too."""
    found: list[tuple[str, dict[str, Any]]] = []
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            layers = value.get("layers")
            for layer in layers if isinstance(layers, list) else []:
                if isinstance(layer, dict) and isinstance(layer.get("kind"), str):
                    found.append((layer["kind"], layer))
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def expand_declaration(entry: str, values: Mapping[str, Any],
                       environ: Mapping[str, str] | None = None) -> tuple[str | None, bool, str | None]:
    """One ``data_paths`` entry → (path or ``None``, writable, variable to give the worker)."""
    environ = os.environ if environ is None else environ
    writable = entry.startswith("rw:")
    entry = entry[3:] if writable else entry
    if entry.startswith("{") and entry.endswith("}"):
        value = values.get(entry[1:-1])
        if isinstance(value, str):
            value = fixed_part(value)  # a pattern (WebArena's config_files): what it matches is under it
        return (value if isinstance(value, str) and value else None), writable, None
    name, eq, default = entry.partition("=")
    if eq and name and name.replace("_", "").isalnum() and not name[0].isdigit():
        value = environ.get(name) or default
        return (os.path.expanduser(value) if value else None), writable, name
    return os.path.expanduser(entry), writable, None


def declared_data(requests: Iterable[EpisodeRequest], registry: Any = None,
                  work_dir: str | None = None) -> tuple[frozenset[tuple[str, bool, bool]], dict[str, str]]:
    """What the requests' bridges, components and policies declare they read (``data_paths``):
    the (real path, writable, as-own) triples to give the workers, checked
    (``isolation.check_data_path`` raises ``EnvhError`` for one that would undo the fence),
    and the variables naming them. A path an untrusted spec names in its config, outside the
    host paths its caller granted (``request.data``), comes read-only and not as the worker's
    own: a ``nobody`` worker reads there only what anyone may (else any root-only file outside
    the refused places would be one config key away)."""
    from ...hostpaths import is_granted
    from ...plugins import get_registry
    from ..warm import parse_policy_spec
    from .isolation import check_data_path

    reg = registry or get_registry()
    paths: set[tuple[str, bool, bool]] = set()
    env: dict[str, str] = {}
    seen: set[Any] = set()

    def add(entries: Iterable[str], values: Mapping[str, Any], trusted: bool = True,
            granted: tuple[str, ...] = ()) -> None:
        for entry in entries:
            path, writable, name = expand_declaration(str(entry), values)
            # env and plugin paths are the host's; a spec's are its own where trusted or granted
            own = (trusted or not str(entry).removeprefix("rw:").startswith("{")
                   or (path is not None and is_granted(path, granted)))
            writable = writable and own
            if path and writable and os.path.isabs(path) and not os.path.lexists(path):
                path = os.path.dirname(path)  # a file the env will create: its directory, checked the same
            real = check_data_path(path, work_dir) if path else None
            if real is None:
                continue
            paths.add((real, writable, own))
            if name:
                env[name] = real

    def declare(what: str, name: str, options: Mapping[str, Any], find: Any, trusted: bool = True,
                granted: tuple[str, ...] = ()) -> None:
        marker = (what, name, repr(sorted(options.items(), key=lambda kv: str(kv[0]))), trusted, granted)
        if marker in seen:
            return
        seen.add(marker)
        try:
            info = find(name)
        except Exception:  # noqa: BLE001 - an unknown name fails in the worker, with its cause
            return
        add(getattr(info, "data_paths", ()), options, trusted, granted)

    for request in requests:
        # config-named data is the worker's own where the caller trusted the spec or granted the path:
        # a run of one's own spec on root-only data (the usual case as root) takes --data, not --trust-code
        trusted = not _untrusted(request)
        for bridge, config in _bridge_configs(request.spec):
            declare("bridge", bridge, config, reg.bridge, trusted, request.data)
        for kind, layer in _layers(request.spec):
            declare("layer", kind, layer, reg.component_kind, trusted, request.data)
        try:
            name, arg = parse_policy_spec(request.policy)
        except Exception:  # noqa: BLE001 - a malformed policy fails in the worker, with its cause
            continue
        declare("policy", name, {**request.policy_options, "arg": arg}, reg.policy)
    return frozenset(paths), env


def policy_env_names(requests: Iterable[EpisodeRequest], registry: Any = None) -> set[str]:
    """Variables the requests' policies name (``api_key_env``, given or by default): the
    only secrets a worker receives besides ``pass_env``."""
    import inspect

    from ..warm import parse_policy_spec

    names: set[str] = set()
    seen: set[str] = set()
    for request in requests:
        options = request.policy_options
        if isinstance(options.get("api_key_env"), str):
            names.add(options["api_key_env"])
            continue
        if request.policy in seen:
            continue
        seen.add(request.policy)
        try:
            from ...plugins import get_registry

            factory = (registry or get_registry()).policy(parse_policy_spec(request.policy)[0]).load()
            default = inspect.signature(factory).parameters.get("api_key_env")
        except Exception:  # noqa: BLE001 - an unknown policy fails in the worker, with its cause
            continue
        if default is not None and isinstance(default.default, str):
            names.add(default.default)
    return names


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))
