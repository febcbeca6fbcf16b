"""The toy translation task (chapters 12, 19): dictionary, reordering, data, batches."""

from __future__ import annotations

import pytest
import torch

from circuitbook.data import translation as T


def test_vocabularies_and_table():
    assert len(T.SRC_VOCAB) == len(T.TGT_VOCAB) == 3 + 30
    assert T.SRC_VOCAB[:3] == T.TGT_VOCAB[:3] == ["<pad>", "<s>", "</s>"]
    assert (T.PAD, T.BOS, T.EOS) == (0, 1, 2)
    assert sorted(T.TABLE.values()) == T.TGT_VOCAB[3:]  # a bijection onto the target words
    ids = T.table_ids()
    assert ids.shape == (len(T.SRC_VOCAB),)
    assert sorted(ids.tolist()) == list(range(len(T.TGT_VOCAB)))  # a permutation
    assert not torch.equal(ids, torch.arange(len(ids)))  # and not the identity
    for s_word, t_word in T.TABLE.items():
        assert T.TGT_VOCAB[ids[T.SRC_VOCAB.index(s_word)]] == t_word


def test_reordering_rule_examples():
    assert T.exact_translation("dog sees cat") == "hundo kato vidas"  # verb last
    assert T.exact_translation("big red dog sees cat") == "hundo granda ruga kato vidas"  # noun first
    assert T.exact_translation("big dog sees small red cat") == "hundo granda kato eta ruga vidas"
    assert T.alignment("big dog sees small red cat".split()) == [1, 0, 5, 3, 4, 2]


def test_reordering_rule_on_random_sentences():
    for words in T.sample_sentences(200, seed=1):
        out = T.exact_translation(words)
        al = T.alignment(words)
        assert sorted(al) == list(range(len(words)))  # a permutation of positions
        assert al != list(range(len(words)))  # never the diagonal: the verb moves
        assert out == [T.TABLE[words[i]] for i in al]
        assert out[-1] in T.VERBS.values()
        v = next(i for i, w in enumerate(words) if w in T.VERBS)
        subj = words[:v]
        assert out[: len(subj)] == [T.TABLE[subj[-1]]] + [T.TABLE[w] for w in subj[:-1]]


def test_generator_is_deterministic_and_split_disjoint():
    assert T.sample_sentences(50, seed=3) == T.sample_sentences(50, seed=3)
    assert T.sample_sentences(50, seed=3) != T.sample_sentences(50, seed=4)
    train, test = T.make_split(2000, 100, seed=0)
    assert (train, test) == T.make_split(2000, 100, seed=0)
    assert len(train) == 2000 and len(test) == 100
    keys = lambda s: {" ".join(x) for x in s}  # noqa: E731
    assert len(keys(train)) == 2000 and not keys(train) & keys(test)
    lengths = {len(s) for s in train}
    assert lengths == set(range(3, 8))


def test_tensors_ids_and_batch_masks():
    sents = [["dog", "sees", "cat"], ["big", "red", "dog", "sees", "small", "old", "cat"]]
    src, tgt = T.to_tensors(sents)
    assert src.shape == tgt.shape == (2, T.MAX_LEN)
    assert src[0].tolist()[:5] == [T.BOS, T.SRC_VOCAB.index("dog"), T.SRC_VOCAB.index("sees"), T.SRC_VOCAB.index("cat"), T.EOS]
    assert torch.all(src[0, 5:] == T.PAD) and torch.all(src[1] != T.PAD)
    assert T.exact_translation(src[1]) == T.strip_specials(tgt[1])
    assert T.decode(T.strip_specials(tgt[0]), T.TGT_VOCAB) == ["hundo", "kato", "vidas"]
    b = T.Batch(src, tgt)
    assert b.src_mask.shape == (2, 1, T.MAX_LEN)
    assert torch.equal(b.tgt, tgt[:, :-1]) and torch.equal(b.tgt_y, tgt[:, 1:])
    assert b.tgt_mask.shape == (2, T.MAX_LEN - 1, T.MAX_LEN - 1)
    assert b.ntokens.item() == (3 + 1) + (7 + 1)  # words + EOS
    # causal and padding: row 0's query 1 sees keys 0..1; no query sees the padded keys 5..
    assert b.tgt_mask[0, 1].tolist()[:3] == [True, True, False]
    assert not b.tgt_mask[0, :, 5:].any()
    batches = list(T.batches(T.sample_sentences(10, 0), batch_size=4, seed=0))
    assert [x.src.shape[0] for x in batches] == [4, 4, 2]


def test_table_agreement():
    exact = torch.nn.functional.one_hot(T.table_ids(), len(T.TGT_VOCAB)).float()
    assert T.table_agreement(exact) == 1.0
    shuffled = exact[:, torch.roll(torch.arange(len(T.TGT_VOCAB)), 1)]
    assert T.table_agreement(shuffled) == 0.0
    with pytest.raises(ValueError, match="src_vocab, tgt_vocab"):
        T.table_agreement(torch.zeros(3, 3))


def test_bad_sentences_have_clear_errors():
    with pytest.raises(ValueError, match="not in the source vocabulary"):
        T.exact_translation("dog sees unicorn")
    with pytest.raises(ValueError, match="exactly one verb"):
        T.exact_translation("dog sees cat likes fish")
    with pytest.raises(ValueError, match="noun phrases"):
        T.exact_translation("dog big sees cat")
    with pytest.raises(ValueError, match="1-D"):
        T.exact_translation(torch.zeros(2, 3, dtype=torch.long))
