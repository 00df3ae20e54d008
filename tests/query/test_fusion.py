"""Fusion: RRF, convex combination with per-query normalization, and MMR, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch.query.diversity import mmr
from semsearch.query.fusion import NORMS, convex, convex_arrays, normalize, rrf
from tests.helpers import dict_convex


def test_rrf_hand_computed() -> None:
    # k = 60. Ranking A: 1 2 3; ranking B: 3 1.
    # 1: 1/61 + 1/62 = 0.032522;  3: 1/63 + 1/61 = 0.032266;  2: 1/62 = 0.016129
    fused = rrf([[1, 2, 3], [3, 1]], k=60)
    assert [d for d, _ in fused] == [1, 3, 2]
    scores = dict(fused)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[2] == pytest.approx(1 / 62)


def test_rrf_weights() -> None:
    # Weights 1 and 3, k = 0: a: 1/1 + 3/2 = 2.5; b: 1/2 + 3/1 = 3.5 -> b first.
    fused = rrf([["a", "b"], ["b", "a"]], k=0, weights=[1, 3])  # type: ignore[list-item]
    assert fused == [("b", pytest.approx(3.5)), ("a", pytest.approx(2.5))]
    with pytest.raises(ValueError, match="weights"):
        rrf([[1]], weights=[1, 2])


def test_rrf_ties_go_to_the_better_best_rank_then_smaller_id() -> None:
    # 7 and 8 both score 1/61 + 1/62 (ranks 1 and 2 each, swapped); both best rank 1 -> smaller id first.
    assert [d for d, _ in rrf([[8, 7], [7, 8]])] == [7, 8]
    # 5: 1/(60+2) * 2 = 0.032258 vs 9: 1/61 + 1/63 = 0.032266 -> 9 wins outright (not a tie).
    assert [d for d, _ in rrf([[9, 5], [4, 5, 9]])][:2] == [9, 5]
    # A repeated id counts at its first rank only.
    assert dict(rrf([[1, 1, 2]]))[1] == pytest.approx(1 / 61)
    assert rrf([]) == []


def test_normalize() -> None:
    # minmax of 2, 4, 6: (s - 2) / 4 -> 0, 0.5, 1
    assert normalize({1: 2.0, 2: 4.0, 3: 6.0}, "minmax") == {1: 0.0, 2: 0.5, 3: 1.0}
    # zscore of 2, 4, 6: mean 4, population std sqrt(8/3) = 1.63299 -> -1.22474, 0, 1.22474
    z = normalize({1: 2.0, 2: 4.0, 3: 6.0}, "zscore")
    assert z[1] == pytest.approx(-1.224745) and z[2] == pytest.approx(0.0) and z[3] == pytest.approx(1.224745)
    assert normalize({1: 3.0, 2: 3.0}, "minmax") == {1: 1.0, 2: 1.0}
    assert normalize({1: 3.0, 2: 3.0}, "zscore") == {1: 0.0, 2: 0.0}
    assert normalize({}, "zscore") == {}
    with pytest.raises(ValueError, match="unknown normalization"):
        normalize({1: 1.0}, "softmax")


def test_convex_minmax_hand_computed() -> None:
    dense = {1: 0.9, 2: 0.7, 3: 0.5}  # minmax: 1, 0.5, 0
    lexical = {3: 12.0, 4: 8.0, 1: 4.0}  # minmax: 3 -> 1, 4 -> 0.5, 1 -> 0
    # alpha = 0.6; doc 2 is missing from lexical -> lexical minimum (0); doc 4 missing from dense -> 0.
    # 1: 0.6*1 + 0.4*0 = 0.6;  2: 0.6*0.5 + 0.4*0 = 0.3;  3: 0.6*0 + 0.4*1 = 0.4;  4: 0 + 0.4*0.5 = 0.2
    fused = convex(dense, lexical, alpha=0.6, norm="minmax")
    assert [d for d, _ in fused] == [1, 3, 2, 4]
    assert dict(fused) == pytest.approx({1: 0.6, 2: 0.3, 3: 0.4, 4: 0.2})
    assert [d for d, _ in convex(dense, lexical, alpha=1.0, norm="minmax")][:3] == [1, 2, 3]  # dense order
    assert [d for d, _ in convex(dense, lexical, alpha=0.0, norm="minmax")][:2] == [3, 4]  # lexical order


def test_convex_zscore_missing_gets_the_lists_minimum() -> None:
    dense = {1: 1.0, 2: 0.0}  # zscore: mean 0.5, std 0.5 -> 1, -1
    lexical = {1: 5.0, 3: 1.0}  # zscore: mean 3, std 2 -> 1, -1
    # alpha 0.5: 1: 0.5*1 + 0.5*1 = 1; 2: 0.5*(-1) + 0.5*(-1, missing) = -1; 3: 0.5*(-1, missing) + 0.5*(-1) = -1
    # 2 and 3 tie at -1 -> smaller id first.
    fused = convex(dense, lexical, alpha=0.5, norm="zscore")
    assert fused == [(1, pytest.approx(1.0)), (2, pytest.approx(-1.0)), (3, pytest.approx(-1.0))]
    assert convex({}, {}, 0.5) == []
    with pytest.raises(ValueError, match="alpha"):
        convex(dense, lexical, alpha=1.5)


# Few distinct scores and overlapping ids, so that ties and documents on both lists are common.
score_maps = st.dictionaries(
    st.integers(-5, 40), st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]) | st.floats(-50, 50), max_size=30
)


@settings(max_examples=300, deadline=None)
@given(dense=score_maps, lexical=score_maps, alpha=st.sampled_from([0.0, 0.3, 0.5, 1.0]), norm=st.sampled_from(NORMS))
def test_convex_equals_the_dict_fusion_exactly(dense: dict, lexical: dict, alpha: float, norm: str) -> None:
    expected = dict_convex(dense, lexical, alpha, norm)
    assert convex(dense, lexical, alpha, norm) == expected
    assert convex(dense, lexical, alpha, norm, limit=3) == expected[:3]
    ids, scores = convex_arrays(
        np.array(list(dense), dtype=np.int64),
        np.array(list(dense.values()), dtype=np.float64),
        np.array(list(lexical), dtype=np.int64),
        np.array(list(lexical.values()), dtype=np.float64),
        alpha=alpha,
        norm=norm,
    )
    assert list(zip(ids.tolist(), scores.tolist(), strict=True)) == expected


def test_convex_keeps_ids_that_are_not_integers() -> None:
    dense = {"b": 0.9, "a": 0.1}
    lexical = {"a": 3.0, "c": 1.0}
    assert convex(dense, lexical, 0.5, "minmax") == dict_convex(dense, lexical, 0.5, "minmax")
    # 2.5 and 2 would be the same int64: the float keys keep their own identity.
    assert [d for d, _ in convex({2.5: 1.0, 2: 0.0}, {}, 1.0, "minmax")] == [2.5, 2]
    with pytest.raises(ValueError, match="normalization"):
        convex_arrays(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0), norm="softmax")


def _unit(*v: float) -> np.ndarray:
    a = np.array(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_mmr_demotes_near_duplicates() -> None:
    q = _unit(1, 0, 0)
    a = _unit(1, 0.1, 0)  # cos(q, a) = 0.99504
    a2 = _unit(1, 0.12, 0)  # cos(q, a2) = 0.99287, cos(a, a2) = 0.99980: a near copy of a
    b = _unit(1, 0, 0.8)  # cos(q, b) = 0.78087, cos(a, b) = 0.77699
    vecs = np.stack([a, a2, b])
    # λ = 1: relevance order a, a2, b.
    assert mmr(q, vecs, [10, 11, 12], k=3, lambda_=1.0) == [10, 11, 12]
    # λ = 0.7, after picking a:
    #   a2: 0.7*0.99287 - 0.3*0.99980 = 0.39507;  b: 0.7*0.78087 - 0.3*0.77699 = 0.31351 -> a2 still wins.
    assert mmr(q, vecs, [10, 11, 12], k=2, lambda_=0.7) == [10, 11]
    # λ = 0.5: a2: 0.5*0.99287 - 0.5*0.99980 = -0.00347;  b: 0.5*0.78087 - 0.5*0.77699 = 0.00194 -> b wins.
    assert mmr(q, vecs, [10, 11, 12], k=2, lambda_=0.5) == [10, 12]


def test_mmr_relevance_override_ties_and_bounds() -> None:
    vecs = np.stack([_unit(1, 0), _unit(0, 1), _unit(1, 1)])
    q = _unit(1, 0)
    # Given scores replace the cosine: the third candidate first.
    assert mmr(q, vecs, [1, 2, 3], k=1, relevance=[0.1, 0.2, 0.9]) == [3]
    # Equal relevance: the earlier candidate wins.
    assert mmr(q, vecs, [1, 2, 3], k=1, relevance=[0.5, 0.5, 0.5]) == [1]
    # Cosines to q: 1, 0, 0.70711. Pick 1 (0.7*1). Then 2: 0.7*0 - 0.3*0 = 0; 3: 0.7*0.70711 - 0.3*0.70711 = 0.28284
    # -> 3; then 2 is all that is left. k past the candidates returns them all.
    assert mmr(q, vecs, [1, 2, 3], k=10) == [1, 3, 2]
    assert mmr(q, np.zeros((0, 2)), [], k=3) == []
    with pytest.raises(ValueError, match="relevance"):
        mmr(q, vecs, [1, 2, 3], k=1, relevance=[1.0])
    with pytest.raises(ValueError, match="lambda_"):
        mmr(q, vecs, [1, 2, 3], k=1, lambda_=2.0)


def test_diversify_never_promotes_a_candidate_far_below_the_best() -> None:
    from semsearch.query.diversity import diversify

    q = np.array([1.0, 0.0, 0.0])
    angle = np.deg2rad
    # Two copies of one paper (cosine 0.9 to the query, 0.999 to each other), a third on-topic paper (0.8, 0.92 to
    # the first), and an off-topic one (0.2) that is the most novel of all: plain MMR at λ 0.5 puts it second.
    vecs = np.array(
        [
            [0.9, np.sqrt(1 - 0.81), 0.0],
            [0.9, np.sqrt(1 - 0.81) * np.cos(angle(5)), np.sqrt(1 - 0.81) * np.sin(angle(5))],
            [0.8, 0.459, 0.386],
            [0.2, -0.5, np.sqrt(1 - 0.04 - 0.25)],
        ]
    )
    ranked = [(10, 0.9), (11, 0.9), (12, 0.8), (13, 0.2)]
    assert mmr(q, vecs, [10, 11, 12, 13], 2, 0.5, relevance=[1.0, 1.0, 0.857, 0.0])[1] == 13  # the old way
    assert diversify(q, vecs, ranked, 2, 0.5, floor=0.8) == [10, 12]  # the off-topic one is far below the best
    # It comes after every candidate that passed the floor; only the copy of a paper shown comes later still.
    assert diversify(q, vecs, ranked, 4, 0.5, floor=0.8) == [10, 12, 13, 11]
    assert diversify(q, vecs, ranked, 4, 0.5, floor=0.0)[:2] == [10, 13]  # no floor: the old promotion
    assert diversify(q, vecs, [], 3, 0.5, floor=0.8) == []


# -- adaptive fusion: the weight each query gives its dense side -------------------------------------------------


def _flat(n: int = 1000, seed: int = 0) -> np.ndarray:
    """A list whose head does not stand out: scores evenly spread, best first."""
    return np.sort(np.random.default_rng(seed).uniform(0.4, 0.5, n))[::-1]


def _peaked(n: int = 1000, seed: int = 1) -> np.ndarray:
    """The same kind of list with one candidate far above the rest."""
    scores = _flat(n, seed)
    scores[0] = 0.9
    return scores


def test_adaptive_gives_the_weight_to_the_side_whose_head_stands_out() -> None:
    from semsearch.query.weighting import FusionPolicy

    policy = FusionPolicy("adaptive")
    to_dense = policy.choose(_peaked(), _flat(), 1000)
    to_lexical = policy.choose(_flat(), _peaked(), 1000)
    assert to_dense.alpha > 0.8 and to_lexical.alpha < 0.2
    assert to_dense.method == to_lexical.method == "adaptive"
    assert "dense" in to_dense.reason and "lexical" in to_dense.reason
    # The same shape on both sides: BM25's head counts 1 / 1.5 of the dense one's (its scores are heavier-tailed).
    assert policy.choose(_peaked(), _peaked(), 1000).alpha == pytest.approx(1.5 / 2.5)
    assert FusionPolicy("adaptive", lexical_scale=1.0).choose(_peaked(), _peaked(), 1000).alpha == pytest.approx(0.5)


def test_adaptive_counts_bm25s_unmatched_documents_as_zeros() -> None:
    """Three documents hold a rare word: against the 997 that scored 0 they stand out, and win the weight."""
    from semsearch.query.weighting import FusionPolicy, peak

    lexical = np.array([12.0, 3.0, 2.5])
    assert peak(lexical, 1) < 1.5  # within the three alone, the best is barely above their mean
    assert peak(lexical, 1, pad_to=1000) > 20
    assert FusionPolicy("adaptive").choose(_flat(), lexical, 1000).alpha < 0.1


def test_adaptive_falls_back_to_even_weights_when_nothing_stands_out() -> None:
    from semsearch.query.weighting import FusionPolicy

    policy = FusionPolicy("adaptive")
    # No lexical match at all, and a dense list of one: neither says anything.
    choice = policy.choose(np.array([0.3]), np.zeros(0), 1000)
    assert choice.alpha == 0.5 and "neither" in choice.reason
    # A lexical side with no match leaves everything to the dense side, whatever its weight.
    assert policy.choose(_peaked(), np.zeros(0), 1000).alpha == 1.0


def test_an_index_without_a_fusion_entry_keeps_alpha_one_half() -> None:
    from semsearch.query.fusion import DEFAULT_ALPHA
    from semsearch.query.weighting import FusionPolicy

    for entry in (None, {}):
        policy = FusionPolicy.from_entry(entry)
        choice = policy.choose(_peaked(), _flat(), 1000)  # adaptive would give dense nearly everything
        assert (policy.method, choice.alpha, choice.method) == ("fixed", DEFAULT_ALPHA, "fixed")
        assert "before adaptive fusion" in choice.reason
    fixed = FusionPolicy.from_entry({"method": "fixed", "alpha": 0.3})
    assert fixed.choose(_peaked(), _flat(), 1000).alpha == 0.3


@pytest.mark.parametrize(
    "entry",
    [
        {"method": "learned-by-a-newer-release"},
        {"method": "fixed", "alpha": 7},
        {"method": "fixed", "alpha": "half"},
        {"method": "adaptive", "lexical_scale": 0},
        {"method": "adaptive", "peak_top": 0},
        {"method": "adaptive", "power": "steep"},
        {"method": "adaptive", "lexical_scale": float("nan")},
    ],
)
def test_an_unreadable_fusion_entry_falls_back_to_alpha_one_half_and_says_so(entry: dict) -> None:
    from semsearch.query.weighting import FusionPolicy

    policy = FusionPolicy.from_entry(entry)
    choice = policy.choose(_peaked(), _flat(), 1000)
    assert choice.alpha == 0.5 and "unreadable fusion entry" in choice.reason


def test_the_recorded_policy_gives_way_to_an_explicit_choice() -> None:
    from semsearch.core.options import fusion_entry
    from semsearch.query.fusion import DEFAULT_ALPHA
    from semsearch.query.weighting import FusionPolicy

    assert fusion_entry("fixed") == {"method": "fixed", "alpha": DEFAULT_ALPHA}
    assert fusion_entry()["method"] == "adaptive"  # what a build records by default
    assert FusionPolicy.from_entry(fusion_entry("fixed")).choose(_peaked(), _flat(), 1000).reason == (
        "alpha 0.5: fixed in the manifest"
    )
    recorded = FusionPolicy.from_entry(fusion_entry("adaptive"))
    assert recorded.method == "adaptive" and recorded.with_method(None) is recorded
    assert recorded.with_method("fixed").choose(_peaked(), _flat(), 1000).alpha == 0.5
    assert FusionPolicy.from_entry(None).with_method("adaptive").choose(_peaked(), _flat(), 1000).alpha > 0.8
    with pytest.raises(ValueError, match="unknown fusion 'learned'"):
        recorded.with_method("learned")


def test_a_lexical_list_normalized_as_its_depth_keeps_a_single_match() -> None:
    """One document holds the query's rare word: z-scored alone it is 0 like every other; against the 999
    candidates that scored BM25's 0 it stands out, and a document BM25 lacks gets the normalized 0."""
    dense_ids, dense_scores = np.arange(10, dtype=np.int64), np.linspace(0.5, 0.4, 10)
    lexical_ids, lexical_scores = np.array([7], dtype=np.int64), np.array([9.0])
    plain, _ = convex_arrays(dense_ids, dense_scores, lexical_ids, lexical_scores, alpha=0.2)
    assert plain[0] == 0  # the match's z-score is 0, as everyone's: the dense order alone decides
    ids, fused = convex_arrays(dense_ids, dense_scores, lexical_ids, lexical_scores, alpha=0.2, lexical_depth=1000)
    assert ids[0] == 7
    sample = np.array([9.0] + [0.0] * 999)
    z_match, z_zero = (9.0 - sample.mean()) / sample.std(), (0.0 - sample.mean()) / sample.std()
    z_dense = (dense_scores - dense_scores.mean()) / dense_scores.std()
    got = dict(zip(ids.tolist(), fused.tolist(), strict=True))
    assert got[7] == pytest.approx(0.2 * z_dense[7] + 0.8 * z_match)
    assert got[0] == pytest.approx(0.2 * z_dense[0] + 0.8 * z_zero)
    # A full list (as long as the depth) is normalized as before.
    full = np.linspace(9.0, 1.0, 10)
    a = convex_arrays(dense_ids, dense_scores, dense_ids, full, alpha=0.3)
    b = convex_arrays(dense_ids, dense_scores, dense_ids, full, alpha=0.3, lexical_depth=10)
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


def test_adaptive_choice_normalizes_bm25_as_the_depth_asked_for() -> None:
    from semsearch.query.weighting import FusionPolicy

    assert FusionPolicy("adaptive").choose(_flat(), np.array([5.0]), 1000).lexical_depth == 1000
    assert FusionPolicy().choose(_flat(), np.array([5.0]), 1000).lexical_depth == 0  # fixed: as before
