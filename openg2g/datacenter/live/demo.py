"""A real inference server on this machine, for trying a live site without GPUs.

:func:`build_model` makes a small causal language model from nothing downloaded: a byte-level
BPE tokenizer trained on openg2g's bundled prompts and a Llama-layout model with random weights
(seeded), saved as a transformers model folder. :class:`DemoServer` serves it with
``transformers serve`` (transformers' own OpenAI-compatible server, with continuous batching) on
the CPU, on loopback.
Its answers are gibberish; its streaming, batching and latencies are a real server's.

Needs the ``live`` extra (transformers with its serving dependencies) and PyTorch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from openg2g.core.errors import G2GError
from openg2g.datacenter.live.load import LiveServerError, ReplicaLoad, served_models

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["TINY", "TINY_MODEL", "DemoServer", "Layout", "build_model", "eight_b_layout", "free_port"]

TINY_MODEL = "openg2g-tiny"
"""The tiny model's folder name, which is also the name its server serves it under."""

_MARK = "openg2g-tiny-v1"
"""Written beside the model once it is complete, so a folder half-written by a crash is rebuilt."""


def _need_transformers() -> None:
    missing = [name for name in ("torch", "transformers", "tokenizers") if not _importable(name)]
    if missing:
        raise G2GError(
            f"the live demo needs {', '.join(missing)}: pip install 'openg2g-cosim[live]' and a PyTorch build "
            "(CPU: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
        )


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@dataclass(frozen=True)
class Layout:
    """A Llama-layout model's widths and depth."""

    hidden: int = 64
    intermediate: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2


TINY = Layout()
"""The demo's model: about 0.1 M parameters, served on a CPU."""


def eight_b_layout(layers: int = 4) -> Layout:
    """Llama-3.1-8B's widths (hidden 4096, MLP 14336, 32 heads, 8 KV heads) with ``layers`` of its
    32 layers: a real model's per-layer work at a size that fits and starts fast."""
    return Layout(hidden=4096, intermediate=14336, layers=layers, heads=32, kv_heads=8)


def build_model(folder: Path, seed: int = 0, name: str = TINY_MODEL, layout: Layout = TINY) -> Path:
    """A model in ``folder / name`` (built once; reused when complete), nothing downloaded.

    A tokenizer of 512 byte-level BPE tokens trained on the bundled prompts, and a Llama of
    ``layout`` (by default 2 layers of hidden size 64) whose weights are drawn from ``seed``.
    """
    _need_transformers()
    out = folder / name
    if (out / _MARK).exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from openg2g.datacenter.live.site import load_prompts

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(load_prompts("bundled", folder), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=layout.hidden,
        intermediate_size=layout.intermediate,
        num_hidden_layers=layout.layers,
        num_attention_heads=layout.heads,
        num_key_value_heads=layout.kv_heads,
        max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    (out / _MARK).write_text("complete\n", encoding="utf-8")
    return out


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DemoServer:
    """``transformers serve`` of a locally built model (:func:`build_model`) on
    ``127.0.0.1:port``, offline; a context manager that stops it (and waits for it) on the way out.

    :param folder: where the model is (built there if needed) and the server's log goes.
    :param port: the port; 0 picks a free one.
    :param start_timeout_s: how long the server may take to list the model and stream its first
        request (s).
    :param name: the model's folder name, which the server serves it under.
    :param layout: the model's layout.
    :param device: where it runs (``cpu``, ``cuda``, ``cuda:1``).
    """

    def __init__(
        self,
        folder: Path,
        port: int = 0,
        start_timeout_s: float = 180.0,
        name: str = TINY_MODEL,
        layout: Layout = TINY,
        device: str = "cpu",
    ):
        self.folder = folder
        self.name = name
        self.layout = layout
        self.device = device
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self._timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        build_model(self.folder, name=self.name, layout=self.layout)
        cli = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
        if cli is None:
            raise G2GError("the transformers command is not installed: pip install 'openg2g-cosim[live]'")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
        # continuous batching: the requests in flight run as one batch, as vLLM's do (without it
        # each request generates alone in its own thread, and on a CPU they starve each other)
        command = [cli, "serve", self.name, "--continuous-batching", "--device", self.device]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with open(self.log, "wb") as log:
            # the model folder's name is the model's id: the server runs where the folder is
            self.process = subprocess.Popen(command, cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self._timeout_s
        try:
            while True:
                if self.process.poll() is not None:
                    tail = self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
                    raise G2GError(f"transformers serve exited with status {self.process.returncode}:\n{tail}")
                with contextlib.suppress(LiveServerError):
                    if self.name in served_models(self.url, timeout_s=2.0):
                        self._first_request(deadline)
                        return self
                if time.monotonic() > deadline:
                    raise G2GError(
                        f"transformers serve did not list {self.name} within {self._timeout_s:g} s ({self.log})"
                    )
                time.sleep(0.25)
        except BaseException:
            self.stop()
            raise

    def _first_request(self, deadline: float) -> None:
        """Stream one request: the server's first batch sets up its cache (20-40 s on a small
        CPU), which would otherwise fall in a run's warm-up."""
        load = ReplicaLoad(self.url, self.name, lambda: "Hello", "chat", 8, 1, self._timeout_s)
        load.start(1)
        try:
            while len(load.tokens) == 0:
                if load.error is not None:
                    raise G2GError(f"transformers serve at {self.url} failed its first request: {load.error[1]}")
                if time.monotonic() > deadline:
                    raise G2GError(f"transformers serve streamed nothing within {self._timeout_s:g} s ({self.log})")
                time.sleep(0.1)
        finally:
            load.stop()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
