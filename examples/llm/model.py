# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""llm: a small decoder-only transformer streaming text, with continuous
batching: one decode step serves every active stream.

Inputs as Triton's LLM backends name them: ``text_input`` (the prompt),
optional ``max_tokens`` (default 16) and ``stream`` (default false: one
response with the whole text); and as vllm_backend's model takes them,
which is what genai-perf sends with ``--backend vllm``:
``sampling_parameters`` (JSON; its ``max_tokens`` counts where the tensor
is not sent, other keys are ignored) and ``exclude_input_in_output``
(default true; false puts the prompt before the text of a response that is
not streamed). Output ``text_output``: each new token when streaming.
The network is written below in PyTorch; its weights are random from a
fixed seed (nothing is downloaded), so its text is gibberish, but every
step does the work of a real model of its size: byte-level tokens, a KV
cache per stream, greedy decoding. Greedy decoding picks among printable
ASCII bytes, so every streamed piece is valid UTF-8 (JSON for the
generate endpoints).

tritonpy.batching.ContinuousBatcher runs the steps: streams join at the
next step and leave the moment they end or are cancelled, freeing their
cache slot. Model parameters (config.pbtxt): ``max_active_sequences``
(cache slots, the batch of a decode step), ``cache_budget_tokens`` (most
prompt + max_tokens summed over active streams). Past either, new streams
wait their turn. The gauge ``llm_active_sequences`` and the counters
``llm_tokens_total`` and ``llm_step_seconds_total`` (time in steps: its rate
is the share of time the model computes) show the batcher at work.

For debugging, ``debug_pause_file`` names a file (relative to the model's
directory, or absolute): while it exists no decode step starts, and the
model logs when it pauses (with the tokens the paused streams have so far)
and each cancellation it is told of. tests/integration/test_llm.py pauses
the batch this way to cancel a stream at a known token.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch import nn

from tritonpy.batching import ContinuousBatcher, Sequence

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
FIRST_TEXT, LAST_TEXT = 32, 126  # printable ASCII: what greedy decoding may pick


class Config:
    """The network's size: 3.2 M parameters. What a decode step costs at
    1, 16 and 64 streams: docs/llm-serving.md."""

    vocab = 256  # bytes
    dim = 256
    heads = 4
    layers = 4
    hidden = 1024
    context = 256  # prompt + generated tokens, per stream
    seed = 0


class TinyLM(nn.Module):
    """Pre-norm decoder-only transformer with learned positions and a KV
    cache of ``slots`` rows, one per stream."""

    def __init__(self, cfg: Config, slots: int) -> None:
        super().__init__()
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.context, cfg.dim)
        self.layers = [_Block(cfg) for _ in range(cfg.layers)]
        self.blocks = nn.ModuleList(self.layers)  # registers their weights
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        with torch.no_grad():  # the default init is too flat for clear greedy picks
            self.embed.weight.normal_(0, 1.0)
            self.pos.weight.normal_(0, 0.5)
            self.head.weight.normal_(0, 1.0 / math.sqrt(cfg.dim) * 4)
        hd = cfg.dim // cfg.heads
        shape = (cfg.layers, slots, cfg.heads, cfg.context, hd)
        self.keys = torch.zeros(shape)
        self.values = torch.zeros(shape)
        self.eval()

    def prefill(self, slots: list[int], prompts: list[list[int]]) -> torch.Tensor:
        """Fills the cache of ``slots[i]`` with ``prompts[i]``, all in one
        pass; logits of each prompt's next token, one row per prompt."""
        lengths = [len(p) for p in prompts]
        span = max(lengths)
        # Padding goes after each prompt: causal attention keeps it out of
        # the prompt's own positions, and decoding overwrites it.
        tokens = torch.tensor([p + [0] * (span - len(p)) for p in prompts])
        x = self.embed(tokens) + self.pos(torch.arange(span))
        rows = torch.tensor(slots)
        for i, block in enumerate(self.layers):
            x = block.prefill(x, self.keys[i], self.values[i], rows)
        last = x[torch.arange(len(prompts)), torch.tensor(lengths) - 1]
        return self._logits(last)

    def decode(self, slots: list[int], tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One step for many streams: token ``tokens[i]`` at ``positions[i]``
        of slot ``slots[i]``. Logits, one row per stream."""
        pos = torch.tensor(positions)
        x = self.embed(torch.tensor(tokens)) + self.pos(pos)
        rows = torch.tensor(slots)
        # Consecutive slots (the usual case: the batcher hands out the lowest
        # free ones) are read as a view, not gathered.
        lo = min(slots)
        read = slice(lo, lo + len(slots)) if slots == list(range(lo, lo + len(slots))) else rows
        # Attend to positions <= each stream's own; the cache is padded.
        span = max(positions) + 1
        allowed = (torch.arange(span)[None, :] <= pos[:, None])[:, None, None, :]
        for i, block in enumerate(self.layers):
            x = block.decode(x, self.keys[i], self.values[i], rows, read, pos, span, allowed)
        return self._logits(x)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x))[..., FIRST_TEXT : LAST_TEXT + 1]


class _Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.out = nn.Linear(cfg.dim, cfg.dim)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.up = nn.Linear(cfg.dim, cfg.hidden)
        self.down = nn.Linear(cfg.hidden, cfg.dim)

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # (..., dim) -> three (..., heads, head_dim)
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        shape = (*x.shape[:-1], self.heads, -1)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))

    def prefill(self, x, keys, values, rows) -> torch.Tensor:
        q, k, v = (t.transpose(1, 2) for t in self._split(x))  # (b, heads, n, hd)
        n = x.shape[1]
        keys[rows, :, :n] = k
        values[rows, :, :n] = v
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(x.shape))
        return self._mlp(x)

    def decode(self, x, keys, values, rows, read, pos, span, allowed) -> torch.Tensor:
        q, k, v = self._split(x)  # (b, heads, hd)
        keys[rows, :, pos] = k
        values[rows, :, pos] = v
        ks, vs = keys[read, :, :span], values[read, :, :span]  # (b, heads, span, hd)
        a = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, None], ks, vs, attn_mask=allowed
        )
        x = x + self.out(a.reshape(x.shape))
        return self._mlp(x)


class Stream:
    """What the batcher carries for one request: prompt, the token to feed
    next and the stream's position in its cache slot."""

    __slots__ = ("prompt", "last", "position")

    def __init__(self, prompt: list[int]) -> None:
        self.prompt = prompt
        self.last = 0
        self.position = 0


class Generator:
    """The model alone: TinyLM behind a step function for the batcher.
    Also what the tests and the bench drive without a server."""

    def __init__(self, slots: int, cfg: Config | None = None) -> None:
        self.cfg = cfg or Config()
        self.lm = TinyLM(self.cfg, slots)

    def fit(self, prompt: bytes, max_tokens: int) -> tuple[list[int], int]:
        """The prompt as tokens and how many tokens may follow it, both cut
        to the context."""
        tokens = list(prompt[-(self.cfg.context - 1) :]) or [ord(" ")]
        return tokens, max(0, min(max_tokens, self.cfg.context - len(tokens)))

    @torch.inference_mode()
    def step(self, batch: list[Sequence[Stream]]) -> list[int]:
        """One token for each sequence: new ones are prefilled together,
        the others decode together."""
        out: dict[int, int] = {}
        new = [seq for seq in batch if seq.steps == 0]
        old = [seq for seq in batch if seq.steps > 0]
        if new:
            logits = self.lm.prefill([q.slot for q in new], [q.data.prompt for q in new])
            picks = (logits.argmax(dim=-1) + FIRST_TEXT).tolist()
            for q, token in zip(new, picks, strict=True):
                q.data.position = len(q.data.prompt)
                out[q.slot] = q.data.last = token
        if old:
            logits = self.lm.decode(
                [q.slot for q in old], [q.data.last for q in old], [q.data.position for q in old]
            )
            picks = (logits.argmax(dim=-1) + FIRST_TEXT).tolist()
            for q, token in zip(old, picks, strict=True):
                q.data.position += 1
                out[q.slot] = q.data.last = token
        return [out[seq.slot] for seq in batch]

    @torch.inference_mode()
    def alone(self, prompt: bytes, max_tokens: int) -> tuple[bytes, list[float]]:
        """Greedy decoding of one prompt without batching (slot 0): the text
        and, per step, the margin between the best and second-best logit."""
        tokens, count = self.fit(prompt, max_tokens)
        text, margins = [], []
        logits = self.lm.prefill([0], [tokens])[0]
        position = len(tokens)
        for i in range(count):
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            token = FIRST_TEXT + int(logits.argmax())
            text.append(token)
            if i + 1 < count:
                logits = self.lm.decode([0], [token], [position])[0]
                position += 1
        return bytes(text), margins


def _scalar(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return default if t is None else t.as_numpy().reshape(-1)[0]


def _max_tokens(request) -> int:
    """``max_tokens``, else ``sampling_parameters``' (a JSON object whose
    values vllm_backend's clients send as numbers or strings), else 16."""
    given = _scalar(request, "max_tokens", None)
    if given is not None:
        return int(given)
    params = _scalar(request, "sampling_parameters", None)
    if params is None:
        return 16
    try:
        value = json.loads(params).get("max_tokens", 16)
        return int(value)
    except (ValueError, TypeError, AttributeError) as e:
        raise pb_utils.TritonModelException(
            f"llm: request '{request.request_id()}': input 'sampling_parameters' must be a "
            f"JSON object whose max_tokens is an integer: {e}"
        ) from None


def _text(token_bytes: bytes) -> pb_utils.InferenceResponse:
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("text_output", np.array([token_bytes], dtype=object))]
    )


class TritonPythonModel:
    def initialize(self, args):
        # One thread: a second instance, not a second thread, uses a second core.
        torch.set_num_threads(1)
        params = _parameters(args["model_config"])
        slots = int(params.get("max_active_sequences", 64))
        budget = params.get("cache_budget_tokens")
        pause = params.get("debug_pause_file")
        self.pause_file = Path(args["model_repository"], pause) if pause else None
        self.generator = Generator(slots)
        # The families are kept: on the official backend a metric stops
        # working once its family object is gone.
        labels = {"model": args["model_name"]}
        counter, gauge = pb_utils.MetricFamily.COUNTER, pb_utils.MetricFamily.GAUGE
        self.families = [
            pb_utils.MetricFamily("llm_active_sequences", "streams in the decode batch", gauge),
            pb_utils.MetricFamily("llm_tokens_total", "tokens generated", counter),
            pb_utils.MetricFamily("llm_step_seconds_total", "seconds in decode steps", counter),
        ]
        self.active, self.tokens, self.busy = (f.Metric(labels) for f in self.families)
        # Seconds in steps: added by the stepping thread, reported from the
        # loop (on_step), so a step costs no extra wake-up of the loop.
        self.step_seconds = self.step_seconds_reported = 0.0
        self.batcher = ContinuousBatcher(
            self._step,
            max_active=slots,
            cache_budget=int(budget) if budget else None,
            on_step=self._observe,
        )

    def _step(self, batch: list[Sequence[Stream]]) -> list[int]:
        if self.pause_file is not None and self.pause_file.exists():
            self._pause(batch)
        start = time.perf_counter()
        try:
            return self.generator.step(batch)
        finally:
            self.step_seconds += time.perf_counter() - start

    def _pause(self, batch: list[Sequence[Stream]]) -> None:
        """The stepping thread waits while ``debug_pause_file`` exists."""
        tokens = [seq.steps for seq in batch]
        pb_utils.Logger.log_info(f"llm: decode paused, streams at tokens {tokens}")
        while self.pause_file is not None and self.pause_file.exists():
            time.sleep(0.005)
        pb_utils.Logger.log_info("llm: decode resumed")

    def _observe(self, active: int, tokens: int) -> None:
        self.active.set(active)
        if tokens:
            self.tokens.increment(tokens)
        seconds = self.step_seconds
        if seconds > self.step_seconds_reported:
            self.busy.increment(seconds - self.step_seconds_reported)
            self.step_seconds_reported = seconds

    async def execute(self, requests):
        await asyncio.gather(*(self._generate(r) for r in requests))

    def finalize(self):
        self.batcher.close()

    async def _generate(self, request) -> None:
        sender = request.get_response_sender()
        if self.pause_file is not None:
            request.add_cancel_callback(_log_cancelled)
        prompt = _scalar(request, "text_input", b"")
        if isinstance(prompt, str):
            prompt = prompt.encode()
        stream = bool(_scalar(request, "stream", False))
        tokens, count = self.generator.fit(prompt, _max_tokens(request))
        text = bytearray()
        if not stream and not bool(_scalar(request, "exclude_input_in_output", True)):
            text += prompt
        sent = 0
        async for token in self.batcher.generate(
            Stream(tokens), steps=count, cost=len(tokens) + count, cancelled=request.is_cancelled
        ):
            sent += 1
            if stream:
                sender.send(_text(bytes([token])), flags=FINAL if sent == count else 0)
            else:
                text.append(token)
        if not stream:
            sender.send(_text(bytes(text)), flags=FINAL)
        elif sent < count or count == 0:
            sender.send(flags=FINAL)  # cancelled, or nothing to generate


def _log_cancelled(request) -> None:
    pb_utils.Logger.log_info(f"llm: request '{request.request_id()}' cancelled")


def _parameters(config_json: str) -> dict[str, str]:
    params = json.loads(config_json).get("parameters", {})
    return {k: v["string_value"] for k, v in params.items()}
