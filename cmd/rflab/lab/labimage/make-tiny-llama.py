#!/usr/bin/env python3
"""Writes the rayform lab's tiny Llama into the directory OUT (argv[1]): a
Hugging Face repository that vLLM loads and runs on a CPU in seconds.

- config.json: LlamaForCausalLM, 2 layers, hidden size 256, 4 attention
  heads of 64 (head_dim 64: vLLM's CPU attention has no kernel for 16) and 2
  key/value heads, so tensor parallel 2 splits it (2 heads and 1 KV head per
  rank), float32 (the CPU kernels of an AVX2 machine).
- model-0000N-of-00002.safetensors: seeded random weights (numpy's PCG64,
  seed 20261203, normal with standard deviation 0.02, norms 1), layer 0
  with the embeddings in the first shard, layer 1 with the final norm and
  lm_head in the second, and model.safetensors.index.json mapping every
  tensor to its shard, as transformers' save_pretrained shards a model.
- tokenizer.json: a byte-level BPE tokenizer trained here with the
  `tokenizers` package on the text below (vocabulary 512, <s> </s> <unk>
  <pad> first), so that text prompts work; tokenizer_config.json names it
  for transformers' PreTrainedTokenizerFast.

Every byte follows from this file and the pinned numpy, safetensors and
tokenizers (cmd/rflab/lab/labimage/vllm-lock.txt): engine/lab runs it once per
lab cache (cmd/rflab/lab/tinyllama.go) and the lab hub publishes the result as
rayform-lab/tiny-llama. The weights are random: the model answers every
prompt, with text that means nothing.
"""

import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SEED = 20261203
HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 256, 4, 2, 64
INTERMEDIATE, LAYERS, VOCAB, POSITIONS = 512, 2, 512, 4096
SPECIAL = ["<s>", "</s>", "<unk>", "<pad>"]

CORPUS = """\
The quick brown fox jumps over the lazy dog. A cluster of two nodes serves a
language model over a fabric network. Ray places one worker on each node, and
the workers talk to each other through Gloo. The head node runs the API server
and answers completions. Once upon a time there was a small model that lived in
a lab. It had two layers, four heads and a vocabulary of five hundred and twelve
tokens. Every morning it read the same sentences and every evening it wrote new
ones. The weights were random, so what it wrote meant nothing, but it always
answered. San Francisco, Paris, Tokyo and Berlin are cities. One, two, three,
four, five, six, seven, eight, nine, ten. Hello, world! How are you today? I am
fine, thank you. What is the capital of France? The capital of France is Paris.
rayform plans, applies and destroys a deployment: nodes, networks, a Ray
cluster, a model and a vLLM server.
"""


def tokenizer():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 8, trainer=trainer, length=8)
    return tok


def weights(vocab):
    rng = np.random.Generator(np.random.PCG64(SEED))

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    shards = [{}, {}]
    shards[0]["model.embed_tokens.weight"] = normal(vocab, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        s = shards[min(i, 1)]
        s[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        s[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        s[p + "self_attn.q_proj.weight"] = normal(HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.k_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.v_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        s[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HEADS * HEAD_DIM)
        s[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        s[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        s[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE)
    shards[1]["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    shards[1]["lm_head.weight"] = normal(vocab, HIDDEN)
    return shards


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def main(out):
    os.makedirs(out, exist_ok=True)
    tok = tokenizer()
    vocab = tok.get_vocab_size()
    tok.save(os.path.join(out, "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    write_json(
        os.path.join(out, "tokenizer_config.json"),
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "model_max_length": POSITIONS,
            "clean_up_tokenization_spaces": False,
        },
    )
    write_json(
        os.path.join(out, "config.json"),
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE,
            "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS,
            "head_dim": HEAD_DIM,
            "num_hidden_layers": LAYERS,
            "max_position_embeddings": POSITIONS,
            "vocab_size": vocab,
            "hidden_act": "silu",
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
            "bos_token_id": ids["<s>"],
            "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"],
        },
    )
    write_json(
        os.path.join(out, "generation_config.json"),
        {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]},
    )
    shards = weights(vocab)
    weight_map, total = {}, 0
    for n, tensors in enumerate(shards, 1):
        name = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        for k, v in tensors.items():
            weight_map[k] = name
            total += v.nbytes
    write_json(
        os.path.join(out, "model.safetensors.index.json"),
        {"metadata": {"total_size": total}, "weight_map": weight_map},
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make-tiny-llama.py OUT")
    main(sys.argv[1])
