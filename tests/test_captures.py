"""A deployment's captured episodes read at a glance (its page's table) from the files its workers write:
counted by their lines' heads, how each ended read from its last line, one still being written counted as
far as it is whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yardstick.core.captures import Captures


def test_episodes_are_summed_up_newest_first_with_how_each_ended(tmp_path: Path) -> None:
    captures = Captures(tmp_path)
    frame = np.zeros((64, 64, 3), dtype=np.uint8)
    ended = captures.episode(7, 101, "first")
    for step in range(3):
        ended.write("observe", 10.0 + step, step=step, observation={"image": frame, "note": '"kind":"act"'})
        ended.write("act", 10.5 + step, step=step + 1, outputs=np.ones((1, 8), dtype=np.float32))
    ended.write("end", 13.0, acts=3)
    broken = captures.episode(7, 102, "second")
    broken.write("observe", 20.0, step=0, observation={"image": frame})
    broken.write("act", 20.5, step=1, outputs=[[0.0]])
    captures.broke(7, 102, "its worker did not answer the gateway's look")
    playing = captures.episode(7, 102, "third")
    playing.write("observe", 30.0, step=0, observation={"image": frame})
    with playing.path.open("a", encoding="utf-8") as half:  # a line its worker is writing now
        half.write('{"episode_id":"third","kind":"end","ts":31.0')

    summaries = captures.summaries(7)
    assert [s.episode_id for s in summaries] == ["third", "second", "first"]
    third, second, first = summaries
    assert (first.observations, first.acts, first.ended, first.why) == (3, 3, "end", None)
    assert (first.began, first.last, first.worker_id) == (10.0, 13.0, 101)
    assert (second.observations, second.acts, second.ended) == (1, 1, "broke")
    assert second.why == "its worker did not answer the gateway's look"
    assert (third.observations, third.ended) == (1, None)
    assert captures.summaries(8) == []
