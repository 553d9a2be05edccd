"""3D replays of episodes: the scene once as a glTF binary, each frame the recorded nodes' world poses.

    format         the `.seqreplay` file (documented there), its writer and reader
    gltf           a .glb from plain arrays, under the root `seq_root` that turns Z-up into Y-up
    shapes         triangle meshes of primitive shapes
    mujoco_scene   a MuJoCo model's scene (one node per body), cached per model
    scene_cache    exported scenes on disk, keyed by the model's sha256, across processes and runs
    mujoco_poses   a MuJoCo simulation's frames, read from MjData

Nothing here imports a simulator at import time: MuJoCo is imported by the functions that read a model.
"""
