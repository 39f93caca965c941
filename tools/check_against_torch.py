"""Check mha_lists against PyTorch, in float64, on the running example and its variants.

    pip install torch          # not a dependency of the project: this check is optional
    python tools/check_against_torch.py

For each case it runs ``torch.nn.MultiheadAttention`` (self-attention cases)
and ``torch.nn.functional.scaled_dot_product_attention`` (every case) with the
same weights, and prints the largest absolute difference and whether every
number agrees when printed at 4 decimals, as the notebooks print them.
PyTorch's Linear stores weights as (d_out, d_in), so each of ours is transposed.
Then it checks ``layer_norm`` against ``torch.nn.functional.layer_norm``, the
survivors of ``dropout`` against ``torch.nn.functional.dropout``, and the bounds
of ``mha_lists.torch_init`` against freshly initialised PyTorch layers.
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
from mha_lists.block import dropout, layer_norm
from mha_lists.torch_init import linear_bound, mha_in_proj_bound, xavier_uniform_bound
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
    ok &= check_block_and_init(ex)
    print("all within 1e-12:", ok)
    return 0 if ok else 1


def check_block_and_init(ex):
    """LayerNorm and dropout (mha_lists.block), and PyTorch's default bounds (mha_lists.torch_init)."""
    ok = True
    r = [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(ex.x, multi_head_attention(ex.x, ex.weights))]
    d = len(r[0])
    rng = derive_rng(5, "torch-check/layer_norm")
    gain, bias = [rng.gauss(1, 0.5) for _ in range(d)], [rng.gauss(0, 0.5) for _ in range(d)]
    for name, x, g, b in (("x + MHA(x)", r, None, None), ("x, gain and bias", ex.x, gain, bias)):
        theirs = F.layer_norm(t(x), (d,), None if g is None else t(g), None if b is None else t(b), eps=1e-5)
        ok &= compare(f"layer_norm({name}) vs F.layer_norm", layer_norm(x, g, b), theirs)
    # dropout: different random numbers, but every survivor must be a / (1 - p), as in PyTorch
    A = [[0.1 * (i + 1) * (j + 1) for j in range(8)] for i in range(8)]
    for p in (0.1, 0.5):
        ours = dropout(A, p, rng=derive_rng(0, "torch-check/dropout"))
        torch.manual_seed(0)
        theirs = F.dropout(t(A), p, training=True).tolist()
        survivors = [(a, o, th) for ra, ro, rt in zip(A, ours, theirs) for a, o, th in zip(ra, ro, rt)]
        diff = max(abs(o - th) for a, o, th in survivors if o != 0.0 and th != 0.0)
        print(f"{'dropout survivors vs F.dropout survivors, p = ' + str(p):55s} max |diff| = {diff:.1e}")
        ok &= diff <= 1e-12 and F.dropout(t(A), p, training=False).tolist() == A == dropout(A, 0.0, rng=derive_rng(0, "x"))
    torch.manual_seed(0)
    for E, h in ((16, 2), (64, 4)):
        mha = torch.nn.MultiheadAttention(E, h)
        top_in, top_out = mha.in_proj_weight.abs().max().item(), mha.out_proj.weight.abs().max().item()
        fine = (0.9 * mha_in_proj_bound(E) < top_in <= mha_in_proj_bound(E) < xavier_uniform_bound(E, E)
                and 0.9 * linear_bound(E) < top_out <= linear_bound(E)
                and mha.in_proj_bias.abs().max().item() == 0 == mha.out_proj.bias.abs().max().item())
        print(f"{'nn.MultiheadAttention(' + str(E) + ', ' + str(h) + ') init within torch_init bounds':55s} "
              f"in_proj max {top_in:.4f} <= {mha_in_proj_bound(E):.4f}, out_proj max {top_out:.4f} <= {linear_bound(E):.4f}: {fine}")
        ok &= fine
    return ok


if __name__ == "__main__":
    sys.exit(main())
