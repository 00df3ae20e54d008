"""Watches and `related` by meaning (issue #36, item 6), on the seeds with the fake encoder, on every face.

- A saved query fits a paper by what it says, not by one shared word: "mixture of experts routing and load
  balancing" must not claim a vehicle-routing abstract whose only word in common with it is "routing" (before,
  0.5·z(cosine) + 0.5·z(BM25) over the index gave it a fit of 2.4, over the floor of 2: it landed in `new`'s
  "for watch:moe" and in the digest's section).
- `related` keeps a paper's own topic above its neighbour field: a certified-unlearning abstract written in the
  words of differential privacy lists the unlearning papers before the seed's differential-privacy paper (before,
  by cosine alone, that DP paper came 4th and no unlearning paper in the top 8).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from semsearch import Index, build_index
from semsearch.core.options import MIN_FIT
from semsearch.curate.whats_new import (
    WATCH_SCORINGS,
    Interest,
    Profile,
    fitted_arrivals,
    interest_scores,
    watch_scores,
)
from semsearch.faces.agent_results import new_page, related_page
from semsearch.faces.cli import cli
from semsearch.query.evidence import coverage, coverage_weight, distinctive_terms
from semsearch.query.neighbours import subject_order
from semsearch.write.build import BuildOptions
from tests.helpers import SEEDS, FakeEmbedder, Loop

WATCH = "mixture of experts routing and load balancing"
MOE = (
    "Sparse mixture of experts layers send each token to a few experts chosen by a learned router; we study "
    "routing collapse and propose a load balancing loss that keeps every expert busy without hurting accuracy."
)
ROUTING = "Routing trucks: vehicle routing, depot routing and routing costs under time windows."
SOURCE = (
    "Certified unlearning for the deletion of the data of a user: unlearning after training, unlearning with a "
    "guarantee in the sense of the privacy of the data, with the noise of the mechanism of the model and the "
    "budget of the privacy of the training of the model. Unlearning is then as good as retraining."
)
UNLEARNING = (
    "Machine unlearning benchmark: unlearning methods forget deleted samples; unlearning quality audited against "
    "retraining; unlearning speed measured."
)
SEED_UNLEARNING = "Machine unlearning updates"  # a seed abstract on machine unlearning
SEED_DP = "Differential privacy (DP) limi"  # a seed abstract on differential privacy: the neighbour field


class Reading(Loop):
    """The seeds with a file of arrivals, indexed with the fake encoder; a CLI bound to it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, FakeEmbedder())
        self.run("watch", "add", "moe", WATCH)
        text = "Arrivals\n\n" + "\n\n".join([MOE, ROUTING, SOURCE, UNLEARNING]) + "\n"
        (self.seeds / "zz_arrivals.txt").write_text(text, encoding="utf-8")
        self.rebuild()

    def open(self) -> Index:
        return Index.open(self.index, embedder=self.embedder)

    def id_of(self, opening: str) -> str:
        with self.open() as idx:
            found = [d.id for d in idx.store.iter_documents() if d.text.startswith(opening)]
        assert len(found) == 1, opening
        return found[0]


@pytest.fixture(scope="module")
def reading(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reading]:
    yield Reading(tmp_path_factory.mktemp("watch-meaning"))


def test_one_shared_word_does_not_fit_a_watch_in_new(reading: Reading) -> None:
    """`new`: the MoE abstract is for the watch, the vehicle-routing one (only "routing" in common) is not."""
    rows = {r["id"]: r for r in reading.json("new", "-k", "100", "--json")}
    moe, routing = rows[reading.id_of(MOE[:40])], rows[reading.id_of(ROUTING[:30])]
    assert "watch:moe" in moe["for"]
    assert moe["fit_by"]["watch:moe"] >= MIN_FIT
    assert "watch:moe" not in routing["for"]
    assert routing["fit_by"]["watch:moe"] < MIN_FIT
    assert list(rows).index(moe["id"]) < list(rows).index(routing["id"])


def test_one_shared_word_does_not_fit_a_watch_in_the_digest(reading: Reading) -> None:
    """The digest's section for the watch holds the MoE abstract and not the vehicle-routing one."""
    made = reading.json("digest", "--since", "1", "--format", "json", "--no-bookmark")
    section = next(s for s in made["sections"] if s["name"] == "moe")
    ids = [p["id"] for p in section["papers"]]
    assert reading.id_of(MOE[:40]) in ids
    assert reading.id_of(ROUTING[:30]) not in ids


def test_one_shared_word_does_not_fit_a_watch_for_mcp(reading: Reading) -> None:
    """MCP's `new` pages say why a card is listed: the watch for the MoE abstract only."""
    with reading.open() as idx:
        cards = {c.id: c for c in new_page(idx, since="1", k=50).items}
    assert cards[reading.id_of(MOE[:40])].why and "watch:moe" in (cards[reading.id_of(MOE[:40])].why or "")
    assert "watch:moe" not in (cards[reading.id_of(ROUTING[:30])].why or "")


def test_every_watch_scoring_ranks_the_topic_first_and_only_fixed_fits_the_stray(reading: Reading) -> None:
    """benchmarks/bench_watches.py's --scoring choices, on the constructed case: the earlier fixed fusion is the one
    that lets one shared word fit."""
    with reading.open() as idx:
        X = np.asarray(idx.vectors.matrix, dtype=np.float32)
        rows = idx.lexical.rows_of(idx.vectors.ids)
        at = {int(n): r for r, n in enumerate(idx.vectors.ids)}
        from semsearch.store.layout import doc_num

        moe, routing = at[doc_num(reading.id_of(MOE[:40]))], at[doc_num(reading.id_of(ROUTING[:30]))]
        scores = {s: watch_scores(idx, WATCH, X, rows, s) for s in WATCH_SCORINGS}
        with pytest.raises(ValueError, match="unknown watch scoring"):
            watch_scores(idx, WATCH, X, rows, "bm25")
        default = interest_scores(idx, Profile([Interest("watch", "moe", query=WATCH)]))[0]
    assert np.allclose(default, scores["covered"])
    assert scores["fixed"][routing] >= MIN_FIT  # what the issue saw
    assert scores["covered"][routing] < MIN_FIT
    for s in WATCH_SCORINGS:
        assert scores[s][moe] > scores[s][routing], s


def test_coverage_is_the_share_of_the_query_idf_mass(reading: Reading) -> None:
    """A paper holding every query word covers 1, one holding only "routing" well under the 0.6 that counts in full."""
    with reading.open() as idx:
        lex = idx.lexical
        share = coverage(lex, WATCH)
        row = {int(n): r for r, n in enumerate(lex.ids)}
        from semsearch.store.layout import doc_num

        moe, routing = row[doc_num(reading.id_of(MOE[:40]))], row[doc_num(reading.id_of(ROUTING[:30]))]
        assert share[moe] == pytest.approx(1.0)
        assert 0.0 < share[routing] < 0.5
        assert coverage(lex, "zzzunknownword").max() == 0.0  # a query of words no paper holds covers nothing
    weights = coverage_weight(np.array([0.0, 0.3, 0.6, 1.0]))
    assert weights.tolist() == pytest.approx([0.0, 0.125, 1.0, 1.0])


def test_related_keeps_the_topic_above_the_neighbour_field(reading: Reading) -> None:
    """Library and CLI: both unlearning papers come before the seed's differential-privacy paper."""
    source = reading.id_of(SOURCE[:40])
    want = [reading.id_of(UNLEARNING[:40]), reading.id_of(SEED_UNLEARNING)]
    dp = reading.id_of(SEED_DP)
    with reading.open() as idx:
        ids = [h.id for h in idx.related(source, 20, explain=False)]
        explained = idx.related(source, 5)
    assert all(ids.index(w) < ids.index(dp) for w in want), ids
    assert [h.id for h in explained] == ids[:5]  # explaining changes no order
    cli_ids = [r["id"] for r in reading.json("related", source, "-k", "20", "--json")]
    assert cli_ids == ids


def test_related_pages_keep_one_order(reading: Reading) -> None:
    """MCP's related pages: page two continues page one (the reordering does not depend on k)."""
    source = reading.id_of(SOURCE[:40])
    with reading.open() as idx:
        whole = [h.id for h in idx.related(source, 10, explain=False)]
        first = related_page(idx, source, k=5)
        second = related_page(idx, source, k=5, offset=5)
        scores = [h.score for h in idx.related(source, 10, explain=False)]
    assert [c.id for c in first.items] + [c.id for c in second.items] == whole
    assert all(-1.0 <= s <= 1.0 for s in scores)  # a hit's score stays its cosine


def test_subject_order_keeps_cosine_order_without_subject_words(reading: Reading) -> None:
    """A paper whose words no other paper uses has no subject words: its neighbours stay in cosine order."""
    with reading.open() as idx:
        doc = idx.get(reading.id_of(SOURCE[:40]))
        ranked = [(1, 0.9), (2, 0.8), (3, 0.7)]
        assert subject_order(idx.lexical, doc, ranked, "cosine") == ranked
        with pytest.raises(ValueError, match="unknown related order"):
            subject_order(idx.lexical, doc, ranked, "title")
        assert "unlearn" in distinctive_terms(idx.lexical, SOURCE)
        assert distinctive_terms(idx.lexical, "qqqzz xxyyz") == {}
        lonely = dataclasses.replace(doc, text="qqqzz xxyyz", title=None)
        assert subject_order(idx.lexical, lonely, ranked) == ranked


def test_http_new_and_related_agree_with_the_library(reading: Reading) -> None:
    """The server (and so the page) lists what the library does: the watch's fit and `related`'s order."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    source = reading.id_of(SOURCE[:40])
    with reading.open() as idx:
        related = [h.id for h in idx.related(source, 10, explain=False)]
    with TestClient(create_app(reading.index, embedder=reading.embedder), base_url="http://localhost") as client:
        hits = client.get("/api/new", params={"since": "1", "k": 50}).json()["hits"]
        api_related = [h["id"] for h in client.get(f"/api/related/{source}", params={"k": 10}).json()["hits"]]
    by_id = {h["id"]: h for h in hits}
    assert "watch:moe" in by_id[reading.id_of(MOE[:40])]["for"]
    assert "watch:moe" not in by_id[reading.id_of(ROUTING[:30])]["for"]
    assert api_related == related


# ---------------------------------------------------------------- saved queries read as a search reads them
#
# A saved query is read by the query language (query.syntax) as `semsearch query` reads it: `year:>=2024` is a
# filter, `-survey` leaves out surveys, and its words rank with typos corrected for BM25. Before, the whole text
# was plain words: "year:>=2024" was two more words to match and a 2019 paper about diffusion fitted the watch.

DIFFUSION = "Denoising diffusion models generate images by reversing a diffusion process; {} diffusion models."
FIELDED = [
    {
        "title": "Diffusion models in 2019",
        "authors": ["Ada Old"],
        "year": 2019,
        "venue": "neurips",
        "abstract": DIFFUSION.format("early"),
    },
    {
        "title": "Diffusion models in 2025",
        "authors": ["Ben New"],
        "year": 2025,
        "venue": "neurips",
        "abstract": DIFFUSION.format("faster"),
    },
    {
        "title": "A survey of diffusion models",
        "authors": ["Cy Review"],
        "year": 2025,
        "venue": "neurips",
        "abstract": "A survey: " + DIFFUSION.format("surveyed"),
    },
]


class Fielded:
    """The seeds and three diffusion papers with authors and years (2019, 2025, a 2025 survey)."""

    def __init__(self, root: Path) -> None:
        self.seeds = root / "seeds"
        shutil.copytree(SEEDS, self.seeds)
        papers = root / "papers.jsonl"
        papers.write_text("".join(json.dumps(p) + "\n" for p in FIELDED), encoding="utf-8")
        self.index = root / "idx"
        self.embedder = FakeEmbedder()
        build_index([str(self.seeds), str(papers)], self.index, BuildOptions(progress=False), embedder=self.embedder)

    def invoke(self, *args: str) -> Result:
        return CliRunner().invoke(cli, [*args, "--index", str(self.index)], obj={"embedder": self.embedder})

    def open(self) -> Index:
        return Index.open(self.index, embedder=self.embedder)

    def fits(self, query: str) -> dict[str, float]:
        """Each fielded paper's score for a watch of ``query`` (by title), as `new` ranks what arrived."""
        with self.open() as idx:
            papers = fitted_arrivals(idx, [], profile=Profile([Interest("watch", "w", query=query)]))
        return {p.hit.title or "": p.fit_by["watch:w"] for p in papers if p.hit.title in TITLES}


TITLES = {p["title"] for p in FIELDED}
OLD, NEW, SURVEY = (str(p["title"]) for p in FIELDED)


@pytest.fixture(scope="module")
def fielded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fielded]:
    yield Fielded(tmp_path_factory.mktemp("watch-fields"))


def test_a_watch_with_a_year_does_not_fit_an_older_paper(fielded: Fielded) -> None:
    """`diffusion year:>=2024` fits the 2025 diffusion paper, not the 2019 one (before: the 2019 one fitted)."""
    fits = fielded.fits("diffusion models year:>=2024")
    assert fits[NEW] >= MIN_FIT
    assert fits[OLD] < MIN_FIT
    assert fits[OLD] < min(fits[NEW], fits[SURVEY])
    assert fielded.fits("diffusion models")[OLD] >= MIN_FIT  # the year, not the words, keeps it out


def test_a_watch_with_an_excluded_word_does_not_fit_a_survey(fielded: Fielded) -> None:
    """`-survey` leaves the survey out of the watch, in the library and in `new --json` (the CLI face)."""
    fits = fielded.fits("diffusion models -survey")
    assert fits[NEW] >= MIN_FIT
    assert fits[SURVEY] < MIN_FIT
    assert fielded.invoke("watch", "add", "diff", "diffusion models -survey year:2025").exit_code == 0
    try:
        result = fielded.invoke("new", "-k", "200", "--json")
        assert result.exit_code == 0, result.output
        rows = {r["title"]: r for r in json.loads(result.output)}
        assert "watch:diff" in rows[NEW]["for"]
        assert "watch:diff" not in rows[SURVEY]["for"]  # a -word
        assert "watch:diff" not in rows[OLD]["for"]  # a year
        made = fielded.invoke("digest", "--since", "2000-01-01", "--format", "json", "--no-bookmark")
        assert made.exit_code == 0, made.output
        section = next(s for s in json.loads(made.output)["sections"] if s["name"] == "diff")
        assert [p["title"] for p in section["papers"] if p["title"] in TITLES] == [NEW]
        with fielded.open() as idx:
            cards = {c.title: c for c in new_page(idx, since="2000-01-01", k=200).items}
        assert "watch:diff" in (cards[NEW].why or "")
        for other in (SURVEY, OLD):  # listed without the watch as a reason, or not on the first page at all
            assert other not in cards or "watch:diff" not in (cards[other].why or "")
    finally:
        assert fielded.invoke("watch", "remove", "diff").exit_code == 0


def test_a_watch_with_typos_fits_what_the_spelled_watch_fits_lexically(fielded: Fielded) -> None:
    """ "difussion modles" is searched by BM25 as "diffusion models" (the dense side reads it as typed)."""
    from semsearch.curate.watch_reading import read_watch

    with fielded.open() as idx:
        reading = read_watch(idx, "difussion modles")
        assert reading.lexical_text == idx.spell("difussion modles").text == "diffusion models"
        assert reading.dense_text == "difussion modles"
    typo, spelled = fielded.fits("difussion modles"), fielded.fits("diffusion models")
    assert {t for t, s in typo.items() if s >= MIN_FIT} == {t for t, s in spelled.items() if s >= MIN_FIT} == TITLES


def test_a_watch_of_a_person_fits_their_papers_only(fielded: Fielded) -> None:
    """`author:"Ben New"` names a person: their paper fits, the others get no fit from the watch."""
    fits = fielded.fits('diffusion models author:"Ben New"')
    assert fits[NEW] >= MIN_FIT
    assert fits[OLD] < MIN_FIT and fits[SURVEY] < MIN_FIT
    alone = fielded.fits('author:"Ben New"')  # only a person: their papers fit, at the floor of a fit
    assert alone[NEW] >= MIN_FIT and alone[OLD] < MIN_FIT
    unknown = fielded.fits("diffusion models author:Nobody")  # no such person: an authors~ filter, none pass
    assert max(unknown.values()) < MIN_FIT


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("privacy year:>=abc", "year:>=abc is not a year"),
        ('privacy "unclosed', "unclosed"),
        ("privacy author:", "author: needs a value"),
        ("year:>=2024 -survey", "no words to rank by"),
    ],
)
def test_watch_add_refuses_a_malformed_query_when_saved(fielded: Fielded, query: str, says: str) -> None:
    """`watch add` reads the query as search does and refuses what it cannot read: one line, exit 2, nothing saved."""
    result = fielded.invoke("watch", "add", "bad", query)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    listed = fielded.invoke("watch", "list", "--json")
    assert "bad" not in [w["name"] for w in json.loads(listed.output)]


def test_a_watch_saved_before_the_query_language_is_still_followed(fielded: Fielded) -> None:
    """A malformed watch saved by an older semsearch reads as plain words: `new` still ranks, never fails."""
    fits = fielded.fits('diffusion models "unclosed')
    assert fits[NEW] >= MIN_FIT
