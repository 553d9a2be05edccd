"""LIBERO-10 as a benchmark of your own, on the platform's LIBERO (a Franka in robosuite, 20 Hz).

Start here to change what your policies are evaluated on: keep fewer tasks (edit TASKS), show the policy
other cameras or another image size (CAMERAS, IMAGE_SIZE), or wrap the observations and actions in your
own form (reset and step). `seq deploy .` registers it; `seq eval run <policy> --benchmark
libero-benchmark` plays it. Observations: `image.agentview` and `image.wrist` (uint8 H×W×3), `state`
(the arm's joints and gripper), `prompt` (the task's instruction); an action is 7 numbers (the end
effector's delta pose and the gripper), as LIBERO takes them.

LIBERO's simulator and renderer need more than a box's default 8 GiB on a Yardstick install: its operator
starts `yardstick server --box-memory 16` (the check fails with "passed its memory limit" otherwise).
"""

import seq

TASKS = {
    "lr2-alphabet-soup-tomato-sauce": "put both the alphabet soup and the tomato sauce in the basket",
    "lr2-cream-cheese-box-butter": "put both the cream cheese box and the butter in the basket",
    "k3-turn-on-stove-moka": "turn on the stove and put the moka pot on it",
    "k4-black-bowl-bottom-drawer": "put the black bowl in the bottom drawer of the cabinet and close it",
    "lr5-white-mug-left-plate": "put the white mug on the left plate and put the yellow and white mug on the right plate",
    "s1-book-back-compartment-caddy": "pick up the book and place it in the back compartment of the caddy",
    "lr6-white-mug-plate-chocolate": "put the white mug on the plate and put the chocolate pudding to the right of the plate",
    "lr1-alphabet-soup-cream-cheese": "put both the alphabet soup and the cream cheese box in the basket",
    "k8-moka-pots-stove": "put both moka pots on the stove",
    "k6-yellow-white-mug-microwave": "put the yellow and white mug in the microwave and close it",
}
CAMERAS = ("agentview", "wrist")
IMAGE_SIZE = 128


@seq.benchmark(name="libero-benchmark", gpu="cpu", tasks=TASKS, seeds=range(50), max_seconds=26.0)
class LiberoBenchmark:
    def __init__(self):
        # Imported here, where it runs: the platform has LIBERO installed, your machine need not.
        from yardstick.catalog.libero import Libero10

        self.suite = Libero10(cameras=CAMERAS, image_size=IMAGE_SIZE)

    @seq.reset
    def reset(self, task, seed):
        return self.suite.reset(task, seed)

    @seq.step
    def step(self, action):
        return self.suite.step(action)
