import seq

# mujoco-bench's cart and ball, with looks its model does not carry: the cart turns red from its second step
# on, and the ball is hidden from its third. `looks` says all of it at every frame; the replay keeps changes.
# `mistake` (an eval's --param benchmark.mistake=...) makes the looks method go wrong from the second step:
# "raise" raises, "shape" answers a list.
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
BLUE, RED = [0.2, 0.4, 0.8, 1.0], [1.0, 0.0, 0.0, 1.0]


@seq.benchmark(
    name="looks-bench",
    gpu="cpu",
    tasks=TASKS,
    seeds=range(2),
    max_seconds=3.0,
    replay=seq.Replay(engine="mujoco", state="sim", looks="looks"),
)
class LooksBench:
    def __init__(self, mistake: str = ""):
        global mujoco
        import mujoco

        self.model = mujoco.MjModel.from_xml_string(XML)
        self.data = mujoco.MjData(self.model)
        self.mistake = mistake

    def sim(self):
        return self.model, self.data

    def looks(self):
        if self.mistake and self.steps >= 2:
            if self.mistake == "raise":
                raise RuntimeError("the paint ran out")
            return [("cart", RED)]
        return {"cart": {"rgba": RED if self.steps >= 2 else BLUE}, "ball": {"visible": self.steps < 3}}

    @seq.reset
    def reset(self, task, seed):
        mujoco.mj_resetData(self.model, self.data)
        self.target, self.steps = {"left": -0.5, "right": 0.5}[task], 0
        self.data.qpos[0] = 0.01 * seed
        mujoco.mj_forward(self.model, self.data)
        return {"x": float(self.data.qpos[0]), "target": self.target}

    @seq.step
    def step(self, action):
        self.data.qpos[0] += float(action[0])
        mujoco.mj_step(self.model, self.data)
        self.steps += 1
        x = float(self.data.qpos[0])
        reached = abs(x - self.target) < 0.05
        return {"x": x, "target": self.target}, reached, reached
