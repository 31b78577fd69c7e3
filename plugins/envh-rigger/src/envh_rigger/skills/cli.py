"""``envh skills induce`` and ``envh skills show``: build a bank from a run, inspect it."""

from __future__ import annotations

import json

import click

# kept in step with build.CHOICES and embed.DEFAULT_EMBEDDER (not imported: numpy stays unloaded)
CHOICES = ("all", "baseline", "accepted")
DEFAULT_EMBEDDER = "minilm"

_endpoint = [
    click.option("--base-url", default=None, envvar="ENVH_SKILLS_BASE_URL",
                 help="OpenAI-compatible endpoint for llm:MODEL and openai:MODEL."),
    click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
                 help="Environment variable that holds the endpoint's API key."),
    click.option("--embedder", default=DEFAULT_EMBEDDER, show_default=True,
                 help="minilm (offline) | openai:MODEL"),
]


def endpoint_options(fn):  # type: ignore[no-untyped-def]
    for option in reversed(_endpoint):
        fn = option(fn)
    return fn


@click.group("skills")
def skills_group() -> None:
    """Skills (memory items) induced from episodes, retrieved into policy prompts."""


@skills_group.command("induce")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out", default=None, help="Bank directory. Default: DIRECTORY/skills.")
@click.option("--inducer", default="rule", show_default=True, help="rule | llm:MODEL")
@click.option("--from", "which", type=click.Choice(CHOICES), default="all", show_default=True,
              help="Which episodes: all, the static env's (baseline) or the accepted reshaped envs'.")
@click.option("--append", is_flag=True, help="Grow an existing bank instead of rebuilding it.")
@click.option("--merge-threshold", type=float, default=None,
              help="Cosine similarity at which two items merge (default 0.9).")
@endpoint_options
def induce_cmd(directory: str, out: str | None, inducer: str, which: str, append: bool,
               merge_threshold: float | None, base_url: str | None, api_key_env: str,
               embedder: str) -> None:
    """Induce memory items from the episodes in DIRECTORY (a run's --out) into a bank."""
    from .bank import DEFAULT_MERGE_THRESHOLD
    from .build import build_bank
    from .embed import make_embedder
    from .induce import make_inducer

    endpoint = {"base_url": base_url, "api_key_env": api_key_env}
    summary = build_bank(
        directory, out or f"{directory.rstrip('/')}/skills", which=which, append=append,
        inducer=make_inducer(inducer, **endpoint), embedder=make_embedder(embedder, **endpoint),
        merge_threshold=DEFAULT_MERGE_THRESHOLD if merge_threshold is None else merge_threshold,
        echo=click.echo)
    click.echo(f"{summary['induced']} item(s) induced, {summary['added']} added, "
               f"{summary['merged']} merged into near-duplicates; bank {summary['bank']} "
               f"holds {summary['size']}")


@skills_group.command("show")
@click.argument("bank", type=click.Path(exists=True, file_okay=False))
@click.option("--query", default=None, help="Show the items retrieved for this text (MMR).")
@click.option("-k", "k", default=3, show_default=True, help="Items to retrieve with --query.")
@click.option("--block", is_flag=True, help="Print the skills block a policy would receive.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@endpoint_options
def show_cmd(bank: str, query: str | None, k: int, block: bool, as_json: bool,
             base_url: str | None, api_key_env: str, embedder: str) -> None:
    """List the items of BANK, or those retrieved for --query."""
    from .bank import SkillBank
    from .embed import make_embedder
    from .records import item_to_data
    from .retrieval import Retrieved, render_skills_block, retrieve

    loaded = SkillBank.load(bank)
    if query is None:
        shown = [Retrieved(item=it, score=float("nan")) for it in loaded.items]
    else:
        if embedder == DEFAULT_EMBEDDER and not loaded.embedder_name.startswith("minilm"):
            embedder = loaded.embedder_name  # query with the embedder the bank was built with
        emb = make_embedder(embedder, base_url=base_url, api_key_env=api_key_env)
        shown = retrieve(loaded, query, emb, k=k)
    if block:
        click.echo(render_skills_block(shown))
        return
    if as_json:
        click.echo(json.dumps([{**item_to_data(r.item), "id": r.item.item_id,
                                "score": None if query is None else round(r.score, 4)} for r in shown],
                              indent=2, ensure_ascii=False))
        return
    click.echo(f"{len(loaded)} item(s), embedder {loaded.embedder_name}"
               + (f"; top {len(shown)} for {query!r}" if query is not None else ""))
    for n, r in enumerate(shown, start=1):
        sources = sorted({f"{p.source}/{p.method}" for p in r.item.provenance})
        score = "" if query is None else f"  (similarity {r.score:.2f})"
        click.echo(f"\n{n}. {r.item.title}{score}\n   when: {r.item.when_to_use}\n   {r.item.content}\n"
                   f"   support {r.item.support} from {', '.join(sources) or '-'}  id {r.item.item_id}")
