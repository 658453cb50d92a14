"""LoRA dropout as Twill draws it (support/Dropout.h), for PEFT.

Twill keeps feature f of the token at index t of micro-batch m (t = row x
seq_len + position) when the top 24 bits of Philox4x32-10 word f % 4, of
counter (f // 4, t, m low, m high) under key (seed, stream), are at least
rate x 2^24; kept values are scaled by 1 / (1 - rate). The stream is
FNV-1a (32 bits) of the adapted module's name. This is an independent
implementation (numpy), checked against Random123's known answers, and
`install` puts it in place of every PEFT lora_dropout of a model.
"""
import numpy as np
import torch

MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Philox4x32-10 of arrays: counter is 4 arrays of uint32 values, key 2
    integers; returns 4 arrays of words."""
    c = [np.asarray(word, dtype=np.uint64) for word in counter]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for round_ in range(10):
        if round_:
            k0 = (k0 + np.uint64(0x9E3779B9)) & MASK32
            k1 = (k1 + np.uint64(0xBB67AE85)) & MASK32
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [((p1 >> np.uint64(32)) ^ c[1] ^ k0) & MASK32, p1 & MASK32,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & MASK32, p0 & MASK32]
    return c


assert [int(w[0]) for w in philox4x32_10([[0]] * 4, (0, 0))] == [
    0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
assert [int(w[0]) for w in philox4x32_10(
    [[0x243F6A88], [0x85A308D3], [0x13198A2E], [0x03707344]],
    (0xA4093822, 0x299F31D0))] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420,
                                   0x24126EA1]


def stream(name):
    value = 2166136261
    for byte in name.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def keep_mask(seed, stream_id, micro_batch, tokens, features, rate):
    """Bool [len(tokens), features]: which elements the mask keeps."""
    tokens = np.asarray(tokens, dtype=np.uint64).reshape(-1, 1)
    feature = np.arange(features, dtype=np.uint64).reshape(1, -1)
    shape = (tokens.shape[0], features)
    words = philox4x32_10(
        [np.broadcast_to(feature >> np.uint64(2), shape),
         np.broadcast_to(tokens, shape),
         np.full(shape, micro_batch & 0xFFFFFFFF, dtype=np.uint64),
         np.full(shape, micro_batch >> 32, dtype=np.uint64)],
        (seed & 0xFFFFFFFF, stream_id))
    lane = np.broadcast_to(feature & np.uint64(3), shape)
    word = np.choose(lane.astype(np.int64), words)
    threshold = int(rate * (1 << 24) + 0.5)
    return (word >> np.uint64(8)) >= np.uint64(threshold)


class Masks:
    """What the masked dropouts read: whether to drop, and the micro-batch
    and token indices of the positions the model is called on."""

    def __init__(self, seed, rate):
        self.seed, self.rate = seed, rate
        self.enabled, self.micro_batch, self.tokens = False, 0, None

    def at(self, micro_batch, tokens):
        self.enabled, self.micro_batch = True, micro_batch
        self.tokens = list(tokens)
        return self


class MaskedDropout(torch.nn.Module):
    def __init__(self, masks, name):
        super().__init__()
        self.masks, self.stream = masks, stream(name)

    def forward(self, x):
        masks = self.masks
        if not masks.enabled:
            return x
        keep = keep_mask(masks.seed, self.stream, masks.micro_batch,
                         masks.tokens, x.shape[-1], masks.rate)
        keep = torch.from_numpy(keep).reshape(x.shape).to(x.dtype)
        return x * keep * (1.0 / (1.0 - masks.rate))


def install(model, seed, rate):
    """Replaces every lora_dropout of a PEFT model; returns the Masks they
    read (disabled until `at`)."""
    masks = Masks(seed, rate)
    for name, module in model.named_modules():
        if hasattr(module, "lora_dropout"):
            twill_name = name.removeprefix("base_model.model.")
            for adapter in module.lora_dropout:
                module.lora_dropout[adapter] = MaskedDropout(masks, twill_name)
    return masks
