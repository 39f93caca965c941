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
of ``mha_lists.teaching.torch_init`` against freshly initialised PyTorch layers.

Then the backward pass: for masks, biases, cross-attention, grouped- and
multi-query heads, d_v != d_k and a custom scale, PyTorch's autograd
differentiates sum(output * grad_output) with respect to x, the context and
every weight and bias, and each gradient is compared with
``multi_head_attention_backward``.

Last, the two-layer attention-only model of ``mha_lists.teaching.induction``
(notebooks 18 and 19): PyTorch autograd differentiates its cross-entropy on the
repeated half through both layers, the residual stream, the positions and the
unembedding, and every gradient is compared with ``model_gradients``.

Exits 1 if any output differs by more than 1e-12, any gradient of one layer by
more than 1e-9, or any gradient of the two-layer model by more than 1e-12.
"""

import math
import sys

import torch
import torch.nn.functional as F

from mha_lists import (causal_mask, concat_heads, init_mha_weights, multi_head_attention,
                       padding_mask, running_example)
from mha_lists.teaching.display import format_number
from mha_lists.core.gradients import multi_head_attention_backward
from mha_lists.teaching.weights import kv_head_for
from mha_lists.teaching.block import BlockWeights, dropout, encoder_layer, layer_norm
from mha_lists.teaching import induction
from mha_lists.teaching.torch_init import linear_bound, mha_in_proj_bound, xavier_uniform_bound
from mha_lists.teaching.weights import derive_rng

torch.set_default_dtype(torch.float64)


def t(M):
    return torch.tensor(M, dtype=torch.float64)


def with_biases(w, seed=5):
    rng = derive_rng(seed, "torch-check/biases")
    draw = lambda n: [rng.gauss(0, 0.5) for _ in range(n)]  # noqa: E731
    return w._replace(b_Q=[draw(len(M[0])) for M in w.W_Q], b_K=[draw(len(M[0])) for M in w.W_K],
                      b_V=[draw(len(M[0])) for M in w.W_V], b_O=draw(len(w.W_O[0])))


def torch_sdpa(x, w, context=None, mask=None, scale=None):
    """Per-head projections, F.scaled_dot_product_attention, concat, W_O.

    x, context and the weights may be lists or torch tensors (leaves that need gradients).
    """
    X = t(x) if isinstance(x, list) else x
    src = X if context is None else (t(context) if isinstance(context, list) else context)
    h, g = len(w.W_Q), len(w.W_K)
    zero = lambda M: [0.0] * len(M[0])  # noqa: E731
    b_Q, b_K, b_V = (w.b_Q or [zero(M) for M in w.W_Q]), (w.b_K or [zero(M) for M in w.W_K]), (w.b_V or [zero(M) for M in w.W_V])
    T_ = lambda v: t(v) if isinstance(v, list) else v  # noqa: E731
    heads = []
    for head in range(h):
        kv = kv_head_for(head, h, g)
        Q = X @ T_(w.W_Q[head]) + T_(b_Q[head])
        K = src @ T_(w.W_K[kv]) + T_(b_K[kv])
        V = src @ T_(w.W_V[kv]) + T_(b_V[kv])
        m = None if mask is None else torch.tensor(mask)
        heads.append(F.scaled_dot_product_attention(Q[None], K[None], V[None], attn_mask=m, scale=scale)[0])
    out = torch.cat(heads, dim=-1) @ T_(w.W_O)
    return out + (T_(w.b_O) if w.b_O is not None else 0)


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


def leaf(v):
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)


def torch_gradients(x, w, grad_output, context=None, mask=None, scale=None):
    """PyTorch autograd's gradients of sum(output * grad_output), as lists shaped like ours."""
    X = leaf(x)
    C = None if context is None else leaf(context)
    tw = w._replace(**{name: [leaf(M) for M in getattr(w, name)] for name in ("W_Q", "W_K", "W_V")},
                    W_O=leaf(w.W_O))
    for name in ("b_Q", "b_K", "b_V"):
        if getattr(w, name) is not None:
            tw = tw._replace(**{name: [leaf(b) for b in getattr(w, name)]})
    if w.b_O is not None:
        tw = tw._replace(b_O=leaf(w.b_O))
    out = torch_sdpa(X, tw, C, mask, scale)
    (out * t(grad_output)).sum().backward()
    grads = {"x": X.grad.tolist(), "context": None if C is None else C.grad.tolist(), "W_O": tw.W_O.grad.tolist()}
    for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"):
        grads[name] = None if getattr(tw, name) is None else [p.grad.tolist() for p in getattr(tw, name)]
    grads["b_O"] = None if w.b_O is None else tw.b_O.grad.tolist()
    return grads


def flatten(value):
    """Every number in a nested list, in order."""
    if isinstance(value, list):
        return [v for item in value for v in flatten(item)]
    return [value]


def compare_gradients(name, ours, theirs):
    worst, fields = 0.0, []
    for field in ours._fields:
        a, b = getattr(ours, field), theirs.get(field)  # PyTorch's layer has no separate input for the values
        if (a is None) != (b is None):
            print(f"{name}: gradient {field} is {a is None and 'missing' or 'extra'} in ours")
            return False, math.inf
        if a is None:
            continue
        fa, fb = flatten(a), flatten(b)
        if len(fa) != len(fb):
            print(f"{name}: gradient {field} has {len(fa)} numbers in ours, {len(fb)} in PyTorch's")
            return False, math.inf
        worst = max(worst, max(abs(u - v) for u, v in zip(fa, fb)))
        fields.append(field)
    print(f"{name:55s} max |diff| = {worst:.1e}   over {', '.join(fields)}")
    return worst <= 1e-9, worst


def gradient_cases():
    """(name, x, weights, context, mask, scale, grad_output) for the backward check."""
    ex = running_example()
    padded = running_example(sentence="<BOS> I like <EOS> <PAD>")
    ctx = running_example(sentence="<BOS> transformers like I <EOS>", seed=7).x
    rng = derive_rng(11, "torch-check/grad_output")
    G = lambda rows, cols=16: [[rng.gauss(0, 1) for _ in range(cols)] for _ in range(rows)]  # noqa: E731
    random_mask = [[rng.random() < 0.6 or i == j for j in range(5)] for i in range(3)]
    return [
        ("running example", ex.x, ex.weights, None, None, None, G(5)),
        ("causal mask, biases", ex.x, with_biases(init_mha_weights(16, 2, seed=42, bias=True)), None,
         causal_mask(5), None, G(5)),
        ("padding mask", padded.x, ex.weights, None, padding_mask(padded.ids, 0), None, G(5)),
        ("cross-attention: 3 queries, 5 keys, context grads", ex.x[:3], ex.weights, ctx, None, None, G(3)),
        ("cross-attention, random mask, biases", ex.x[:3], with_biases(init_mha_weights(16, 4, seed=2, bias=True)),
         ctx, random_mask, None, G(3)),
        ("GQA: 8 query heads, 2 kv heads, causal", ex.x, init_mha_weights(16, 8, seed=3, num_kv_heads=2), None,
         causal_mask(5), None, G(5)),
        ("MQA: 4 query heads, 1 kv head, biases", ex.x,
         with_biases(init_mha_weights(16, 4, seed=4, num_kv_heads=1, bias=True)), None, None, None, G(5)),
        ("GQA cross-attention, d_k 3, d_v 5, biases", ex.x[:3],
         with_biases(init_mha_weights(16, 4, seed=5, num_kv_heads=2, d_k=3, d_v=5, bias=True)), ctx,
         random_mask, None, G(3)),
        ("d_v != d_k (6 and 2), scale 0.3, causal", ex.x,
         init_mha_weights(16, 2, seed=6, d_k=6, d_v=2), None, causal_mask(5), 0.3, G(5)),
    ]


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
    # Notebook 08, Step 6: a row the mask leaves no key gets NaN from torch.softmax (ours raises instead).
    masked_out = torch.softmax(torch.tensor([-math.inf] * 3, dtype=torch.float64), dim=-1)
    nan_row = bool(torch.isnan(masked_out).all())
    print(f"{'torch.softmax of a fully masked row is all NaN (08)':55s} {nan_row}")
    ok &= nan_row
    print("all within 1e-12:", ok)
    ok &= check_encoder_layer()

    print("gradients of sum(output * grad_output): ours against PyTorch autograd")
    grads_ok, worst = True, 0.0
    for name, x, w, context, mask, scale, G in gradient_cases():
        ours = multi_head_attention_backward(x, w, G, context=context, mask=mask, scale=scale)
        case_ok, case_worst = compare_gradients(name, ours, torch_gradients(x, w, G, context, mask, scale))
        grads_ok &= case_ok
        worst = max(worst, case_worst)
    print(f"all gradients within 1e-9: {grads_ok} (largest difference {worst:.1e})")
    induction_ok = check_induction()
    return 0 if ok and grads_ok and induction_ok else 1


def torch_encoder_layer(x, w, *, mask, norm_first, activation):
    """nn.TransformerEncoderLayer (batch_first, dropout 0) with our BlockWeights, on x (T, d_model)."""
    d_model, h, d_ff = len(x[0]), len(w.attention.W_Q), len(w.W_1[0])
    layer = torch.nn.TransformerEncoderLayer(d_model, h, dim_feedforward=d_ff, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    a = w.attention
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([t(concat_heads(a.W_Q)).T, t(concat_heads(a.W_K)).T,
                                                        t(concat_heads(a.W_V)).T]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([t(b) for b in a.b_Q + a.b_K + a.b_V]))
        layer.self_attn.out_proj.weight.copy_(t(a.W_O).T)
        layer.self_attn.out_proj.bias.copy_(t(a.b_O))
        for lin, W, b in ((layer.linear1, w.W_1, w.b_1), (layer.linear2, w.W_2, w.b_2)):
            lin.weight.copy_(t(W).T)
            lin.bias.copy_(t(b))
        for norm, g, b in ((layer.norm1, w.gain_1, w.bias_1), (layer.norm2, w.gain_2, w.bias_2)):
            norm.weight.copy_(t(g))
            norm.bias.copy_(t(b))
    layer.train()  # dropout is 0; training mode keeps PyTorch off its fused inference path
    src_mask = None if mask is None else ~torch.tensor(mask)
    with torch.no_grad():
        return layer(t([x]), src_mask=src_mask)[0]


def check_encoder_layer():
    """encoder_layer against nn.TransformerEncoderLayer: relu and gelu, post-norm and pre-norm, with and without
    the causal mask, several sizes; every weight, bias, gain drawn at random (not PyTorch's initial values)."""
    print("encoder_layer vs nn.TransformerEncoderLayer (batch_first, dropout 0)")
    ok, worst = True, 0.0
    for n, (d_model, h, d_ff, T) in enumerate([(8, 2, 16, 5), (12, 3, 7, 4), (16, 4, 32, 6), (6, 1, 5, 1)]):
        rng = derive_rng(n, "torch-check/encoder_layer")
        draw = lambda rows, cols: [[rng.gauss(0, 0.5) for _ in range(cols)] for _ in range(rows)]  # noqa: E731
        row = lambda d, mean=0.0: [mean + rng.gauss(0, 0.3) for _ in range(d)]  # noqa: E731
        attention = with_biases(init_mha_weights(d_model, h, seed=n, bias=True), seed=n)
        w = BlockWeights(attention, draw(d_model, d_ff), row(d_ff), draw(d_ff, d_model), row(d_model),
                         row(d_model, 1.0), row(d_model), row(d_model, 1.0), row(d_model))
        x = draw(T, d_model)
        for activation in ("relu", "gelu"):
            for norm_first in (False, True):
                for mask in (None, causal_mask(T)):
                    ours = encoder_layer(x, w, mask=mask, norm_first=norm_first, activation=activation)
                    theirs = torch_encoder_layer(x, w, mask=mask, norm_first=norm_first, activation=activation)
                    diff = (t(ours) - theirs).abs().max().item()
                    worst = max(worst, diff)
                    ok &= diff <= 1e-9
    print(f"  16 configurations at each of 4 sizes: largest difference {worst:.1e}; all within 1e-9: {ok}")
    return ok


def torch_induction_loss(params, model, seq):
    """The loss of ``induction.model_gradients`` written with torch: x_0 = E_tok[ids]; per layer
    Q, K from x (+ E_pos in layer 0), V from x, causal softmax, x += concat W_O; logits = x W_U."""
    E_tok, E_pos, layers, W_U = params
    L = len(seq) // 2
    ids, T = seq[:2 * L - 1], 2 * L - 1
    x = E_tok[torch.tensor(ids)]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for n, (W_Q, W_K, W_V, W_O) in enumerate(layers):
        qk = x + E_pos[:T] if n == 0 else x
        heads = []
        for Wq, Wk, Wv in zip(W_Q, W_K, W_V):
            scale = model.scale if model.scale is not None else 1 / math.sqrt(Wq.shape[1])
            S = ((qk @ Wq) @ (qk @ Wk).T * scale).masked_fill(future, float("-inf"))
            heads.append(torch.softmax(S, dim=-1) @ (x @ Wv))
        x = x + torch.cat(heads, dim=-1) @ W_O
    logits = x @ W_U
    return F.cross_entropy(logits[L:2 * L - 1], torch.tensor(seq[L + 1:]))


def check_induction():
    """Two-layer gradients (induction.model_gradients) against autograd, within 1e-12."""
    print("two-layer attention-only model (teaching.induction): model_gradients against PyTorch autograd")
    cases = [
        ("random init, 2 layers of 2 heads, run of 4", induction.init_model(
            induction.Settings(vocab_size=6, d_model=8, num_heads=2, max_len=5, seed=4)), [3, 0, 5, 1, 3, 0, 5, 1]),
        ("random init, 3 layers of 4 heads, run of 6", induction.init_model(
            induction.Settings(vocab_size=8, d_model=8, num_heads=4, num_layers=3, max_len=6, seed=9)),
         [7, 2, 0, 6, 4, 1, 7, 2, 0, 6, 4, 1]),
        ("hand-built (scale 5), run of 3", induction.hand_built_model(4, 5), [2, 0, 3, 2, 0, 3]),
    ]
    ok, worst = True, 0.0
    for name, model, seq in cases:
        loss, grads = induction.model_gradients(model, seq)
        leaf = lambda M: t(M).requires_grad_(True)  # noqa: E731
        params = (leaf(model.token_embeddings), leaf(model.position_embeddings),
                  [([leaf(M) for M in w.W_Q], [leaf(M) for M in w.W_K], [leaf(M) for M in w.W_V], leaf(w.W_O))
                   for w in model.layers], leaf(model.W_U))
        theirs = torch_induction_loss(params, model, seq)
        theirs.backward()
        E_tok, E_pos, layers, W_U = params
        pairs = [(grads.token_embeddings, E_tok), (grads.position_embeddings, E_pos), (grads.W_U, W_U)]
        for g, (W_Q, W_K, W_V, W_O) in zip(grads.layers, layers):
            pairs += list(zip(g.W_Q, W_Q)) + list(zip(g.W_K, W_K)) + list(zip(g.W_V, W_V)) + [(g.W_O, W_O)]
        diff = max(abs(loss - theirs.item()), *((t(ours) - p.grad).abs().max().item() for ours, p in pairs))
        worst = max(worst, diff)
        ok &= diff <= 1e-12
        print(f"  {name:55s} max |diff| (loss and every gradient) = {diff:.1e}")
    print(f"two-layer gradients within 1e-12: {ok} (largest difference {worst:.1e})")
    return ok


def check_block_and_init(ex):
    """LayerNorm and dropout (mha_lists.teaching.block), and PyTorch's default bounds (mha_lists.teaching.torch_init)."""
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
        # a plain nn.Linear (a q_proj) starts its bias at random, unlike nn.MultiheadAttention's (notebook 15 draws one)
        linear = torch.nn.Linear(E, E)
        top_bias = linear.bias.abs().max().item()
        random_bias = 0 < top_bias <= linear_bound(E)
        print(f"{'nn.Linear(' + str(E) + ', ' + str(E) + ') bias drawn, not zero':55s} "
              f"max {top_bias:.4f} <= {linear_bound(E):.4f}: {random_bias}")
        ok &= random_bias
    return ok


if __name__ == "__main__":
    sys.exit(main())
