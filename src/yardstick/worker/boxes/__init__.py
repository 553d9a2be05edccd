"""The boxes uploaded code runs in, and what runs in them.

sandbox       a box: bubblewrap, an allow-list root, a user namespace, limits, no network
groups        how a box is held to its limits: rlimits and control groups
player        BoxedExecutor: a hosted benchmark's episodes, played in a box kept warm across batches
inbound       the files an episode recorded, taken out of its box as bytes and checked
server        BoxedPolicyServer: a deployed policy served in a box, on a socket the platform bound
check         the build check of a registration, in a box
environments  an image's pip steps made into a virtual environment, with no tenant code on a network
inbox         what every boxed process of Yardstick's does first (import root, private channels)
check_runner, play_runner   the two programs that run inside a box
"""
