"""Check mha_lists against PyTorch, in float64, on the running example and its variants.

    pip install torch          # not a dependency of the project: this check is optional
    python tools/check_against_torch.py

For each case it runs ``torch.nn.MultiheadAttention`` (self-attention cases)
and ``torch.nn.functional.scaled_dot_product_attention`` (every case) with the
same weights, and prints the largest absolute difference and whether every
number agrees when printed at 4 decimals, as the notebooks print them.
PyTorch's Linear stores weights as (d_out, d_in), so each of ours is transposed.
Exits 1 if any difference exceeds 1e-12.
"""

import math
import sys

import torch
import torch.nn.functional as F

from mha_lists import (causal_mask, concat_heads, init_mha_weights, multi_head_attention,
                       padding_mask, running_example)
from mha_lists.display import format_number
from mha_lists.multi_head import kv_head_for
from mha_lists.weights import derive_rng

torch.set_default_dtype(torch.float64)


def t(M):
    return torch.tensor(M, dtype=torch.float64)


def with_biases(w, seed=5):
    rng = derive_rng(seed, "torch-check/biases")
    draw = lambda n: [rng.gauss(0, 0.5) for _ in range(n)]  # noqa: E731
    return w._replace(b_Q=[draw(len(M[0])) for M in w.W_Q], b_K=[draw(len(M[0])) for M in w.W_K],
                      b_V=[draw(len(M[0])) for M in w.W_V], b_O=draw(len(w.W_O[0])))


def torch_sdpa(x, w, context=None, mask=None):
    """Per-head projections, F.scaled_dot_product_attention, concat, W_O."""
    src = t(x if context is None else context)
    X = t(x)
    h, g = len(w.W_Q), len(w.W_K)
    zero = lambda M: [0.0] * len(M[0])  # noqa: E731
    b_Q, b_K, b_V = (w.b_Q or [zero(M) for M in w.W_Q]), (w.b_K or [zero(M) for M in w.W_K]), (w.b_V or [zero(M) for M in w.W_V])
    heads = []
    for head in range(h):
        kv = kv_head_for(head, h, g)
        Q = X @ t(w.W_Q[head]) + t(b_Q[head])
        K = src @ t(w.W_K[kv]) + t(b_K[kv])
        V = src @ t(w.W_V[kv]) + t(b_V[kv])
        m = None if mask is None else torch.tensor(mask)
        heads.append(F.scaled_dot_product_attention(Q[None], K[None], V[None], attn_mask=m)[0])
    out = torch.cat(heads, dim=-1) @ t(w.W_O)
    return out + (t(w.b_O) if w.b_O is not None else 0)


def torch_nn_mha(x, w, mask=None):
    """torch.nn.MultiheadAttention with our weights (standard layout only)."""
    d_model, h = len(x[0]), len(w.W_Q)
    mha = torch.nn.MultiheadAttention(d_model, h, bias=w.b_Q is not None, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([t(concat_heads(w.W_Q)).T, t(concat_heads(w.W_K)).T,
                                            t(concat_heads(w.W_V)).T]))
        mha.out_proj.weight.copy_(t(w.W_O).T)
        if w.b_Q is not None:
            mha.in_proj_bias.copy_(torch.cat([t(b) for b in w.b_Q + w.b_K + w.b_V]))
            mha.out_proj.bias.copy_(t(w.b_O))
    # nn.MultiheadAttention's boolean attn_mask means True = masked: the opposite of ours.
    attn_mask = None if mask is None else ~torch.tensor(mask)
    X = t(x)[None]
    out, _ = mha(X, X, X, attn_mask=attn_mask, need_weights=False)
    return out[0]


def compare(name, ours, theirs):
    diff = max(abs(a - b) for row, trow in zip(ours, theirs.tolist()) for a, b in zip(row, trow))
    same_print = all(format_number(a) == format_number(b) for row, trow in zip(ours, theirs.tolist())
                     for a, b in zip(row, trow))
    print(f"{name:55s} max |diff| = {diff:.1e}   same at 4 decimals: {same_print}")
    return diff <= 1e-12


def main():
    ex = running_example()
    padded = running_example(sentence="<BOS> I like <EOS> <PAD>")
    ctx = running_example(sentence="<BOS> transformers like I <EOS>", seed=7).x
    gqa = init_mha_weights(16, 8, seed=3, num_kv_heads=2)
    biased = with_biases(init_mha_weights(16, 2, seed=42, bias=True))
    cases = [
        ("running example", ex.x, ex.weights, None, None, True),
        ("running example, causal mask", ex.x, ex.weights, None, causal_mask(5), True),
        ("running example, with biases", ex.x, biased, None, None, True),
        ("padded sentence, padding mask", padded.x, ex.weights, None, padding_mask(padded.ids, 0), True),
        ("cross-attention, 3 queries over 5 keys", ex.x[:3], ex.weights, ctx, None, False),
        ("GQA: 8 query heads, 2 key/value heads", ex.x, gqa, None, causal_mask(5), False),
        ("d_model 64, 4 heads, xavier_normal", [[v for _ in range(4) for v in r] for r in ex.x],
         init_mha_weights(64, 4, seed=1, init="xavier_normal"), None, None, True),
    ]
    ok = True
    for name, x, w, context, mask, nn_too in cases:
        ours = multi_head_attention(x, w, context=context, mask=mask)
        ok &= compare(f"{name} vs SDPA", ours, torch_sdpa(x, w, context, mask))
        if nn_too:
            ok &= compare(f"{name} vs nn.MultiheadAttention", ours, torch_nn_mha(x, w, mask))
    print("all within 1e-12:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
