"""The update's speed changes, each pinned against the update it replaces on a fixed batch.

* The replay stores the BEV channels-last: an implementation change, so the update on its
  batch gives the losses and gradients of the update on the same batch laid out NCHW.
* ``target_features="online_encoder"`` adopts DrQ-v2's target: the target heads read the
  online encoder's no-grad features of o_{t+1}. With the target encoder equal to the online
  one the two forms are the same update; otherwise the TD target differs by exactly that.
* The guided update passes the critic heads once for the taken and the advisor's actions, and
  the actor head once for the sample, the mode and the advisor's log-probability: the same
  gradients as one head pass per term.
"""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from found_rl.algos.guidance import awag_loss, awag_weights, vmr_loss
from found_rl.algos.sac import SAC, SacConfig
from found_rl.algos.schedules import vmr_coefficient
from found_rl.models.encoders import network_preset
from found_rl.models.observation import ObsSpec
from found_rl.storage.replay import ReplayBuffer
from tests.guidance_terms import switched_on

SPEC = ObsSpec(bev_shape=(15, 48, 48), state_dim=10)


@pytest.fixture(scope="module")
def replay_and_batch():
    rng = np.random.default_rng(0)
    replay = ReplayBuffer(256, SPEC, 2, num_envs=2)
    obs = {"bev": rng.integers(0, 2, (2, 15, 48, 48), dtype=np.uint8) * 255,
           "state": rng.normal(size=(2, 10)).astype(np.float32)}
    stored = []
    for step in range(60):
        next_obs = {"bev": rng.integers(0, 2, (2, 15, 48, 48), dtype=np.uint8) * 255, "state": obs["state"] + 0.1}
        ids = [(clip, 0, step) for clip in range(2)]
        replay.add(obs, rng.uniform(-1, 1, (2, 2)), rng.normal(size=2), next_obs, np.zeros(2, bool),
                   np.zeros(2, bool), step_ids=ids)
        for step_id in ids:
            replay.attach_labels(step_id, action=rng.uniform(-1, 1, 2))
        stored.append(obs["bev"])
        obs = next_obs
    return replay, replay.sample(32, np.random.default_rng(1)), np.stack(stored)


def contiguous(batch):
    def nchw(obs):
        return {"bev": obs["bev"].contiguous(), "state": obs["state"]}

    return batch._replace(observations=nchw(batch.observations), next_observations=nchw(batch.next_observations))


def sac(**options) -> SAC:
    torch.manual_seed(0)
    options = {**switched_on(SacConfig, "vmr", "awag"), **options}
    return SAC(SPEC, 2, SacConfig(batch_size=32, network=network_preset("cpu"), **options))


def update_with_gradients(learner: SAC, batch):
    """One update; the critic's gradients (kept by the optimiser step) and the logged losses."""
    torch.manual_seed(5)
    logs = learner.update(batch, 1000)
    return logs, [p.grad.clone() for p in learner.qf.parameters()]


def test_the_replay_hands_out_channels_last_batches_of_the_stored_values(replay_and_batch):
    replay, batch, stored = replay_and_batch
    bev = batch.observations["bev"]
    assert bev.shape == (32, 15, 48, 48) and bev.dtype == torch.uint8
    assert bev.is_contiguous(memory_format=torch.channels_last)
    slots = np.flatnonzero(replay.is_transition)
    values = {replay.step_ids[slot, 2] * 2 + replay.step_ids[slot, 0]: slot for slot in slots}
    for key, slot in list(values.items())[:10]:  # each sampled row is the observation that was added
        np.testing.assert_array_equal(replay._gather_obs(np.array([slot]))["bev"][0].numpy(),
                                      stored[key // 2][key % 2])


def test_an_update_on_the_channels_last_batch_equals_the_nchw_one(replay_and_batch):
    _, batch, _ = replay_and_batch
    logs_a, grads_a = update_with_gradients(sac(), batch)
    logs_b, grads_b = update_with_gradients(sac(), contiguous(batch))
    assert logs_a.keys() == logs_b.keys()
    for key in logs_a:
        assert logs_a[key] == pytest.approx(logs_b[key], rel=1e-5, abs=1e-6), key
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_online_encoder_targets_equal_the_classic_ones_when_the_encoders_agree(replay_and_batch):
    _, batch, _ = replay_and_batch
    classic, online = sac(), sac(target_features="online_encoder")
    logs_a, grads_a = update_with_gradients(classic, batch)  # fresh learners: target encoder == online
    logs_b, grads_b = update_with_gradients(online, batch)
    assert logs_a == logs_b
    for a, b in zip(grads_a, grads_b):
        assert torch.equal(a, b)


def test_online_encoder_targets_read_the_online_features(replay_and_batch):
    _, batch, _ = replay_and_batch
    learner = sac(target_features="online_encoder")
    with torch.no_grad():  # move the target encoder away: the forms now differ
        for param in learner.qf_target.encoder.parameters():
            param.add_(0.1 * torch.randn_like(param))
    before = copy.deepcopy(learner)
    update_with_gradients(learner, batch)

    # the documented target: r + γ(1 − d)(min Q̄(φ(s'), a') − α log π(a'|s')), φ the online encoder
    torch.manual_seed(5)
    prepare = before.qf.encoder.prepare
    next_obs = prepare(batch.next_observations)
    obs = prepare(batch.observations)
    with torch.no_grad():
        features = before.qf.encoder(next_obs)
        actions, log_pi, _ = before.actor.sample_from_features(features)
        q1, q2 = before.qf_target.q_values(features, actions)
        target = batch.rewards + (1 - batch.dones) * 0.99 * (torch.min(q1, q2) - before.alpha * log_pi)
    q1_now, q2_now = before.qf.q_values(before.qf.encoder(obs), batch.actions)
    loss = torch.nn.functional.mse_loss(q1_now, target) + torch.nn.functional.mse_loss(q2_now, target)
    before.qf.zero_grad()
    loss.backward()  # the TD part of the critic gradient; VMR adds its own term on top
    vmr_free = sac(target_features="online_encoder", **switched_on(SacConfig, vmr={}, awag={}))
    vmr_free.qf.load_state_dict(before.qf.state_dict())
    vmr_free.qf_target.load_state_dict(before.qf_target.state_dict())
    vmr_free.actor.load_state_dict(before.actor.state_dict())
    _, grads = update_with_gradients(vmr_free, batch)
    for expected, got in zip((p.grad for p in before.qf.parameters()), grads):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7)


def guided_reference_gradients(before: SAC, after: SAC, batch, global_step: int):
    """The guided update's critic and actor gradients with every term written out on its own
    head pass (METHOD §1, §2), as the update computed them before the passes were fused.

    ``before`` is the learner as the update found it; ``after`` supplies the critic the actor
    step reads (the critic has stepped by then).
    """
    cfg = before.config
    prepare = before.qf.encoder.prepare
    obs, next_obs = prepare(batch.observations), prepare(batch.next_observations)
    torch.manual_seed(5)
    with torch.no_grad():
        next_features = before.qf.encoder(next_obs)
        next_actions, next_log_pi, _ = before.actor.sample_from_features(next_features)
        q1_next, q2_next = before.qf_target.q_values(next_features, next_actions)
        soft_value = torch.min(q1_next, q2_next) - before.alpha * next_log_pi
        target = batch.rewards + (1 - batch.dones) * cfg.gamma * soft_value
    features = before.qf.encoder(obs)
    q1, q2 = before.qf.q_values(features, batch.actions)
    q1_advisor, q2_advisor = before.qf.q_values(features, batch.advisor_actions)
    margin, form = cfg.vmr.margin, cfg.vmr.form
    has = batch.has_advisor
    vmr = vmr_loss(q1_advisor, q1, has, margin, form) + vmr_loss(q2_advisor, q2, has, margin, form)
    coef = vmr_coefficient(global_step, cfg.vmr.decay_start_steps, cfg.vmr.decay_end_steps)
    critic_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target) + coef * vmr
    critic_grads = torch.autograd.grad(critic_loss, list(before.qf.parameters()))

    features = features.detach()
    pi, log_pi, _ = before.actor.sample_from_features(features)
    q1_pi, q2_pi = after.qf.q_values(features, pi)
    bound = 1.0 - cfg.advisor_action_eps
    advisor_actions = batch.advisor_actions.clamp(-bound, bound)
    with torch.no_grad():
        mu = before.actor.params_from_features(features)[0].tanh()
        q_advisor = torch.min(*after.qf.q_values(features, advisor_actions))
        q_policy = torch.min(*after.qf.q_values(features, mu))
        awag = awag_weights(q_advisor, q_policy, batch.has_advisor, cfg.awag.beta, cfg.awag.max_weight)
    awag_term = awag_loss(before.actor.log_prob_from_features(features, advisor_actions), awag.gate, awag.weights)
    awag_coef = before.awag_coefficient(global_step)
    actor_loss = (before.alpha * log_pi - torch.min(q1_pi, q2_pi)).mean() + awag_coef * awag_term
    actor_grads = torch.autograd.grad(actor_loss, before.actor_params)
    return critic_grads, actor_grads


def test_the_guided_update_equals_its_terms_computed_one_head_pass_each(replay_and_batch):
    _, batch, _ = replay_and_batch
    learner = sac(drq_pad_px=0, policy_frequency=1)  # no shift draw; the actor steps on this update
    before = copy.deepcopy(learner)
    torch.manual_seed(5)
    learner.update(batch, 1000)
    critic_expected, actor_expected = guided_reference_gradients(before, learner, batch, 1000)
    for expected, param in zip(critic_expected, learner.qf.parameters()):
        torch.testing.assert_close(param.grad, expected, rtol=1e-4, atol=1e-6)
    for expected, param in zip(actor_expected, learner.actor_params):
        torch.testing.assert_close(param.grad, expected, rtol=1e-4, atol=1e-6)
    assert any(g.abs().sum() > 0 for g in actor_expected)  # the actor really stepped on this update
