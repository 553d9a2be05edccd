import seq

# MuJoCo is imported where the benchmark is built, not at the file's top: `seq deploy` imports the file where
# MuJoCo need not be installed (the CLI's own environment) to read its declaration.

# A cart on a rail the policy drives to a target, and a ball dropped beside it: two moving bodies, one static.
XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.8 0.8 0.8 1"/>
    <body name="cart" pos="0 0 0.1">
      <joint name="rail" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" rgba="0.2 0.4 0.8 1"/>
    </body>
    <body name="ball" pos="0 0.5 1">
      <freejoint/>
      <geom type="sphere" size="0.05" rgba="0.9 0.2 0.2 1"/>
    </body>
  </worldbody>
</mujoco>
"""
TASKS = {"left": "drive the cart to the left mark", "right": "drive the cart to the right mark"}


@seq.benchmark(
    name="mujoco-bench",
    gpu="cpu",
    tasks=TASKS,
    seeds=range(2),
    max_seconds=3.0,
    replay=seq.Replay(engine="mujoco", state="sim"),
)
class MujocoBench:
    def __init__(self):
        global mujoco
        import mujoco

        self.model = mujoco.MjModel.from_xml_string(XML)
        self.data = mujoco.MjData(self.model)

    def sim(self):
        return self.model, self.data

    @seq.reset
    def reset(self, task, seed):
        mujoco.mj_resetData(self.model, self.data)
        self.target = {"left": -0.5, "right": 0.5}[task]
        self.data.qpos[0] = 0.01 * seed
        mujoco.mj_forward(self.model, self.data)  # the poses of the reset, as the contract asks
        return {"x": float(self.data.qpos[0]), "target": self.target}

    @seq.step
    def step(self, action):
        self.data.qpos[0] += float(action[0])
        mujoco.mj_step(self.model, self.data)
        x = float(self.data.qpos[0])
        reached = abs(x - self.target) < 0.05
        return {"x": x, "target": self.target}, reached, reached
