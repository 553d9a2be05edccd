"""Code the platform hosts for its users: their uploaded bundles unpacked safely, their classes checked and
played in boxes with no network, their images prepared, their policies served on a unix socket.

    bundle        a code upload (base64 gzip tar + sha256) into a folder of its own, or a refusal
    seq_api       Yardstick's `seq` (the Sequences SDK's authoring API) over `yardstick.sdk`
    shim/seq      that API under the name `seq`, for the import path of what runs a user's file
    sandbox       running untrusted code in bubblewrap: no network, read-only root, a scratch folder
    check         the build check: import, read the declaration, build, reset and step, in a box
    environments  an image declaration into the Python its code runs with
    player        BoxedExecutor: a benchmark's episodes played in a box, kept warm across batches
    server        BoxedPolicyServer: a deployed policy served in a box on a unix socket

    errors        the refusals (field and rule), and a machine that cannot box
    params        the parameters an eval may set, read from how the code is written
    declaration   what a class declares, as plain data for the registry
    inbox         what every boxed process does first (import root, private channels, where it raised)
    check_runner, play_runner   the two programs that run inside a box

Nothing here imports the store, the core or a front door: the platform calls these with folders and
references and keeps what they return.
"""
