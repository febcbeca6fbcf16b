"""Planted wrong answers for chapter 1's exercises, each with the diagnosis it must get."""


def including_this_block(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out[:layer + 1].sum(0) + mlp_out[:layer + 1].sum(0)


def one_block_short(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out[:layer - 1].sum(0) + mlp_out[:layer - 1].sum(0)


def resid_mid(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out[:layer + 1].sum(0) + mlp_out[:layer].sum(0)


def no_positions(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + attn_out[:layer].sum(0) + mlp_out[:layer].sum(0)


def no_mlps(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out[:layer].sum(0)


def overwritten(embed, pos_embed, attn_out, mlp_out, layer):
    return mlp_out[layer - 1]


def mean_of_writes(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out[:layer].mean(0) + mlp_out[:layer].mean(0)


def attn_of_every_block(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out.sum(0) + mlp_out[:layer].sum(0)


MUTATIONS = {
    "ch01_ex1": [
        (including_this_block, "included block `layer` itself"),
        (one_block_short, "stopped one block early"),
        (resid_mid, "added block `layer`'s attention output"),
        (no_positions, "forgot the positional embedding"),
        (no_mlps, "left out the MLPs"),
        (overwritten, "kept only the last write"),
        (mean_of_writes, "averaged the writes"),
        (attn_of_every_block, None),
    ],
    "ch01_ex2": [
        (410, "missed one kind of per-layer term"),
        (50, "counted attention layers, not heads"),
        (433, "forgot one embedding"),
        (432, "forgot the embeddings"),
        (66, "counted one layer's heads"),
        (384, "counted only the heads"),
        ("434", None),
        (170, None),
    ],
}
