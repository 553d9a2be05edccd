import seq


@seq.planner(name="site", members=["planned"], gpu="cpu")
class Site:
    """Plans for each robot of `planned`: its goal the sum of every `say` observed into the planner so far
    (kept in its own record), and the `x` of the robot's newest observation, so a test sees both what a site
    said and what the robot observed reach the robot's policy."""

    @seq.plan(every_s=0.3, wake_on=["say"])
    def plan(self, group):
        heard = group.state.get("heard", 0.0)
        for seen in group.state.get("seq.observations", []):
            heard += float(seen["data"].get("say", 0.0))
        group.state["heard"] = heard
        group.state["rounds"] = group.state.get("rounds", 0) + 1
        return {
            robot.id: {"goal": heard, "x": float((robot.state.get("observation") or {}).get("x", -1.0))}
            for member in group.members
            if member.kind == "policy"
            for robot in member.robots
        }
