"""Planted wrong answers for chapter 1's exercises, each with the diagnosis it must get."""


def attn_of_every_block(embed, pos_embed, attn_out, mlp_out, layer):
    return embed + pos_embed + attn_out.sum(0) + mlp_out[:layer].sum(0)


MUTATIONS = {
    "ch01_ex1": [
        (attn_of_every_block, None),
    ],
    "ch01_ex2": [
        ("434", None),
        (170, None),
    ],
}
