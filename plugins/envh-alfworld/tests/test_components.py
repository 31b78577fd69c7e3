"""ALFWorld under envh components: stage, contract, chain, budgets and the designer templates,
all on the real engine through ``envh.make`` specs."""

from __future__ import annotations

import envh
import pytest
from envh import Action, errors
from envh_alfworld import templates


def do(command: str) -> Action:
    return Action(tool="do", args={"command": command})


def spec(games_root, *layers, **config):
    return {"bridge": "alfworld", "config": {"data_path": str(games_root), **config}, "layers": list(layers)}


def initial_state(games_root, task):
    with envh.make(spec(games_root)) as env:
        env.reset(task=task, seed=0)
        return env.get_env_state()


def search_then_place(env, kind: str, target: str) -> bool:
    """A searcher that uses only what it observes: visit each receptacle, open closed ones,
    take the first ``kind`` it sees, then put it on ``target``. True when it won."""
    state = env.get_env_state()
    for place in state["room_receptacles"]:
        state = env.get_env_state()
        if state["location"] != place:
            env.step(do(f"go to {place}"))
        if env.get_env_state()["belief"]["receptacles"][place]["open"] is False:
            env.step(do(f"open {place}"))
        seen = env.get_env_state()["belief"]["receptacles"][place]["contents"] or []
        found = [o for o in seen if o.rsplit(" ", 1)[0] == kind]
        if found:
            env.step(do(f"take {found[0]} from {place}"))
            env.step(do(f"go to {target}"))
            resp = env.step(do(f"put {found[0]} on {target}"))  # the alias of 'move ... to ...'
            return bool(resp.terminated and env.evaluate().success)
    return False


def test_stage_hides_the_mug_in_a_drawer(games_root, built):
    game = built["pick_and_place_simple"]
    stage = templates.hide_target_in_closed_receptacle(initial_state(games_root, game.task), receptacle="drawer 2")
    with envh.make(spec(games_root, stage)) as env:
        first = env.reset(task=game.task, seed=0)
        state = env.get_env_state()
        assert state["world"]["objects"]["mug 1"] == "drawer 2" and "drawer 2" in state["world"]["closed"]
        assert state["steps"] == 0, "the replay is not charged to the policy"
        assert first.info["stage"][0]["replayed"] == len(stage["actions"])
        for command in game.walkthrough:  # the expert plan no longer works
            env.step(do(command))
        assert env.evaluate().success is False
        env.reset(task=game.task, seed=0)
        assert search_then_place(env, "mug", "desk 1")
        assert env.evaluate().success is True


def test_precompleted_subgoal_shortens_the_task(games_root, built):
    game = built["pick_heat_then_place_in_recep"]
    stage = templates.precomplete_subgoal(initial_state(games_root, game.task))
    with envh.make(spec(games_root, stage)) as env:
        env.reset(task=game.task, seed=0)
        state = env.get_env_state()
        assert state["world"]["object_states"]["potato 1"] == ["hot"]
        assert state["world"]["objects"]["potato 1"] == "countertop 1"
        for command in ("go to countertop 1", "take potato 1 from countertop 1", "go to diningtable 1",
                        "move potato 1 to diningtable 1"):
            resp = env.step(do(command))
        assert resp.terminated and env.evaluate().success


def test_contract_truncates_the_room_description(games_root, built):
    game = built["pick_and_place_simple"]
    with envh.make(spec(games_root, templates.truncate_room_description(2))) as env, \
            envh.make(spec(games_root)) as bare:
        full = bare.reset(task=game.task).observation.text
        short = env.reset(task=game.task).observation.text
        assert "desk 1" in full and "desk 1" not in short
        assert short.startswith("-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room.")
        assert short.endswith("Your task is to: put a mug in desk.")
        step = env.step(do("go to countertop 1"))
        assert step == attrs_evolve_info(bare.step(do("go to countertop 1")), step.info), \
            "later observations pass unchanged"
        assert env.evaluate() == bare.evaluate()


def test_contract_truncates_every_game_text(games_root, built):
    game = built["pick_and_place_simple"]
    with envh.make(spec(games_root, templates.truncate_observation(2))) as env, \
            envh.make(spec(games_root)) as bare:
        env.reset(task=game.task)
        bare.reset(task=game.task)
        for command in ("go to drawer 1", "open drawer 1"):
            full = bare.step(do(command)).observation.text
            short = env.step(do(command))
        assert "pen 1" in full and "pen 1" not in short.observation.text
        assert short.observation.text.startswith("Your task is to: ")
        assert short.info["envh"][-1]["observation"] is True
        assert "pen 1" in env.step(do("examine drawer 1")).observation.text, "examine still reveals it"


def attrs_evolve_info(resp, info):
    import attrs

    return attrs.evolve(resp, info=info)


def test_contract_blocks_teleporting(games_root, built):
    game = built["pick_and_place_simple"]
    with envh.make(spec(games_root, templates.block_unvisited_goto())) as env:
        env.reset(task=game.task)
        order = env.get_env_state()["room_receptacles"]
        blocked = env.step(do(f"go to {order[2]}"))
        assert blocked.info["error"]["type"] == "blocked" and order[0] in blocked.observation.text
        assert not env.step(do(f"go to {order[0]}")).info.get("error")
        assert not env.step(do(f"go to {order[1]}")).info.get("error")
        assert not env.step(do(f"go to {order[0]}")).info.get("error"), "visited places stay reachable"


def test_chain_of_two_games_needs_both(games_root, built):
    first, second = built["pick_and_place_simple"], built["pick_cool_then_place_in_recep"]
    leg = {"bridge": "alfworld", "config": {"data_path": str(games_root)}}
    chained = spec(games_root, {"kind": "chain", "legs": [leg], "leg_tasks": [
        {"suite": "alfworld", "split": "train", "instance_id": second.task.instance_id}]})
    with envh.make(chained) as env:
        env.reset(task=first.task, seed=0)
        for command in first.walkthrough:
            resp = env.step(do(command))
        assert not resp.terminated and env.evaluate().success is False, "one leg is not enough"
        assert "tomato" in resp.observation.text, "the second game started"
        for command in second.walkthrough:
            resp = env.step(do(command))
        assert resp.terminated and env.evaluate().success is True
        legs = env.evaluate().metrics["legs"]
        assert [leg["success"] for leg in legs] == [True, True]


def test_replay_does_not_trip_the_repetition_guard(games_root, built):
    """The replay's repeated observations and steps are forgotten once the replay is over:
    without the rewind, the policy's first 'look' would be the third identical one."""
    game = built["pick_and_place_simple"]
    stage = {"kind": "stage", "actions": [{"tool": "do", "args": {"command": "look"}}] * 2}
    with envh.make(spec(games_root, stage, max_repeats=3, max_steps=3)) as env:
        env.reset(task=game.task, seed=0)
        state = env.get_env_state()
        assert (state["repeats"], state["steps"]) == (0, 0)
        flags = [env.step(do("look")).truncated for _ in range(2)]
        assert flags == [False, True], "the guard still works after the replay"
    with envh.make(spec(games_root, max_repeats=3)) as env:
        env.reset(task=game.task, seed=0)
        assert [env.step(do("look")).truncated for _ in range(3)] == [False, False, True]
    with envh.make(spec(games_root, stage, max_steps=3)) as env:
        env.reset(task=game.task, seed=0)
        assert [env.step(do("inventory")).truncated for _ in range(3)] == [False, False, True]


def test_step_budget_truncates_and_ends_the_episode(games_root, built):
    game = built["pick_and_place_simple"]
    with envh.make(spec(games_root, max_steps=3)) as env:
        env.reset(task=game.task, seed=0)
        flags = [env.step(do("inventory")).truncated for _ in range(3)]
        assert flags == [False, False, True]
        after = env.step(do("look"))
        assert after.info["error"]["type"] == "episode_over"
        assert env.evaluate().success is False


def test_inadmissible_commands_are_data_not_crashes(games_root, built, make_env):
    env = make_env()
    env.reset(task=built["pick_and_place_simple"].task)
    resp = env.step(do("fly to the moon"))
    assert resp.info["error"]["type"] == "inadmissible_command"
    assert "Nothing happens." in resp.observation.text and not resp.terminated
    assert "go to desk 1" in resp.info["error"]["message"]


def test_stage_with_a_bad_command_is_a_replay_error(games_root, built):
    bad = {"kind": "stage", "actions": [{"tool": "do", "args": {"command": "take unicorn 1 from desk 1"}}]}
    with envh.make(spec(games_root, bad)) as env, pytest.raises(errors.ReplayError):
        env.reset(task=built["pick_and_place_simple"].task)


def test_a_replay_longer_than_the_bridge_budget_is_not_truncated(games_root, built):
    """Budgets pause between notify_replay_start and notify_replay_complete, so a stage
    may replay more steps than the policy will be allowed."""
    game = built["pick_and_place_simple"]
    stage = {"kind": "stage", "actions": [{"tool": "do", "args": {"command": "look"}}] * 4}
    with envh.make(spec(games_root, stage, max_repeats=3, max_steps=3)) as env:
        env.reset(task=game.task, seed=0)
        assert (env.get_env_state()["steps"], env.get_env_state()["repeats"]) == (0, 0)
        assert [env.step(do("inventory")).truncated for _ in range(3)] == [False, False, True]


@pytest.mark.parametrize("make_stage", [
    lambda state: templates.hide_target_in_closed_receptacle(state, receptacle="drawer 2"),
    lambda state: templates.precomplete_subgoal(state, subgoal="take"),
])
def test_stage_templates_keep_the_room_description(games_root, built, make_stage):
    """A stage changes the world, not what the policy is first told: the room list and
    the task stay in the first observation, exactly as without the stage."""
    game = built["pick_and_place_simple"]
    stage = make_stage(initial_state(games_root, game.task))
    with envh.make(spec(games_root, stage)) as env, envh.make(spec(games_root)) as bare:
        staged = env.reset(task=game.task, seed=0).observation.text
        plain = bare.reset(task=game.task, seed=0).observation.text
        assert "Looking quickly around you, you see" in staged and "drawer 2" in staged
        assert staged == plain


@pytest.mark.parametrize(("mode", "show_admissible"), [("reset", False), ("reset", True), ("last", True)])
def test_observe_after_a_stage_is_what_the_policy_is_shown(games_root, built, mode, show_admissible):
    """After a stage's replay the bridge's observe() is exactly what the policy was shown,
    in either observation mode: under ``reset`` the room and the task, with the commands
    admissible after the replay (before, the first observation listed those of before it);
    under ``last`` the replay's last answer (before, observe() gave the room instead). It
    stays so after from_state, and the next action ends it."""
    game = built["pick_and_place_simple"]
    stage = {**templates.hide_target_in_closed_receptacle(initial_state(games_root, game.task),
                                                          receptacle="drawer 2"), "observation": mode}
    with envh.make(spec(games_root, stage, show_admissible=show_admissible)) as env:
        first = env.reset(task=game.task, seed=0).observation
        base = env.unwrapped.observe()
        assert base == first and env.observe() == first
        if mode == "reset":
            assert "Looking quickly around you, you see" in base.text and "You close" not in base.text
        else:  # the replay's last answer (the template walks back to where the episode began)
            assert "Looking quickly around you" not in base.text and "You arrive at" in base.text
        assert base.data["admissible_commands"] == list(env.unwrapped.engine.admissible)  # after the replay
        if show_admissible:
            assert base.text.endswith("Admissible commands: " + ", ".join(env.unwrapped.engine.admissible))
        saved = env.save_state()
        nxt = env.step(do("look"))
        assert env.unwrapped.observe() == nxt.observation != first  # the next action ends it
    with envh.make(spec(games_root, stage, show_admissible=show_admissible)) as restored:
        assert restored.from_state(saved) == first
        assert restored.unwrapped.observe() == first
        assert restored.get_env_state()["world"]["objects"]["mug 1"] == "drawer 2"


def test_replayed_facts_do_not_reach_the_belief(games_root, built):
    """After the hide stage the belief knows only what the policy saw (the room list): it
    has not visited the hiding place, does not know the mug is there, and the teleport
    contract still refuses going straight to it."""
    game = built["pick_and_place_simple"]
    stage = templates.hide_target_in_closed_receptacle(initial_state(games_root, game.task), receptacle="drawer 2")
    with envh.make(spec(games_root, stage, templates.block_unvisited_goto())) as env:
        env.reset(task=game.task, seed=0)
        state = env.get_env_state()
        assert state["world"]["objects"]["mug 1"] == "drawer 2", "the world did change"
        known = state["belief"]["receptacles"]
        assert not any(r["visited"] for r in known.values())
        assert all(r["contents"] is None for r in known.values())
        assert state["location"] is None and state["holding"] is None
        blocked = env.step(do("go to drawer 2"))
        assert blocked.info["error"]["type"] == "blocked"
    take = templates.precomplete_subgoal(initial_state(games_root, game.task), subgoal="take")
    with envh.make(spec(games_root, take)) as env:
        env.reset(task=game.task, seed=0)
        assert env.get_env_state()["holding"] == "mug 1", "what it holds, it can feel"


MUG_TO_DRAWER = {"name": "pick_and_place_simple-Mug-None-Drawer-envh/test", "task_type": "pick_and_place_simple",
                 "object": "Mug", "receptacle": "Drawer",
                 "receptacles": {"CounterTop 1": {}, "Drawer 1": {"closed": True}, "Drawer 2": {"closed": True},
                                 "Cabinet 1": {"closed": True}, "Shelf 1": {}},
                 "objects": {"Mug 1": "CounterTop 1", "Book 1": "Shelf 1"}}


@pytest.fixture(scope="module")
def mug_root(tmp_path_factory, games_root):
    """A data root of its own: a game built into the session's shared root would change the
    task counts other tests check. Granted to the specs the tests build."""
    from envh.hostpaths import granted

    root = tmp_path_factory.mktemp("alfworld-mug")
    with granted(root):
        yield root


@pytest.fixture(scope="module")
def mug_to_drawer(mug_root):
    from envh_alfworld.builder import build_games
    from envh_alfworld.rooms import room_from_dict

    (game,) = build_games([room_from_dict(MUG_TO_DRAWER)], mug_root)
    return game


def test_hide_target_never_uses_the_goal_receptacle(mug_root, mug_to_drawer):
    """Hiding the mug in a drawer when the goal is 'put a mug in drawer' finishes the game during
    the replay (a ReplayError at reset): the goal's receptacles are no hiding place, neither
    for the template's own choice nor among the designer's magnitudes."""
    from envh_alfworld.design import HideTarget

    state = initial_state(mug_root, mug_to_drawer.task)
    assert sorted(templates.target_receptacles(state)) == ["drawer 1", "drawer 2"]
    assert templates.hiding_places(state) == ["cabinet 1"]
    for drawer in ("drawer 1", "drawer 2"):
        with pytest.raises(ValueError, match="goal's target"):
            templates.hide_target_in_closed_receptacle(state, receptacle=drawer)
    with envh.make(spec(mug_root)) as env:
        env.reset(task=mug_to_drawer.task, seed=0)
        assert HideTarget().magnitudes(env, mug_to_drawer.task) == ["cabinet 1"]
    stage = templates.hide_target_in_closed_receptacle(state)
    with envh.make(spec(mug_root, stage)) as env:
        env.reset(task=mug_to_drawer.task, seed=0)
        assert env.get_env_state()["world"]["objects"]["mug 1"] == "cabinet 1"
        assert env.evaluate().success is False
