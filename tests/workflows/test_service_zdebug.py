import asyncio
from temporalio.testing import WorkflowEnvironment
from tests.workflows.service_harness import story, isvc_manifest


async def test_debug(dev_server: WorkflowEnvironment, task_queue, kubesim):
    async with story(dev_server.client, task_queue, kubesim) as s:
        print(await s.apply(isvc_manifest()))
        await asyncio.sleep(10)
        print("ISVC", (await s.status()).phase, (await s.status()).status.conditions)
        print("IR", [(r.index, r.phase, r.pods) for r in (await s.replica_status()).instance_statuses])
        for p in s.pods():
            print(p.metadata.name, p.status.phase, [(c.type, c.status) for c in p.status.conditions or []])
        for wid in [s.isvc_id, "irep/spread-demo/qwen3-0-6b-engine"]:
            async for e in dev_server.client.get_workflow_handle(wid).fetch_history_events():
                if e.HasField("workflow_task_failed_event_attributes"):
                    print("WFT FAILED", wid, str(e.workflow_task_failed_event_attributes.failure)[:2000])
                    break
        import json

        async for e in dev_server.client.get_workflow_handle(
            "instance/spread-demo/qwen3-0-6b-engine-0"
        ).fetch_history_events():
            if e.HasField("workflow_execution_signaled_event_attributes"):
                a = e.workflow_execution_signaled_event_attributes
                d = json.loads(a.input.payloads[0].data)
                print(
                    "SIG",
                    a.signal_name,
                    d.get("resource_version") or d.get("resourceVersion"),
                    [
                        {
                            k: v
                            for k, v in p.items()
                            if k
                            in (
                                "name",
                                "ready",
                                "serving",
                                "containers_ready",
                                "containersReady",
                                "has_serving_gate",
                                "hasServingGate",
                            )
                        }
                        for p in d.get("pods", [])
                    ],
                )
            else:
                print("EV", e.event_type)
        print(s.relay.sent.keys())
        st = await dev_server.client.get_workflow_handle("instance/spread-demo/qwen3-0-6b-engine-0").query(
            "status"
        )
        print("ISTATUS", st)
        st = await dev_server.client.get_workflow_handle("instance/spread-demo/qwen3-0-6b-engine-0").query(
            "__stack_trace"
        )
        print("STACK", st)
        assert False
