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
def capture(
    pos: object,
    quat: object,
    t: object,
    step: object,
    index: int,
    xpos: object,
    xquat: object,
    now: float,
    played: int,
) -> None: ...
