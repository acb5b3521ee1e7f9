"""The `Instance` workflow: `workflow` (handlers and main loop: observe -> plan with
`planning.instance.steps.next_step` -> act -> wait), `lifecycle` (carrying out the chosen
step), `bring_up`, `updates` (update ways, restart), `teardown` (pods down, failed
attempts), `operations` (what they share: pod lists, reports, waiting), `gang` (PodGroup)."""
