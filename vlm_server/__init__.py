"""Asynchronous batched advisor service (VLM actions, CLIP reward) and its client; independent of found_rl.

Serve (loopback; binding another address needs ``--token`` or ``$VLM_SERVER_TOKEN``)::

    python -m vlm_server --advisor found_rl.advisors:ExpertAdvisor \\
        --clip openclip --clip-option pretrained=/ckpt/clip_bev.pt --clip-option image_size=192

Endpoints: ``POST /v1/advise``, ``POST /v1/clip/score`` (one item, or ``{"items": [...]}``
with ids unique in the batch), ``GET /healthz``, ``/readyz``, ``/metrics``; none takes query
parameters. From an env worker, without ever blocking::

    from vlm_server.client import BackgroundClient, advise_payload
    client = BackgroundClient("http://127.0.0.1:8470")
    client.submit("slot3:ep12:step40", advise_payload(bev_rgb, command, speed_mps))
    for step_id, reply in client.poll():  # later; reply["ok"], reply["action"] = [acc, steer]
        ...

Backends are plugged in by import path; the contract is in ``vlm_server.backends.base``.
"""
