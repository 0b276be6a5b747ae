"""A real inference server on this machine, for trying a live site without GPUs.

:func:`build_tiny_model` makes a small causal language model from nothing downloaded: a byte-level
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
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from openg2g.core.errors import G2GError
from openg2g.datacenter.live.load import LiveServerError, served_models

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["TINY_MODEL", "DemoServer", "build_tiny_model", "free_port"]

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


def build_tiny_model(folder: Path, seed: int = 0) -> Path:
    """The tiny model in ``folder / TINY_MODEL`` (built once; reused when complete).

    A tokenizer of 512 byte-level BPE tokens trained on the bundled prompts, and a 2-layer Llama
    with hidden size 64 (about 0.1 M parameters) whose weights are drawn from ``seed``.
    """
    _need_transformers()
    out = folder / TINY_MODEL
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
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
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
    """``transformers serve`` of the tiny model on ``127.0.0.1:port``, on the CPU, offline; a
    context manager that stops it (and waits for it) on the way out.

    :param folder: where the model is (built there if needed) and the server's log goes.
    :param port: the port; 0 picks a free one.
    :param start_timeout_s: how long the server may take to list the model (s).
    """

    def __init__(self, folder: Path, port: int = 0, start_timeout_s: float = 120.0):
        self.folder = folder
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self._timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        build_tiny_model(self.folder)
        cli = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
        if cli is None:
            raise G2GError("the transformers command is not installed: pip install 'openg2g-cosim[live]'")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
        # continuous batching: the requests in flight run as one batch, as vLLM's do (without it
        # each request generates alone in its own thread, and on a CPU they starve each other)
        command = [cli, "serve", TINY_MODEL, "--continuous-batching", "--device", "cpu"]
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
                    if TINY_MODEL in served_models(self.url, timeout_s=2.0):
                        return self
                if time.monotonic() > deadline:
                    raise G2GError(f"transformers serve did not list {TINY_MODEL} within {self._timeout_s:g} s ({self.log})")
                time.sleep(0.25)
        except BaseException:
            self.stop()
            raise

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

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
