"""A PDF and another source's record of the same paper merge by DOI or arXiv id; two papers never do."""

from __future__ import annotations

import pytest

from semsearch.core.records import Provenance, Record
from semsearch.dedup.duplicates import deduplicate, near_similarity
from semsearch.dedup.paper_ids import (
    ARXIV,
    DOI,
    normal_arxiv,
    normal_doi,
    paper_ids,
    same_paper_links,
    titles_agree,
)

TITLE = "TransPose: Keypoint Localization via Transformer"
ANTHOLOGY = (
    "While CNN-based models have made remarkable progress on human pose estimation, what spatial dependencies they "
    "capture to localize keypoints remains unclear. In this work, we propose a model called TransPose, which "
    "introduces Transformer for human pose estimation. The attention layers built in Transformer enable our model "
    "to capture long-range relationships efficiently and also can reveal what dependencies the predicted keypoints "
    "rely on."
)
PUBLISHED = (
    "Convolutional networks now estimate human pose well, yet which spatial dependencies they capture to localize "
    "keypoints is unclear. We present TransPose, a model that brings the Transformer to human pose estimation. Its "
    "attention layers let the model capture long-range relations efficiently and show which dependencies the "
    "predicted keypoints rely on."
)
OTHER = (
    "We study federated optimisation under partial participation and show that client sampling with variance "
    "reduction converges at the rate of full participation while communicating a fraction of the updates."
)


def _pdf(text: str, title: str = TITLE, **ids: str) -> Record:
    meta = {"file": "/papers/p.pdf", "pages": 9, **ids}
    return Record(text=text, provenance=Provenance("papers/p.pdf", "page", 1), title=title, metadata=meta)


def _jsonl(text: str, title: str = TITLE, number: int = 1, **fields: str) -> Record:
    return Record(text=text, provenance=Provenance("papers.jsonl", "line", number), title=title, metadata=fields)


def test_the_edited_abstract_is_no_near_duplicate_of_the_record() -> None:
    assert near_similarity(ANTHOLOGY, PUBLISHED) < 0.7  # what the id match is for


@pytest.mark.parametrize(
    ("value", "doi"),
    [
        ("10.1109/ICCV48922.2021.01159", "10.1109/iccv48922.2021.01159"),
        ("doi:10.1109/ICCV48922.2021.01159", "10.1109/iccv48922.2021.01159"),
        ("https://doi.org/10.1145/3580305.3599256", "10.1145/3580305.3599256"),
        ("http://dx.doi.org/10.1007/978-3-030-01237-3_47.", "10.1007/978-3-030-01237-3_47"),
        ("not a doi", None),
        ("", None),
    ],
)
def test_dois_are_compared_bare_and_lower_cased(value: str, doi: str | None) -> None:
    assert normal_doi(value) == doi


@pytest.mark.parametrize(
    ("value", "arxiv"),
    [
        ("2106.09685v2", "2106.09685"),
        ("arXiv:2106.09685", "2106.09685"),
        ("arXiv: 2304.02643v3", "2304.02643"),
        ("cs/0112017v1", "cs/0112017"),
        ("math.GT/0309136", "math.gt/0309136"),
        ("2106", None),
        ("https://arxiv.org/abs/2106.09685", None),  # a link is read as a link (paper_ids), not as a bare id
    ],
)
def test_arxiv_ids_are_compared_without_their_version(value: str, arxiv: str | None) -> None:
    assert normal_arxiv(value) == arxiv


def test_ids_come_from_the_fields_sources_use() -> None:
    assert paper_ids({"DOI": "10.1109/ICCV48922.2021.01159"}) == {(DOI, "10.1109/iccv48922.2021.01159")}
    assert paper_ids({"url": "https://arxiv.org/abs/2304.02643v3"}) == {(ARXIV, "2304.02643")}
    assert paper_ids({"pdf_url": "https://arxiv.org/pdf/2304.02643v1.pdf"}) == {(ARXIV, "2304.02643")}
    assert paper_ids({"url": "https://doi.org/10.1145/3580305.3599256"}) == {(DOI, "10.1145/3580305.3599256")}
    assert paper_ids({"eprint": "2304.02643", "archivePrefix": "arXiv"}) == {(ARXIV, "2304.02643")}
    assert paper_ids({"eprint": "2304.02643", "archiveprefix": "HAL"}) == set()
    assert paper_ids({"doi": "10.48550/arXiv.2304.02643"}) == {
        (DOI, "10.48550/arxiv.2304.02643"),
        (ARXIV, "2304.02643"),
    }
    assert paper_ids({"url": "https://openreview.net/forum?id=x", "doi": "", "arxiv": None}) == set()
    assert paper_ids({"journal": "arXiv preprint arXiv:2106.09685"}) == {(ARXIV, "2106.09685")}
    assert paper_ids({"extra": "arXiv: 2106.09685v2\nCitation Key: hu2021"}) == {(ARXIV, "2106.09685")}
    assert paper_ids({"venue": "ICLR 2022"}) == set()


def test_a_bibtex_entry_and_the_pdf_of_its_paper_merge() -> None:
    pytest.importorskip("bibtexparser")
    from semsearch.ingest.bibtex import bibtex_items
    from semsearch.ingest.fields import collect

    bib = (
        "@article{yang2021transpose,\n  title = {{TransPose}: Keypoint Localization via Transformer},\n"
        "  author = {Yang, Sen and Quan, Zhibin},\n  journal = {arXiv preprint arXiv:2012.14214},\n"
        f"  year = {{2021}},\n  abstract = {{{ANTHOLOGY}}}\n}}\n"
    )
    records, _ = collect(bibtex_items(bib, "refs.bib"), skip_bad=False)
    pdf = _pdf(PUBLISHED, arxiv="2012.14214v4")
    assert len(deduplicate([*records, pdf]).documents) == 1


def test_titles_agree_when_one_paper_is_named() -> None:
    assert titles_agree(TITLE, "TransPose: Keypoint Localization via Transformer (extended version)")
    assert titles_agree(None, TITLE) and titles_agree(TITLE, "")
    assert not titles_agree(TITLE, "Federated Optimisation under Partial Participation")


def test_a_pdf_showing_the_records_doi_merges_with_it_despite_an_edited_abstract() -> None:
    record = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159", venue="iccv")
    pdf = _pdf(PUBLISHED, doi="10.1109/iccv48922.2021.01159")
    for records in ([record, pdf], [pdf, record]):
        result = deduplicate(records)
        assert len(result.documents) == 1
        doc = result.documents[0]
        assert {p.kind for p in doc.sources} == {"line", "page"}
        assert doc.metadata["file"] == "/papers/p.pdf" and doc.metadata["venue"] == "iccv"
        assert result.near_duplicates == 1


def test_an_arxiv_stamp_matches_the_records_arxiv_link() -> None:
    record = _jsonl(ANTHOLOGY, url="https://arxiv.org/abs/2012.14214")
    pdf = _pdf(PUBLISHED, arxiv="2012.14214v4")
    assert len(deduplicate([record, pdf]).documents) == 1


def test_two_papers_with_different_ids_stay_apart() -> None:
    record = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159")
    pdf = _pdf(PUBLISHED, doi="10.1109/ICCV48922.2021.01160")
    assert len(deduplicate([record, pdf]).documents) == 2
    # A DOI and an arXiv id are never compared with each other.
    record = _jsonl(ANTHOLOGY, doi="10.48550/2304.02643")
    pdf = _pdf(PUBLISHED, arxiv="2304.02643")
    assert len(deduplicate([record, pdf]).documents) == 2


def test_a_shared_id_with_a_conflicting_one_of_the_other_kind_is_no_match() -> None:
    record = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159", arxiv="2012.14214")
    pdf = _pdf(PUBLISHED, doi="10.1109/ICCV48922.2021.01159", arxiv="1706.03762")
    assert same_paper_links([record, pdf]) == []


def test_a_doi_that_page_one_cites_does_not_merge_another_paper() -> None:
    record = _jsonl(OTHER, "Federated Optimisation under Partial Participation", doi="10.1145/3580305.3599256")
    pdf = _pdf(PUBLISHED, doi="10.1145/3580305.3599256")  # its title is TransPose's
    assert len(deduplicate([record, pdf]).documents) == 2


def test_two_records_of_other_sources_sharing_a_doi_stay_as_their_abstracts_say() -> None:
    one = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159")
    two = _jsonl(PUBLISHED, number=2, doi="10.1109/ICCV48922.2021.01159")
    assert len(deduplicate([one, two]).documents) == 2


def test_no_near_merges_only_exact_copies_ids_included() -> None:
    record = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159")
    pdf = _pdf(PUBLISHED, doi="10.1109/ICCV48922.2021.01159")
    assert len(deduplicate([record, pdf], near=False).documents) == 2


def test_a_pdf_ties_every_record_that_shares_its_id() -> None:
    one = _jsonl(ANTHOLOGY, doi="10.1109/ICCV48922.2021.01159")
    two = _jsonl(OTHER, TITLE, number=2, url="https://doi.org/10.1109/ICCV48922.2021.01159")
    pdf = _pdf(PUBLISHED, doi="10.1109/ICCV48922.2021.01159")
    assert same_paper_links([one, two, pdf]) == [(0, 2), (1, 2)]
    assert len(deduplicate([one, two, pdf]).documents) == 1
