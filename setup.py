"""The package's one compiled part, and it optional: the replay file's encoder and a frame's copier
(replay3d/_columns.c).

Everything else is in pyproject.toml. Where no C compiler is at hand the build goes on without it, and
replay3d.format makes the same bytes with numpy (slower at an episode's close: ~0.7 ms against ~0.1), as
mujoco_poses keeps the same frames (~1 µs slower a frame)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "yardstick.replay3d._columns",
            ["src/yardstick/replay3d/_columns.c"],
            # The same floating-point operations as numpy's, one at a time: no fused multiply-adds.
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
