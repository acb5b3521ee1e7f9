"""Every replay scenario `tests/replay/record_histories.py` records, with what it tells; the
stories are in `tests/replay/scenarios.py`, `tests/replay/scenarios_newer.py` and
`tests/replay/scenarios_fleet.py`, and the table in tests/replay/README.md says which
workflows each leaves."""

from __future__ import annotations

from tests.replay.scenarios import (
    Scenario,
    instance_create_delete,
    instance_local_kube_calls,
    instance_pod_killed,
    instance_surge_update,
    service_apply_update_delete,
    service_clean_starts,
    service_handover_at_rest,
    service_held_release,
    service_retire_in_one_call,
    service_scale_pause_resume,
    service_versioned_instances,
)
from tests.replay.scenarios_fleet import (
    service_gang_deletes_counted,
    service_gang_partial_create,
    service_launched_removals,
    service_quota_not_counted,
    service_waits_reported,
)
from tests.replay.scenarios_newer import (
    service_canary,
    service_deployment_scale,
    service_drain,
    service_gang_surge_freeze,
    service_kubectl_relay,
    service_lifecycle_change,
    service_migration,
    service_multicluster_all,
    service_pod_relist,
    service_relocation,
    service_rollout_group,
    trafficmap_weights_drain_delete,
)

SCENARIOS = [
    Scenario("instance_create_delete", instance_create_delete, "a leader and a worker: Ready, then deleted"),
    Scenario("instance_pod_killed", instance_pod_killed, "a killed worker pod: both pods recreated"),
    Scenario("instance_surge_update", instance_surge_update, "a SurgeThenDrain image update, then deleted"),
    Scenario(
        "instance_local_kube_calls",
        instance_local_kube_calls,
        "local Kubernetes calls: a killed pod recreated, a SurgeThenDrain update, deleted",
    ),
    Scenario(
        "service_apply_update_delete",
        service_apply_update_delete,
        "spec 003 example: apply (2 engine Instances), same apply again, image change, delete",
    ),
    Scenario(
        "service_versioned_instances",
        service_versioned_instances,
        "Instances started under workflow version 1 (no patch markers, reports by local activity): apply, image "
        "change, delete",
    ),
    Scenario(
        "service_kept_timers",
        service_versioned_instances,
        "service_versioned_instances with each loop's timer kept across its waits (`instance-kept-timer` in "
        "Instance version 2, `replica-kept-timer`, `isvc-kept-timer`): apply, image change, delete",
    ),
    Scenario(
        "service_clean_starts",
        service_clean_starts,
        "a stray pod at Instance 1 before the apply: the InferenceReplica lists before its starts "
        "(`replica-list-before-starts`), Instance 0 starts clean, Instance 1 clears the stray; Instance version 3 "
        "(pods created with their serving gate); image change, delete",
    ),
    Scenario(
        "service_parked_timers",
        service_versioned_instances,
        "service_versioned_instances under Instance version 4 (`waits-park-safety-timer`): the 6-hour re-check "
        "of a Ready Instance parked while its update and its deletion wait on the short one, taken back once "
        "Ready; the watcher holding a pod's way out until it goes: apply, image change, delete",
    ),
    Scenario(
        "service_scale_pause_resume",
        service_scale_pause_resume,
        "scale 1 -> 3 -> 2, pause, image change held back, resume, delete",
    ),
    Scenario(
        "service_held_release",
        service_held_release,
        "an unpullable image held, release_held (unknown and real revision), fixed image, reset, delete",
    ),
    Scenario(
        "service_gang_surge_freeze",
        service_gang_surge_freeze,
        "leader+worker Instances: freeze, image change held, a pod lost unrepaired, resume, gang surge, delete",
    ),
    Scenario(
        "service_deployment_scale",
        service_deployment_scale,
        "an OMENative engine and a RawDeployment router: scale refused, scale 1 -> 2, delete",
    ),
    Scenario(
        "service_rollout_group",
        service_rollout_group,
        "seed 004: engine+decoder blue-green group and the router alone; an image change runs a Rollout; delete",
    ),
    Scenario(
        "service_canary",
        service_canary,
        "engine+decoder canary with Prometheus analysis: a good image promoted past its manual gate, then a bad "
        "image rolled back by analysis; delete",
    ),
    Scenario(
        "service_migration",
        service_migration,
        "two engine Instances: Instance 1 migrated off its node (Completed), a request naming the wrong node "
        "(Failed), delete",
    ),
    Scenario(
        "service_drain",
        service_drain,
        "three engine Instances: the node of Instance 0 drained replacement first, held cordoned, released; delete",
    ),
    Scenario(
        "service_relocation",
        service_relocation,
        "one engine Instance stuck on a wedged node, relocated off it (AutoMigrationTriggered), Ready elsewhere; "
        "delete",
    ),
    Scenario(
        "service_relocation_update_first",
        service_relocation,
        "service_relocation on the `relocation-update-first` path (the restart sent once the update landed), "
        "with versioned Instances",
    ),
    Scenario(
        "service_lifecycle_change",
        service_lifecycle_change,
        "restartPolicy changed alone (no new revision), a killed container recreates its Instance, delete",
    ),
    Scenario(
        "service_kubectl_relay",
        service_kubectl_relay,
        "the kubectl way in: the controller's relays of the object (its own write, an edit twice, a late one), "
        "runtime_changed, the object deleted (finalizer) then delete",
    ),
    Scenario(
        "trafficmap_weights_drain_delete",
        trafficmap_weights_drain_delete,
        "a TrafficMap: weights 2 and 3 published, a probe gate set and lifted, a drain (and a refused one) and "
        "undrain, a zero factor freezing the map and a fixed one resuming it, delete",
    ),
    Scenario(
        "service_multicluster_all",
        service_multicluster_all,
        "spec 000's chat placed All on two workload clusters: members on their queues, weights 1:1 then 1:3 "
        "with a factor, delete",
    ),
    Scenario(
        "service_pod_relist",
        service_pod_relist,
        "one engine Instance whose pod dies while the watcher is down: the InferenceReplica's component "
        "re-list finds it gone and sends the Instance a fresh summary; recreated, Ready; delete",
    ),
    Scenario(
        "trafficmap_kept_timer",
        trafficmap_weights_drain_delete,
        "trafficmap_weights_drain_delete with the loop's timer kept across its waits (`trafficmap-kept-timer`)",
    ),
    Scenario(
        "service_launched_rows",
        service_versioned_instances,
        "service_versioned_instances with single-pod Instances started `launched_by_parent` (no first report: the "
        "InferenceReplica on `replica-launched-rows` shows them Creating until their report): apply, image "
        "change, delete",
    ),
    Scenario(
        "service_report_beside",
        service_lifecycle_change,
        "service_lifecycle_change with Instances of version 5: the loop's report goes out beside the next step "
        "(`instance-report-beside-next-step`), so the killed container's recreation does not wait on it; the "
        "InferenceReplica writes its status with a local activity (`replica-local-status-write`)",
    ),
    Scenario(
        "service_retire_in_one_call",
        service_retire_in_one_call,
        "service_versioned_instances with no drain pause and Instances of version 6: each old pod out of rotation "
        "and deleted in one local activity (`instance-retire-in-one-call`): apply, image change, delete",
    ),
    Scenario(
        "service_handover_at_rest",
        service_handover_at_rest,
        "image changes until the InferenceReplica, at rest past 500 events, continues as new "
        "(`replica-hands-over-at-rest`); one more image change on the new run; delete",
        suggest_continue_as_new_after=4096,
    ),
    Scenario(
        "service_update_counted",
        service_versioned_instances,
        "service_versioned_instances with Instances of version 7 and the InferenceReplica on "
        "`replica-requested-rows`: the update requests say `counted_by_parent`, so each Instance reports its "
        "SurgeThenDrain update once, when it ends (`instance-update-reports-counted`): apply, image change, delete",
    ),
    Scenario(
        "service_counted_waits",
        service_versioned_instances,
        "service_update_counted with Instances of version 8 (`instance-counted-waits-reported`: a counted update "
        "that waits reports the wait; `instance-held-update-off-net`: one held by a pause takes the Instance off "
        "its parent's net) and the InferenceReplica also on `replica-run-cap-holds-the-rest`: "
        "apply, image change, delete",
    ),
    Scenario(
        "service_deletes_counted",
        service_scale_pause_resume,
        "service_scale_pause_resume with Instances of version 9 and the InferenceReplica on "
        "`replica-counted-deletes`: its delete requests say `counted_since`, so the Instance scaled down and, at "
        "the end, each one deleted reports once, when it is gone (`instance-deletion-counted`)",
    ),
    Scenario(
        "service_launched_removals",
        service_launched_removals,
        "an admission webhook holds pod creations: a scale 1 -> 3's new Instances wait on them, unheard of, and "
        "the scale back to 1 tells them to delete; the InferenceReplica on `replica-launched-removals` counts them "
        "as deleting (its facts and status rows) until their ends",
    ),
    Scenario(
        "service_waits_reported",
        service_waits_reported,
        "a ResourceQuota of one pod holds a scale 1 -> 2's new Instance waiting for room: under version 10 "
        "(`instance-waits-reported`) it reports the wait (`QuotaExceeded` in its row) and its end once the quota "
        "is raised",
    ),
    Scenario(
        "service_quota_not_counted",
        service_quota_not_counted,
        "a ResourceQuota its controller has not counted (`status unknown for quota`) holds a scale 1 -> 3's new "
        "Instances: under version 11 (`instance-quota-not-counted-waits`) they wait, their rows showing "
        "`QuotaNotCounted`; a scale to 2 ends Instance 2 while it waits, and Instance 1 is Ready once the quota is "
        "counted",
    ),
    Scenario(
        "service_gang_partial_create",
        service_gang_partial_create,
        "a ResourceQuota with room for one more pod: a scale 1 -> 2's new gang Instance has its leader made and "
        "its worker refused; under version 11 (`instance-partial-create-kept`) it keeps the leader and asks only "
        "for the worker once the quota has room",
    ),
    Scenario(
        "service_gang_deletes_counted",
        service_gang_deletes_counted,
        "Instances of a leader and a worker, scaled 1 -> 2 -> 1: the InferenceReplica counts Instance 1 as deleting "
        "from its request (`replica-counted-deletes`), and the Instance (version 11) reports its pods "
        "Terminating once its delete call returns (`instance-deleted-pods-terminating`), which frees one of "
        "its two pods of the scale-down budget (`pods_held`), then its end",
    ),
    Scenario(
        "service_run_limits",
        service_scale_pause_resume,
        "service_scale_pause_resume with the InferenceReplica's per-run limits at test size (2 Instance starts a "
        "run, 1 start or signal a workflow task, the state packed above 1 byte): the scale to 3 starts one, "
        "continues as new (`replica-run-limits`) and the next run starts the third; the pause and the delete go "
        "out one signal a task (`replica-sends-in-waves`); every later run is handed its state packed",
        run_limits=(2, 1, 1),
    ),
]
