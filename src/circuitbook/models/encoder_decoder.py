"""The Annotated Transformer's encoder-decoder, written out plainly (chapters 2-12, 19).

This is the model of Vaswani et al. (2017), "Attention Is All You Need", in the shape that
Harvard NLP's *Annotated Transformer* gives it: the same class names and attribute names
(``EncoderDecoder``, ``SublayerConnection``, ``MultiHeadedAttention.linears``, ``self.attn``,
``src_embed``/``tgt_embed``/``generator``), so a reader can hold this file next to the
original and next to the paper. The code is our own.

Shapes use ``batch``, ``src`` / ``tgt`` (sequence positions), ``d_model``, ``h`` (heads) and
``d_k = d_model / h``. Matrices act on row vectors, as in the paper and in TransformerLens:
a token's vector is a row ``x`` [d_model] and a layer computes ``x W + b``. PyTorch's
``nn.Linear`` stores the transposed matrix: ``linear(x) = x @ linear.weight.T + linear.bias``,
so the paper's ``W`` is ``linear.weight.T``. ``tl_weights`` does that conversion per head.

Where each piece is taught:

- chapter 2: ``EncoderDecoder``, ``Encoder``, ``Decoder``, the layers, ``make_model``,
  ``SublayerConnection`` and the pre-/post-norm question (``norm_position``);
- chapter 5: ``PositionalEncoding``; chapter 6: ``attention``, ``subsequent_mask``;
- chapter 7: ``MultiHeadedAttention``, ``tl_weights``, ``head_outputs``;
- chapter 10: ``PositionwiseFeedForward``; chapter 11: ``LayerNorm``;
- chapter 12: cross-attention (``cross_attention_alignment``), ``greedy_decode``,
  ``beam_search``, ``truncate_at``;

``model_from_config`` builds one from a recorded config (the zoo's ``toy-translation``).
Training and the translation metrics (chapter 19) live in ``circuitbook.train.translation``.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from circuitbook.data import translation as T
from circuitbook.masks import subsequent_mask

NORM_POSITIONS = ("pre", "post")


# --------------------------------------------------------------------------------------
# Chapter 2: the outer architecture
# --------------------------------------------------------------------------------------


class EncoderDecoder(nn.Module):
    """The standard encoder-decoder: ``decode(encode(src), tgt)``.

    ``forward(src, tgt, src_mask, tgt_mask)`` returns the decoder's final residual stream
    [batch, tgt, d_model]; ``generator`` turns it into log-probabilities over the target
    vocabulary. As in the Annotated Transformer, the generator is *not* applied in
    ``forward``, so the loss (chapter 19) and decoding (chapter 12) call it explicitly.

    - ``src`` [batch, src] and ``tgt`` [batch, tgt]: token ids;
    - ``src_mask`` [batch, 1, src]: 1 where the key is a real (non-padding) source token;
    - ``tgt_mask`` [batch, tgt, tgt]: padding mask AND ``subsequent_mask`` (no peeking ahead).

    Taught in chapter 2.
    """

    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        """memory [batch, src, d_model] = Encoder(PE(Embed(src)))."""
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        """Decoder residual stream [batch, tgt, d_model], reading ``memory`` by cross-attention."""
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class Generator(nn.Module):
    """Unembedding + log-softmax: log p(y) = log_softmax(x W_U + b_U), W_U = proj.weight.T.

    [batch, pos, d_model] -> [batch, pos, vocab]. Taught in chapter 2.
    """

    def __init__(self, d_model: int, vocab: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    """``n`` independent deep copies of ``module`` (identical start, separate parameters)."""
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


def _final_norm(size: int, norm_position: str) -> nn.Module:
    # Pre-norm leaves the last sublayer's sum un-normalised, so the stack ends with a
    # LayerNorm; post-norm already normalised it, so the paper has nothing there.
    return LayerNorm(size) if norm_position == "pre" else nn.Identity()


class Encoder(nn.Module):
    """N identical ``EncoderLayer``s, then ``norm`` (a LayerNorm for pre-norm, identity for
    post-norm). [batch, src, d_model] -> [batch, src, d_model]. Taught in chapter 2."""

    def __init__(self, layer: "EncoderLayer", N: int):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = _final_norm(layer.size, layer.norm_position)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N identical ``DecoderLayer``s, then ``norm`` as in ``Encoder``. Taught in chapter 2."""

    def __init__(self, layer: "DecoderLayer", N: int):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = _final_norm(layer.size, layer.norm_position)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


# --------------------------------------------------------------------------------------
# Chapters 2 and 11: residual connections and LayerNorm
# --------------------------------------------------------------------------------------


class LayerNorm(nn.Module):
    """LayerNorm(x) = a_2 * (x - mean(x)) / (std(x) + eps) + b_2, over the last axis.

    Written the way the Annotated Transformer writes it, which differs from
    ``torch.nn.LayerNorm`` (and from TransformerLens's ``LayerNorm``) in two details:
    ``std`` is the *unbiased* standard deviation (divides by d_model - 1), and ``eps`` is
    added to the standard deviation, not to the variance under the square root. Both change
    the output only slightly, but a chapter comparing against ``nn.LayerNorm`` will see it.
    ``a_2`` is the gain (TransformerLens ``w``), ``b_2`` the bias (``b``). Taught in chapter 11.
    """

    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    """A residual connection around one sublayer (attention or feed-forward), with LayerNorm.

    ``norm_position="pre"`` (default; what the Annotated Transformer's code does):

        out = x + Dropout(Sublayer(LayerNorm(x)))

    ``norm_position="post"`` (what the paper's section 3.1 writes):

        out = LayerNorm(x + Dropout(Sublayer(x)))

    The Annotated Transformer's text quotes the paper's ``LayerNorm(x + Sublayer(x))`` but its
    code normalises *first*, "for code simplicity"; that is the "pre-LN" transformer (Xiong et
    al. 2020; GPT-2 and every model in this book after chapter 12). With pre-norm the residual
    stream is a plain running sum, ``x_{l+1} = x_l + f_l(x_l)``, which is what the circuits
    framework's residual-stream picture needs, and training is stable without a long warm-up.
    With post-norm every sublayer's output is re-normalised, so each layer's output has zero
    mean and (with a_2 = 1, b_2 = 0) unit standard deviation per position, and a sublayer that
    outputs zero still changes the stream (``LayerNorm(x) != x``). The stacks end with a final
    LayerNorm only in pre-norm (``Encoder.norm``), since post-norm's output is normalised
    already. Taught in chapter 2 (and chapter 11 for the norm itself).
    """

    def __init__(self, size: int, dropout: float, norm_position: str = "pre"):
        super().__init__()
        _check_norm_position(norm_position)
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)
        self.norm_position = norm_position

    def forward(self, x, sublayer):
        if self.norm_position == "pre":
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def _check_norm_position(norm_position: str) -> None:
    if norm_position not in NORM_POSITIONS:
        raise ValueError(
            f"norm_position must be 'pre' (the Annotated Transformer's code: x + Dropout(Sublayer(LayerNorm(x)))) "
            f"or 'post' (the paper: LayerNorm(x + Dropout(Sublayer(x)))), got {norm_position!r}"
        )


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a ``SublayerConnection``. Chapter 2."""

    def __init__(self, size: int, self_attn, feed_forward, dropout: float, norm_position: str = "pre"):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout, norm_position), 2)
        self.size = size
        self.norm_position = norm_position

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda y: self.self_attn(y, y, y, mask))
        return self.sublayer[1](x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to ``memory`` ("src_attn"), feed-forward.

    Cross-attention takes its queries from the decoder stream and its keys and values from
    the encoder output ``memory``, so its pattern [tgt, src] is the model's *alignment*
    between target and source positions (chapter 12). Taught in chapter 2.
    """

    def __init__(self, size: int, self_attn, src_attn, feed_forward, dropout: float, norm_position: str = "pre"):
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout, norm_position), 3)
        self.norm_position = norm_position

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda y: self.self_attn(y, y, y, tgt_mask))
        x = self.sublayer[1](x, lambda y: self.src_attn(y, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


# --------------------------------------------------------------------------------------
# Chapter 6: attention and masks
# --------------------------------------------------------------------------------------


def attention(query, key, value, mask=None, dropout=None):
    """Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V.

    ``query`` [..., q, d_k], ``key`` [..., k, d_k], ``value`` [..., k, d_v]; ``mask``
    broadcastable to [..., q, k], 0/False where attention is forbidden (those scores are set
    to -1e9 before the softmax). Returns ``(output [..., q, d_v], p_attn [..., q, k])``.
    Taught in chapter 6.
    """
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn @ value, p_attn


# --------------------------------------------------------------------------------------
# Chapter 7: multi-head attention
# --------------------------------------------------------------------------------------


class MultiHeadedAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attn(Q W_i^Q, K W_i^K, V W_i^V).

    ``self.linears`` holds four ``nn.Linear(d_model, d_model)``: the stacked W^Q, W^K, W^V of
    all heads and W^O (in ``nn.Linear``'s transposed storage). Head i owns columns
    ``i*d_k:(i+1)*d_k`` of W^Q, W^K, W^V and rows ``i*d_k:(i+1)*d_k`` of W^O, so
    Concat(heads) W^O = sum_i head_i W^O_i: the framework's "heads are independent and
    additive" (chapter 7; ``tl_weights`` and ``head_outputs`` make it concrete).

    After each call ``self.attn`` holds the attention probabilities [batch, h, q, k] (after
    dropout, as in the original; call ``model.eval()`` to read clean patterns).
    Taught in chapter 7.
    """

    def __init__(self, h: int, d_model: int, dropout: float = 0.1):
        super().__init__()
        if d_model % h:
            raise ValueError(f"d_model={d_model} must be divisible by the number of heads h={h}")
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # same mask for every head: [batch, 1, q|1, k]
        nbatches = query.size(0)
        # [batch, pos, d_model] -> [batch, h, pos, d_k] for each of Q, K, V
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        # Concat(head_1, ..., head_h): [batch, h, q, d_k] -> [batch, q, h * d_k]
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


def tl_weights(mha: MultiHeadedAttention) -> dict[str, torch.Tensor]:
    """Per-head weights of ``mha`` in TransformerLens names and shapes (row-vector convention).

    ``nn.Linear`` computes ``x W^T + b``, so the paper's matrix is ``weight.T`` and head h's
    slices are::

        W_Q[h] = linears[0].weight.T[:, h*d_k:(h+1)*d_k]     [d_model, d_head]   (W_K, W_V alike)
        b_Q[h] = linears[0].bias[h*d_k:(h+1)*d_k]            [d_head]
        W_O[h] = linears[3].weight.T[h*d_k:(h+1)*d_k, :]     [d_head, d_model]
        b_O    = linears[3].bias                             [d_model]

    Returns W_Q, W_K, W_V [n_heads, d_model, d_head], W_O [n_heads, d_head, d_model],
    b_Q, b_K, b_V [n_heads, d_head], b_O [d_model] (views detached from the graph). With
    A^h the head's pattern, the module's output is exactly
    ``sum_h A^h (X W_V[h] + b_V[h]) W_O[h] + b_O``. Taught in chapters 7 and 20.
    """
    if not isinstance(mha, MultiHeadedAttention):
        raise TypeError(f"tl_weights needs a MultiHeadedAttention module, got {type(mha).__name__}")
    h, d_k = mha.h, mha.d_k
    out = {}
    for name, lin in zip("QKV", mha.linears[:3]):
        w = lin.weight.detach().T  # [d_model, h*d_k]
        out[f"W_{name}"] = w.reshape(w.shape[0], h, d_k).permute(1, 0, 2)
        out[f"b_{name}"] = lin.bias.detach().reshape(h, d_k)
    w_o = mha.linears[3].weight.detach().T  # [h*d_k, d_model]
    out["W_O"] = w_o.reshape(h, d_k, w_o.shape[1])
    out["b_O"] = mha.linears[3].bias.detach()
    return out


def head_outputs(mha: MultiHeadedAttention, query, key, value, mask=None) -> torch.Tensor:
    """Each head's contribution to ``mha(query, key, value, mask)``: [batch, h, q, d_model].

    head_out[h] = A^h (X_kv W_V[h] + b_V[h]) W_O[h], using ``mha``'s own pattern (run in
    eval mode for determinism); ``head_outputs(...).sum(1) + b_O`` equals the module's
    output. Chapter 7 uses it to show that concatenating heads and multiplying by W^O is
    the same as adding per-head terms.
    """
    w = tl_weights(mha)
    mha(query, key, value, mask)  # fills mha.attn [batch, h, q, k]
    v = torch.einsum("bkd,hde->bhke", value, w["W_V"].to(value.dtype)) + w["b_V"].to(value.dtype)[None, :, None]
    z = mha.attn @ v  # [batch, h, q, d_k]
    return torch.einsum("bhqe,hem->bhqm", z, w["W_O"].to(value.dtype))


# --------------------------------------------------------------------------------------
# Chapters 10 and 5: feed-forward, embeddings and positions
# --------------------------------------------------------------------------------------


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alone.

    ``w_1``: d_model -> d_ff, ``w_2``: d_ff -> d_model (dropout on the hidden layer, as in
    the Annotated Transformer). [batch, pos, d_model] -> same. Taught in chapter 10.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    """Token embedding scaled by sqrt(d_model): Embed(t) = sqrt(d_model) * lut.weight[t].

    The scale is meant to make embeddings comparable to the positional encoding (entries in
    [-1, 1]); with Xavier initialisation the entries are about sqrt(2 / (vocab + d_model)), so
    that holds only for vocabularies about as large as d_model (chapter 4 measures it). The effective W_E is therefore
    ``sqrt(d_model) * lut.weight`` [vocab, d_model]. Taught in chapter 4 (Embeddings).
    """

    def __init__(self, d_model: int, vocab: int):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same): [max_len, d_model]."""
    if d_model % 2:
        raise ValueError(f"the sinusoidal encoding needs an even d_model, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding, then dropout: Dropout(x + PE[:pos]).

    ``self.pe`` [1, max_len, d_model] is a buffer that is *not* saved in the state_dict
    (it is a fixed function of the shape; the Annotated Transformer saves it, which would
    make a small checkpoint mostly sines). For each frequency, PE at pos + k is a rotation of
    PE at pos, which is why relative offsets are linear functions of it. Taught in chapter 5.
    """

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model)[None], persistent=False)

    def forward(self, x):
        if x.size(1) > self.pe.size(1):
            raise ValueError(f"sequence length {x.size(1)} exceeds the positional table's max_len={self.pe.size(1)}")
        return self.dropout(x + self.pe[:, : x.size(1)].to(x.dtype))


# --------------------------------------------------------------------------------------
# Chapter 2: putting it together
# --------------------------------------------------------------------------------------


def make_model(
    src_vocab: int,
    tgt_vocab: int,
    N: int = 6,
    d_model: int = 512,
    d_ff: int = 2048,
    h: int = 8,
    dropout: float = 0.1,
    *,
    norm_position: str = "pre",
    max_len: int = 5000,
) -> EncoderDecoder:
    """Build the encoder-decoder; defaults are the paper's base model (N=6, d_model=512,
    d_ff=2048, h=8, dropout 0.1; about 44 M parameters plus embeddings).

    Matrices get Glorot/Xavier-uniform initialisation, as in the Annotated Transformer;
    biases and LayerNorm parameters keep PyTorch's defaults. ``norm_position`` is "pre" (the
    Annotated Transformer's code) or "post" (the paper); see ``SublayerConnection``. Source
    and target embeddings and the generator are separate (no weight tying), so W_E^src,
    W_E^tgt and W_U^tgt can be read apart (chapter 12). Uses the global torch RNG: seed it
    first for reproducible weights. Taught in chapter 2.
    """
    for name, val in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab), ("N", N), ("d_model", d_model),
                      ("d_ff", d_ff), ("h", h), ("max_len", max_len)):
        if not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    _check_norm_position(norm_position)
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model, dropout)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout, max_len)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout, norm_position), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout, norm_position), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


_ARCH_KEYS = ("src_vocab", "tgt_vocab", "N", "d_model", "d_ff", "h", "dropout", "norm_position", "max_len")


def model_from_config(config: dict) -> EncoderDecoder:
    """An untrained ``EncoderDecoder`` of the shape in ``config`` (``make_model``'s keyword
    arguments, as the zoo's ``toy-translation`` json records them), ready for
    ``load_state_dict``. Extra keys (training recipe, task) are ignored. Chapters 12 and 19
    (``circuitbook.models.zoo`` loads with it, ``circuitbook.train.translation`` trains it).
    """
    missing = [k for k in ("src_vocab", "tgt_vocab") if k not in config]
    if missing:
        raise ValueError(f"config is missing {missing}; expected keys among {list(_ARCH_KEYS)}")
    kwargs = {k: config[k] for k in _ARCH_KEYS if k in config}
    return make_model(**kwargs)


# --------------------------------------------------------------------------------------
# Chapter 12: decoding
# --------------------------------------------------------------------------------------


def _check_decode_args(model, src, src_mask, max_len):
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    if not isinstance(src, torch.Tensor) or src.ndim != 2 or src.dtype.is_floating_point:
        raise ValueError(f"src must be a [batch, src] tensor of token ids, got {getattr(src, 'shape', type(src))}")
    if src_mask is None or tuple(src_mask.shape) != (src.shape[0], 1, src.shape[1]):
        raise ValueError(
            f"src_mask must have shape [batch, 1, src] = {(src.shape[0], 1, src.shape[1])}, e.g. "
            f"(src != pad).unsqueeze(-2); got {None if src_mask is None else tuple(src_mask.shape)}"
        )
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int (it counts the start symbol), got {max_len!r}")


def greedy_decode(model: EncoderDecoder, src, src_mask, max_len: int, start_symbol: int) -> torch.Tensor:
    """Translate by always taking the most probable next token.

    Encodes ``src`` [batch, src] once, then grows ``ys`` from ``[[start_symbol]]`` one token at
    a time: ``y_{t+1} = argmax log p(y | y_<=t, src)``. Returns ``ys`` [batch, max_len] including
    the start symbol. Like the Annotated Transformer it does not stop at the end symbol;
    everything after the first end symbol is filler (``truncate_at``). Call ``model.eval()``
    first (dropout). Taught in chapter 12.
    """
    _check_decode_args(model, src, src_mask, max_len)
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), start_symbol, dtype=src.dtype, device=src.device)
        for _ in range(max_len - 1):
            out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1), device=src.device))
            next_word = model.generator(out[:, -1]).argmax(dim=-1)
            ys = torch.cat([ys, next_word[:, None].to(ys.dtype)], dim=1)
    return ys


def beam_search(
    model: EncoderDecoder,
    src,
    src_mask,
    max_len: int,
    start_symbol: int,
    end_symbol: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> torch.Tensor:
    """Translate by keeping the ``beam_size`` most probable partial translations.

    For each source sentence, hypotheses y_1..y_t are scored by sum_t log p(y_t | y_<t, src);
    at each step every live hypothesis is extended by every token and the best ``beam_size``
    extensions survive. A hypothesis that emits ``end_symbol`` is finished; search stops
    when no live hypothesis can beat the best finished one (scores only fall as tokens are
    added) or at ``max_len``. The winner maximises score / len^length_penalty (0: raw
    log-probability, as in the paper's section 6.1 up to its alpha = 0.6).

    Returns [batch, max_len] (same layout as ``greedy_decode``: start symbol first), each row
    padded with ``end_symbol`` after its end. With ``beam_size=1`` and ``length_penalty=0``
    the result equals ``greedy_decode`` up to the first end symbol. Taught in chapter 12.
    """
    _check_decode_args(model, src, src_mask, max_len)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    rows = [
        _beam_one(model, src[i : i + 1], src_mask[i : i + 1], max_len, start_symbol, end_symbol, beam_size, length_penalty)
        for i in range(src.shape[0])
    ]
    out = torch.full((src.shape[0], max_len), end_symbol, dtype=src.dtype, device=src.device)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=src.dtype, device=src.device)
    return out


def _beam_one(model, src, src_mask, max_len, start_symbol, end_symbol, k, length_penalty):
    """Beam search for one sentence [1, src]; returns the best token list (start .. end)."""

    def final(score: float, seq: list[int]) -> tuple[float, list[int]]:
        n = len(seq) - 1  # generated tokens, start symbol excluded
        return (score / n**length_penalty if length_penalty else score), seq

    with torch.no_grad():
        memory = model.encode(src, src_mask)
        alive, alive_scores = [[start_symbol]], [0.0]
        finished: list[tuple[float, list[int]]] = []
        for _ in range(max_len - 1):
            ys = torch.tensor(alive, dtype=torch.long, device=src.device)
            n = ys.shape[0]
            out = model.decode(memory.expand(n, -1, -1), src_mask.expand(n, -1, -1), ys,
                               subsequent_mask(ys.size(1), device=src.device))
            logp = model.generator(out[:, -1]).double()  # [n, vocab]
            cand = (torch.tensor(alive_scores, dtype=torch.float64, device=logp.device)[:, None] + logp).reshape(-1)
            # 2k candidates: even if k of them end here, k live ones remain.
            top_scores, top_idx = cand.topk(min(2 * k, cand.numel()))
            vocab = logp.shape[-1]
            alive, alive_scores = [], []
            for s, i in zip(top_scores.tolist(), top_idx.tolist()):
                seq = ys[i // vocab].tolist() + [i % vocab]
                if i % vocab == end_symbol:
                    finished.append(final(s, seq))
                elif len(alive) < k:
                    alive.append(seq)
                    alive_scores.append(s)
            if not alive:
                break
            # Without a length penalty, adding tokens only lowers a score: stop when the
            # best finished translation already beats every live one.
            if length_penalty == 0 and finished and max(f[0] for f in finished) >= max(alive_scores):
                break
        else:
            finished += [final(s, seq) for s, seq in zip(alive_scores, alive)]  # hit max_len
    return max(finished, key=lambda f: f[0])[1]


def truncate_at(ys: torch.Tensor, end_symbol: int, drop_start: bool = True) -> list[list[int]]:
    """Rows of ``ys`` [batch, len] as lists cut before the first ``end_symbol``.

    With ``drop_start`` the first column (the start symbol) is dropped as well, so the
    result is the translated words only. Chapter 12.
    """
    rows = []
    for row in ys.tolist():
        row = row[1:] if drop_start else row
        rows.append(row[: row.index(end_symbol)] if end_symbol in row else row)
    return rows


def cross_attention_alignment(model: EncoderDecoder, sentences) -> torch.Tensor:
    """How often each cross-attention head looks at the source word being translated.

    Runs ``model`` teacher-forced on toy-translation ``sentences`` (lists of source words,
    ``circuitbook.data.translation``). Decoder position j (input: BOS and target words < j)
    predicts target word j, which translates source word ``alignment(words)[j]`` at source
    position ``alignment[j] + 1`` (after BOS). Returns [N, h]: for each decoder layer and
    head of ``src_attn``, the fraction of target words whose attention argmax is that
    source position. The alignment is a non-diagonal permutation (verbs move to the end,
    adjectives after their noun), so a high score means the head found it. Chapter 12.
    """
    model.eval()
    device = next(model.parameters()).device
    src, tgt = T.to_tensors(sentences)
    batch = T.Batch(src.to(device), tgt.to(device), pad=T.PAD)
    want = torch.full(batch.tgt.shape, -1, dtype=torch.long, device=device)
    for i, words in enumerate(sentences):
        al = T.alignment(words)
        want[i, : len(al)] = torch.tensor(al, device=device) + 1
    valid = want >= 0
    with torch.no_grad():
        model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
    scores = []
    for layer in model.decoder.layers:
        looked = layer.src_attn.attn.argmax(-1)  # [batch, h, tgt]
        hits = (looked == want[:, None]) & valid[:, None]
        scores.append(hits.sum((0, 2)).double() / valid.sum())
    return torch.stack(scores)
