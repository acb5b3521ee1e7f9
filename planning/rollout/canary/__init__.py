"""The canary progression of a rollout group, as pure planning (spec reference §1, §2.4-§2.7,
§3, §4, §5): the Rollout workflow calls `machine.step` on every event and acts on the
`CanaryDecision` it returns; operator requests go through `steering` and `repin` first.

Modules:
- `texts`: phases, failure reasons, refusal texts and Event reasons (quoted once).
- `capacity`: new-revision Instances per step and component (§1.3).
- `steps`: each step's gate (Immediate, Timed, Manual, Analysis) and clocks (§1.4, §2.1).
- `observation`: what the workflow observed: components' counts, pause, a sample verdict.
- `requests`: the mailbox of accepted promote, rollback and retry requests (§3.1).
- `state`: `CanaryState`, every `status...canary` field and `rolloutPhase` (§1.5, §2.6).
- `traffic`: the recorded traffic entries (§1.7).
- `timeouts`: readyTimeout precedence and the capacity and stall deadlines (§1.6).
- `sampling`: when a sample is due and what a verdict does (§2.4, §2.5).
- `transitions`: entering, advancing, completing, failing, rolling back (§1.4-§1.6).
- `gate`: whether an entered step passes its gate now (§1.4, §2.5).
- `schedule`: capacities the InferenceReplicas hold and the next wake-up.
- `decision`: `CanaryDecision` and `CanaryEvent`.
- `machine`: `step`, the transition function (§1.4, §1.5, §5).
- `steering`: promote, rollback, retry, pause and resume as accept-or-refuse checks (§3, §5).
- `repin`: repinning a running run onto the live plan (§4).
- `waiting`: what the canary waits for and what releases it, in words (`explain`, `rollout status`).
"""
