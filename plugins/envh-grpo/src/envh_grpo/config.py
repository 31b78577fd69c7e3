"""The trainer's configuration: one YAML file, checked before any work starts.

Unknown keys fail with their path (``$.optim.lrr``); impossible combinations (groups that
do not split over the processes, a prompt and response longer than the model's context,
a group of one) fail with what to change. ``embedded()`` is the CPU default of
``envh train``: SmolLM2-135M on Toy24, a few small steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NewType

import attrs
import cattrs
import envh
from envh import errors

from .rewards import RewardConfig

CONFIG_DIR = Path(__file__).parent / "configs"

#: A key that is on, off or decided at run time: ``auto``, ``true`` or ``false``. A YAML
#: boolean (``true``, ``false``, ``yes``, ``no``) and the strings are both accepted, in a
#: config file and in ``--set``; the value is kept as one of the three lowercase strings.
TriState = NewType("TriState", str)
TRI_STATES = ("auto", "true", "false")
AUTO, TRUE, FALSE = (TriState(v) for v in TRI_STATES)


def tri_state(value: Any, _type: Any = None) -> TriState:
    """``True``/``False``/``"auto"``/``"true"``/``"false"`` as a ``TriState``; anything else
    is refused with the allowed values (cattrs adds the key's path)."""
    if isinstance(value, bool):
        return TRUE if value else FALSE
    if isinstance(value, str) and value.strip().lower() in TRI_STATES:
        return TriState(value.strip().lower())
    raise ValueError(f"{value!r} is not a valid value: choose auto, true or false (a YAML boolean or the string)")


@attrs.frozen(kw_only=True)
class EnvSource:
    """Where training episodes come from: an env spec (a bridge name, a spec file or a
    mapping) or a harness pool folder (``pool/specs/*.json``), with a sampling weight and
    the tasks (a split, or explicit instance ids)."""

    spec: Any = "toy24"
    pool: str | None = None
    weight: float = 1.0
    split: str | None = None
    tasks: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class EvalConfig:
    """Held-out evaluation with the same runner: every ``every`` steps (0: never). Each
    evaluation writes one row per episode to ``output_dir/eval/step-N.jsonl``; ``seed``
    fixes the held-out episodes' reset seeds apart from the training seed, so runs with
    different seeds are evaluated on the same episodes (paired comparisons)."""

    every: int = 0
    envs: tuple[EnvSource, ...] = ()
    episodes: int = 4
    temperature: float = 0.0
    seed: int | None = None  # reset seeds of the held-out episodes; None: the run's seed


@attrs.frozen(kw_only=True)
class OptimConfig:
    lr: float = 1e-6
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    grad_clip: float = 1.0


@attrs.frozen(kw_only=True)
class LossConfig:
    """The GRPO objective (see ``envh_grpo.loss`` and ``envh_grpo.advantages``)."""

    epsilon: float = 0.2
    epsilon_high: float | None = None
    kl_coef: float = 0.0
    baseline: str = "std"
    credit: str = "trajectory"
    gamma: float = 1.0
    aggregation: str = "token"
    #: cap C of the truncated importance-sampling weight min(exp(logπ_old − logπ_vllm), C) that
    #: corrects vLLM's sampling mismatch (TRL's default cap); used with the vLLM engine only
    #: (transformers samples from the training model itself); null turns it off
    tis_cap: float | None = 3.0


@attrs.frozen(kw_only=True)
class DeepSpeedConfig:
    """``enabled``: ``auto`` uses DeepSpeed when launched with several processes or on GPU
    (one GPU included: a single process sets up its own one-process group). ``bf16``:
    DeepSpeed's bf16 mode, which must agree with the weights' dtype (``weights_dtype``):
    ``auto`` follows it, ``true`` loads the weights in bfloat16, ``false`` in float32."""

    enabled: TriState = AUTO
    zero_stage: int = 2
    offload_optimizer: bool = False
    offload_params: bool = False
    gradient_checkpointing: bool = False
    bf16: TriState = AUTO


@attrs.frozen(kw_only=True)
class VLLMConfig:
    gpu_memory_utilization: float = 0.5
    enforce_eager: bool = True
    tensor_parallel: int = 1


@attrs.frozen(kw_only=True)
class RolloutConfig:
    """Where episodes run. ``executor: null`` plays them in this process in lock step; an
    envh executor name (``pool``, ``ray``) steps the envs in its workers while this process
    generates every live episode's turn in one batch (``remote.py``); the episodes are the
    same either way. ``options`` go to the executor (e.g. ``isolation``, ``memory_mb``);
    ``host`` is where the generation server listens (loopback; a Ray cluster across nodes
    needs an address its workers can reach, still guarded by per-episode tokens)."""

    executor: str | None = None
    workers: int | None = None
    options: dict[str, Any] = attrs.field(factory=dict)
    linger_s: float = 0.05
    host: str = "127.0.0.1"


@attrs.frozen(kw_only=True)
class LogConfig:
    jsonl: bool = True
    tensorboard: TriState = AUTO
    wandb: TriState = AUTO
    wandb_project: str = "envh-grpo"
    progress: bool = True


@attrs.frozen(kw_only=True)
class TrainConfig:
    """Everything a run needs. Batch sizes count episodes (a group is G episodes);
    ``nproc`` is the processes (GPUs) per node the launcher starts, ``threads`` torch's
    CPU threads per process."""

    model: str = "smollm2"
    engine: str = "auto"
    envs: tuple[EnvSource, ...] = (EnvSource(),)
    eval: EvalConfig = EvalConfig()
    group_size: int = 4
    groups_per_step: int = 2
    steps: int = 3
    max_turns: int = 4
    history: int | None = None
    max_prompt_tokens: int = 512
    max_response_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ("</action>",)
    ppo_mini_batch: int | None = None  # episodes per optimizer step; None or >= the step's: one
    ppo_epochs: int = 1
    micro_batch: int = 4
    logprob_micro_batch: int = 4
    loss: LossConfig = LossConfig()
    reward: RewardConfig = RewardConfig()
    optim: OptimConfig = OptimConfig()
    deepspeed: DeepSpeedConfig = DeepSpeedConfig()
    vllm: VLLMConfig = VLLMConfig()
    rollout: RolloutConfig = RolloutConfig()
    log: LogConfig = LogConfig()
    nproc: int = 1
    threads: int | None = None
    seed: int = 0
    output_dir: str = "runs/grpo"
    save_every: int = 0
    dtype: str = "auto"

    @property
    def episodes_per_step(self) -> int:
        return self.group_size * self.groups_per_step


_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(TriState, tri_state)


def from_data(data: dict[str, Any]) -> TrainConfig:
    """A config from plain data; unknown keys and wrong types name their path."""
    if not isinstance(data, dict):
        raise errors.SpecError(f"A training config must be a mapping, got {type(data).__name__}")
    try:
        return _converter.structure(data, TrainConfig)
    except Exception as exc:  # noqa: BLE001 - cattrs' grouped errors become one message with paths
        problems = cattrs.transform_error(exc, path="$", format_exception=_describe) \
            if isinstance(exc, cattrs.BaseValidationError) else [repr(exc)]
        raise errors.SpecError("Invalid training config: " + "; ".join(problems), problems) from exc


def _describe(exc: BaseException, type_: Any) -> str:
    """cattrs' wording, or a record's own validation message (``reward.t_max must be > 0``)."""
    from cattrs.v import format_exception

    if type(exc) is ValueError and str(exc):
        return str(exc)
    return format_exception(exc, type_)


def to_data(config: TrainConfig) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(config)
    return json.loads(json.dumps(data))


def load(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a YAML/JSON config (``None``: the embedded default), apply dotted overrides."""
    import yaml

    if path is None:
        data: dict[str, Any] = {}
    else:
        p = Path(path)
        if not p.is_file() and (CONFIG_DIR / f"{path}.yaml").is_file():
            p = CONFIG_DIR / f"{path}.yaml"
        if not p.is_file():
            shipped = ", ".join(sorted(f.stem for f in CONFIG_DIR.glob("*.yaml")))
            raise errors.SpecError(f"Training config {str(path)!r} does not exist. Shipped configs: {shipped}")
        try:
            from envh.limits import load_yaml  # the bounds a spec is read with: specs are inside

            data = load_yaml(p.read_text(), str(p)) or {}
        except yaml.YAMLError as exc:
            raise errors.SpecError(f"Training config {p} is not valid YAML: {exc}") from exc
    for key, value in (overrides or {}).items():
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return from_data(data)


#: The weights' dtypes ``dtype`` may name (``auto``: see ``weights_dtype``).
DTYPES = ("auto", "float32", "bfloat16", "float16")


def weights_dtype(config: TrainConfig, *, cuda: bool) -> str:
    """The dtype the weights load in: ``dtype`` when set; with ``auto``, bfloat16 when
    ``deepspeed.bf16`` is true, float32 when it is false, else bfloat16 on GPU and float32
    on CPU."""
    if config.dtype != "auto":
        return config.dtype
    bf16 = config.deepspeed.bf16
    return "bfloat16" if bf16 == TRUE or (bf16 == AUTO and cuda) else "float32"


def deepspeed_bf16(config: TrainConfig, *, cuda: bool) -> bool:
    """DeepSpeed's bf16 mode: on exactly when the weights are bfloat16 (``check`` refuses a
    ``deepspeed.bf16`` that says otherwise), so fp32 master weights never hide behind bf16
    ones nor bf16 ones train without them."""
    return weights_dtype(config, cuda=cuda) == "bfloat16"


def model_context(config: TrainConfig, model_config: dict[str, Any] | None) -> int | None:
    if not model_config:
        return None
    value = model_config.get("max_position_embeddings")
    return int(value) if isinstance(value, int) else None


def check(config: TrainConfig, *, world_size: int = 1, model_config: dict[str, Any] | None = None) -> None:
    """Refuse impossible configs before any work, saying what to change."""
    from .advantages import BASELINES, CREDITS
    from .generation import ENGINES
    from .loss import AGGREGATIONS

    problems: list[str] = []
    c, lo = config, config.loss
    if c.group_size < 2:
        problems.append(f"group_size is {c.group_size}: GRPO compares rollouts within a group, use >= 2")
    if c.groups_per_step < 1 or c.steps < 1 or c.max_turns < 1:
        problems.append("groups_per_step, steps and max_turns must be >= 1")
    if world_size > 0 and c.groups_per_step % world_size:
        problems.append(f"groups_per_step={c.groups_per_step} does not split over {world_size} processes: "
                        f"the batch of {c.episodes_per_step} episodes must be a multiple of "
                        f"group_size x processes = {c.group_size * world_size}")
    if c.ppo_mini_batch is not None and c.ppo_mini_batch < c.episodes_per_step:
        if c.ppo_mini_batch < 1 or c.episodes_per_step % c.ppo_mini_batch:
            problems.append(f"ppo_mini_batch={c.ppo_mini_batch} must divide the {c.episodes_per_step} "
                            "episodes of a step")
        elif c.ppo_mini_batch % (c.micro_batch * world_size) and c.ppo_mini_batch >= c.micro_batch * world_size:
            problems.append(f"ppo_mini_batch={c.ppo_mini_batch} is not a multiple of micro_batch x processes "
                            f"= {c.micro_batch * world_size}")
        elif c.ppo_mini_batch < world_size:
            problems.append(f"ppo_mini_batch={c.ppo_mini_batch} is smaller than the {world_size} processes")
    if c.nproc < 1 or (c.threads is not None and c.threads < 1):
        problems.append("nproc and threads must be >= 1")
    if c.micro_batch < 1 or c.logprob_micro_batch < 1 or c.ppo_epochs < 1:
        problems.append("micro_batch, logprob_micro_batch and ppo_epochs must be >= 1")
    if c.max_prompt_tokens < 1 or c.max_response_tokens < 1:
        problems.append("max_prompt_tokens and max_response_tokens must be >= 1")
    if not c.temperature > 0:
        problems.append(f"temperature={c.temperature}: GRPO needs sampling (> 0), greedy rollouts of a group "
                        "are identical and carry no signal")
    if not 0 < c.top_p <= 1:
        problems.append(f"top_p={c.top_p} must be in (0, 1]")
    if c.history is not None and c.history < 0:
        problems.append(f"history={c.history} must be >= 0 (or null for the whole episode)")
    if c.engine not in ("auto", *ENGINES):
        problems.append(f"engine {c.engine!r}: choose one of auto, {', '.join(ENGINES)}")
    if lo.baseline not in BASELINES:
        problems.append(f"loss.baseline {lo.baseline!r}: choose one of {', '.join(BASELINES)}")
    if lo.credit not in CREDITS:
        problems.append(f"loss.credit {lo.credit!r}: choose one of {', '.join(CREDITS)}")
    if lo.aggregation not in AGGREGATIONS:
        problems.append(f"loss.aggregation {lo.aggregation!r}: choose one of {', '.join(AGGREGATIONS)}")
    if lo.epsilon < 0 or (lo.epsilon_high is not None and lo.epsilon_high < 0) or lo.kl_coef < 0:
        problems.append("loss.epsilon, loss.epsilon_high and loss.kl_coef must be >= 0")
    if lo.tis_cap is not None and not lo.tis_cap > 0:
        problems.append(f"loss.tis_cap={lo.tis_cap} must be > 0 (or null: no sampling correction)")
    if not c.optim.lr > 0:
        problems.append(f"optim.lr={c.optim.lr} must be > 0")
    ds = c.deepspeed
    if ds.zero_stage not in (0, 1, 2, 3):
        problems.append(f"deepspeed.zero_stage={ds.zero_stage}: choose 0, 1, 2 or 3")
    if ds.offload_params and ds.zero_stage != 3:
        problems.append("deepspeed.offload_params needs zero_stage 3")
    if ds.offload_optimizer and ds.zero_stage < 1:
        problems.append("deepspeed.offload_optimizer needs zero_stage >= 1")
    if c.dtype not in DTYPES:
        problems.append(f"dtype {c.dtype!r}: choose one of {', '.join(DTYPES)}")
    elif (ds.bf16 == TRUE and c.dtype not in ("auto", "bfloat16")) or (ds.bf16 == FALSE and c.dtype == "bfloat16"):
        problems.append(f"deepspeed.bf16 is {ds.bf16} but dtype is {c.dtype}: DeepSpeed's bf16 mode must match "
                        "the weights' dtype (leave one of them auto)")
    if not any(s.weight > 0 for s in c.envs):
        problems.append("envs: at least one source needs a weight > 0")
    context = model_context(c, model_config)
    if context is not None and c.max_prompt_tokens + c.max_response_tokens > context:
        problems.append(f"max_prompt_tokens + max_response_tokens = {c.max_prompt_tokens + c.max_response_tokens} "
                        f"exceeds the model's context of {context} tokens")
    vl = c.vllm
    if not 0 < vl.gpu_memory_utilization < 1:
        problems.append(f"vllm.gpu_memory_utilization={vl.gpu_memory_utilization} must be in (0, 1): the "
                        "training process shares the device")
    if vl.tensor_parallel < 1 or (vl.tensor_parallel > 1 and max(world_size, c.nproc) > 1):
        problems.append(f"vllm.tensor_parallel={vl.tensor_parallel} with {max(world_size, c.nproc)} processes: "
                        "each training process generates its own episodes with an engine on its own GPU "
                        "(tensor_parallel 1); a larger engine needs nproc 1")
    ro = c.rollout
    if ro.executor is not None:
        known = sorted(envh.get_registry().executors())
        if ro.executor not in known:
            problems.append(f"rollout.executor {ro.executor!r}: choose one of {', '.join(known)} (or null: "
                            "in this process)")
    if (ro.workers is not None and ro.workers < 1) or not ro.linger_s >= 0:
        problems.append("rollout.workers must be >= 1 and rollout.linger_s >= 0")
    if c.eval.every < 0 or (c.eval.every and c.eval.episodes < 1):
        problems.append("eval.every must be >= 0 and eval.episodes >= 1")
    if problems:
        raise errors.SpecError("Impossible training config: " + "; ".join(problems), problems)
