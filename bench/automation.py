"""Where the seconds from the approval click to PromoteReadReplica go, in an
approve drill: `python3 bench/automation.py out/drill-<time>-approve`.

Reads the drill's report.json (the states, as audit read them from the
execution history) and calls.json (every AWS call the emulated world saw,
with its time and the calling function; the state machine's Lambda
invocations are `lambda:Invoke:<function>`). Prints the total and each
piece, each put in one of four kinds:

- the world: what RDS takes in the drill's world (the deny-all group going
  from `adding` to `active`, the reboot), seen by the fence's polls;
- a probe's timeout: the re-check's GET of P's endpoint, which a partitioned
  P leaves unanswered until the plan's probe_timeout_ms;
- a cold start: a state's invocation until its function's first AWS call
  (under cargo lambda watch: `cargo run` of the debug build, then init);
- Handover: everything else (Step Functions' transitions, the functions'
  own calls and work).
"""
import json
import sys
from datetime import datetime


def ts(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main(out):
    report = json.load(open(f"{out}/report.json"))
    calls = json.load(open(f"{out}/calls.json"))
    plan = json.load(open(f"{out}/plan.json"))
    states = report["states"]
    names = [s["name"] for s in states]
    if "Recheck" not in names:
        sys.exit(f"{out}/report.json has no Recheck state: not an approved run")
    recheck = states[names.index("Recheck")]
    begin = ts(recheck["entered_at"]) - 5

    def first(pred, after=begin, what="a call"):
        found = [c["t"] for c in calls if c["t"] >= after and pred(c)]
        if not found:
            sys.exit(f"{out}/calls.json has no {what}: not a drill approved by a Slack click "
                     "that fenced P and promoted S")
        return found[0]

    def last(pred, before, what="a call"):
        found = [c["t"] for c in calls if begin <= c["t"] <= before and pred(c)]
        if not found:
            sys.exit(f"{out}/calls.json has no {what}: not a drill approved by a Slack click "
                     "that fenced P and promoted S")
        return max(found)

    def by(fn, action=None):
        return lambda c: c.get("caller") == fn and (action is None or c["action"] == action)

    promote_call = first(by("promote", "PromoteReadReplica"), what="PromoteReadReplica")
    click = last(by("slack", "SendTaskSuccess"), promote_call, what="SendTaskSuccess by slack")
    inv = {f: first(lambda c, f=f: c["action"] == f"Invoke:{f}", click)
           for f in ("diagnose", "fence", "promote")}
    recheck_exit = ts(recheck["exited_at"])
    d_first = first(by("diagnose"), inv["diagnose"])
    d_last = last(by("diagnose"), recheck_exit)
    f_first = first(by("fence"), inv["fence"])
    modify = first(by("fence", "ModifyDBInstance"), inv["fence"], what="ModifyDBInstance by fence")
    reboot = first(by("fence", "RebootDBInstance"), modify, what="RebootDBInstance by fence")
    f_last_read = last(by("fence", "DescribeDBInstances"), inv["promote"])
    p_first = first(by("promote"), inv["promote"])
    probe_ms = plan["detection"]["probe_timeout_ms"]
    pieces = [
        ("Handover", "decision sent -> Recheck invoked (Step Functions)", inv["diagnose"] - click),
        ("cold start", "Recheck: invoked -> first call", d_first - inv["diagnose"]),
        ("Handover", "Recheck: its reads, side by side", d_last - d_first),
        ("probe timeout", f"Recheck: P's endpoint GET, unanswered until its {probe_ms} ms",
         max(0.0, recheck_exit - d_last)),
        ("Handover", "Recheck done -> Fence invoked (Step Functions)", inv["fence"] - recheck_exit),
        ("cold start", "Fence: invoked -> first call", f_first - inv["fence"]),
        ("Handover", "Fence: claim, read P, ModifyDBInstance", modify - f_first),
        ("the world", "Fence: deny-all group adding -> active, read by its polls", reboot - modify),
        ("the world", "Fence: RebootDBInstance -> P available again, read by its polls",
         f_last_read - reboot),
        ("Handover", "Fence: record -> Promote invoked (Step Functions)", inv["promote"] - f_last_read),
        ("cold start", "Promote: invoked -> first call", p_first - inv["promote"]),
        ("Handover", "Promote: claim, read S and its lag -> PromoteReadReplica", promote_call - p_first),
    ]
    total = promote_call - click
    print(f"bench automation: decision -> PromoteReadReplica {total:.2f} s (SendTaskSuccess "
          f"-> the PromoteReadReplica call, from {out}/calls.json)")
    for kind, what, s in pieces:
        print(f"  {s:6.3f} s  {kind:<13} {what}")
    sums = {}
    for kind, _, s in pieces:
        sums[kind] = sums.get(kind, 0.0) + s
    print("  by kind: " + ", ".join(f"{k} {v:.2f} s" for k, v in sums.items()))
    warm = total - sums.get("cold start", 0.0)
    own = sums.get("Handover", 0.0)
    print(f"bench automation: warm {warm:.2f} s (without the cold starts); Handover's own "
          f"{own:.2f} s, beside the world's {sums.get('the world', 0.0):.2f} s and the probe's "
          f"{sums.get('probe timeout', 0.0):.2f} s")


if __name__ == "__main__":
    main(sys.argv[1])
