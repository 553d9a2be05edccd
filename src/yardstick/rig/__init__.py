"""The rig: the process at a robot that plays rig plans, and its station console."""
