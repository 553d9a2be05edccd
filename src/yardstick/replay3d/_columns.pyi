def encode(
    t: object,
    step: object,
    pos: object,
    quat: object,
    parents: object,
    t_scale: float,
    pos_unit: float,
    quat_scale: float,
) -> tuple[bytes, bytes]: ...

class Frames:
    count: int
    def __init__(self, xpos: object, xquat: object, rows: object, capacity: int = 512) -> None: ...
    def take(self, step: int, t: float) -> None: ...
    def picked(self, rows: object | None) -> tuple[bytearray, bytearray, bytearray, bytearray]: ...
