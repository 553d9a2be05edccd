"""The act plane's worker: one deployment served to robots over TLS (`sequence_ai.connect`'s data plane).

`host.ActHost` runs in a platform worker and takes the act workers the gateway files (`core.act_plane`);
each is an `server.ActServer`: the deployment's policy in its box (`worker.boxes.server.BoxedPolicyServer`),
and in front of it an HTTPS server with a certificate of its own (`certs`) that takes a robot's
observations as it makes them and its acts (`app`), one wire session an episode (`episodes`), recording
each episode when the deployment captures (`capture`).
"""
