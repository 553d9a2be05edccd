"""Code the platform hosts for its users, as values: their uploaded bundles unpacked safely, what their
classes declare, what their images ask, what their boxes may use. Running any of it is the execution plane's
(`yardstick.worker.boxes`): nothing here starts a process.

    bundle        a code upload (base64 gzip tar + sha256) into a folder of its own, or a refusal
    seq_api       Yardstick's `seq` (the Sequences SDK's authoring API) over `yardstick.sdk`
    shim/seq      that API under the name `seq`, for the import path of what runs a user's file
    declaration   what a class declares, as plain data for the registry
    params        the parameters an eval may set, read from how the code is written
    images        what an image declaration asks to install, or the field it is refused by
    limits        BoxLimits: what a box of an org's code may use
    mounts        where a box finds its volumes (/assets, /data) and the variable that says so
    errors        the refusals (field and rule), and a machine that cannot box

Nothing here imports the store, the core or a front door.
"""
