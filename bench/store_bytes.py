"""Store bytes per step with and without token ids.

The local policy (SmolLM2-135M through transformers) plays Toy24 episodes through the
episode runner with full recording: every turn keeps its content-addressed request, the
completion, parsed calls, sampling, and the prompt and completion token ids with
per-token logprobs. The same trajectories are then written a second time with the token
ids and logprobs removed, each set into its own SQLite trajectory store, and the bytes
per step of each are compared (file bytes after a checkpoint, and the JSON rows alone).

Per-class figures: bytes per step for the turn record's parts (messages, token ids,
logprobs, the rest) and for the step's other fields. Last line: one JSON object whose
``ratio`` is bytes per step with token ids ÷ without.

    python bench/store_bytes.py [--episodes 4] [--max-steps 6]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import attrs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import envh
    from envh.bridges.toy24 import Toy24Env
    from envh.rollout.runner import run_episode
    from envh.rollout.store import TrajectoryStore
    from envh.rollout.trajectory import EpisodeRequest, token_ids, trajectory_to_json
    from envh.rollout.warm import Warm

    spec = {"bridge": "toy24", "layers": []}
    tasks = Toy24Env().list_tasks("medium")[: args.episodes]
    options = {"max_new_tokens": 24, "threads": 1, "temperature": 0.8}
    warm = Warm()
    t0 = time.perf_counter()
    played = [run_episode(EpisodeRequest(key=f"e{n}", spec=envh.spec_to_data(envh.parse_spec(spec)),
                                         spec_id=envh.spec_id(spec), task=task, seed=n, policy="local:smollm2",
                                         policy_options=options, max_steps=args.max_steps), warm)
              for n, task in enumerate(tasks)]
    warm.close()
    play_s = time.perf_counter() - t0
    failed = [t.error for t in played if t.error_class]
    if failed:
        sys.exit(f"episodes failed: {failed}")

    def strip(t):
        steps = tuple(attrs.evolve(s, turn=attrs.evolve(s.turn, prompt_token_ids=None, completion_token_ids=None,
                                                        logprobs=None)) if s.turn else s for s in t.steps)
        return attrs.evolve(t, steps=steps)

    steps = sum(len(t.steps) for t in played)
    figures = {}
    with tempfile.TemporaryDirectory(prefix="envh-store-bytes-") as tmp:
        for name, trajectories in (("with_ids", played), ("without_ids", [strip(t) for t in played])):
            folder = Path(tmp) / name
            with TrajectoryStore(folder) as store:
                for t in trajectories:
                    store.append(t)
                store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db = sqlite3.connect(folder / "trajectories.sqlite")
            data = sum(len(row[0].encode()) for row in db.execute("SELECT data FROM trajectories"))
            db.close()
            size = (folder / "trajectories.sqlite").stat().st_size
            figures[name] = {"file_bytes_per_step": round(size / steps), "json_bytes_per_step": round(data / steps)}

    parts = {"messages (request blobs + addresses)": 0, "prompt ids (after the shared prefix)": 0,
             "completion ids": 0, "logprobs": 0, "turn: other fields": 0, "step: other fields": 0}
    unshared = 0  # bytes the prompt ids would take stored whole every turn (the baseline layout)
    prompt_tokens = stored_tokens = 0
    for t in played:
        for s, ids in zip(t.steps, token_ids(t.steps), strict=True):
            whole = len(trajectory_to_json(attrs.evolve(t, steps=(s,))).encode())
            bare = len(trajectory_to_json(attrs.evolve(t, steps=(attrs.evolve(s, turn=None),))).encode())
            turn = s.turn
            sizes = {"messages (request blobs + addresses)": len(json.dumps([turn.blobs, turn.messages])),
                     "prompt ids (after the shared prefix)": len(json.dumps(turn.prompt_token_ids)),
                     "completion ids": len(json.dumps(turn.completion_token_ids)),
                     "logprobs": len(json.dumps(turn.logprobs))}
            for k, v in sizes.items():
                parts[k] += v
            parts["turn: other fields"] += whole - bare - sum(sizes.values())
            parts["step: other fields"] += bare - len(trajectory_to_json(attrs.evolve(t, steps=())).encode())
            unshared += len(json.dumps(ids[0]))
            prompt_tokens += len(ids[0])
            stored_tokens += len(turn.prompt_token_ids)
    print(f"{len(played)} episodes, {steps} steps of the local policy on Toy24 (medium), played in {play_s:.1f} s; "
          f"mean prompt {prompt_tokens / steps:.0f} tokens, {stored_tokens / steps:.0f} stored per step after the "
          "prefix shared with the previous turn")
    print("bytes per step by part of the record (JSON):")
    for k, v in parts.items():
        print(f"  {k:40s} {v / steps:10.0f}")
    print(f"  {'(prompt ids stored whole, for comparison)':40s} {unshared / steps:10.0f}")
    for name, f in figures.items():
        print(f"{name:12s} store file {f['file_bytes_per_step']:8d} B/step   JSON rows {f['json_bytes_per_step']:8d} B/step")
    ratio = figures["with_ids"]["file_bytes_per_step"] / figures["without_ids"]["file_bytes_per_step"]
    print(json.dumps({"ratio": round(ratio, 3), "steps": steps, **{f"{k}_{m}": v for k, f in figures.items()
                                                                   for m, v in f.items()},
                      "json_ratio": round(figures["with_ids"]["json_bytes_per_step"]
                                          / figures["without_ids"]["json_bytes_per_step"], 3)}))


if __name__ == "__main__":
    main()
