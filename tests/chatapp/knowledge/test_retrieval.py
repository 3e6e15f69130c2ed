"""`chatapp/knowledge/retrieval.py` over the real store and the emulator's real `/embeddings`:
a question whose answer is in one passage finds it in the top 3, only in collections the user
may use, within the token budget; the question's embedding is on the ledger as the user's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from chatapp.costs.models import Generation
from chatapp.knowledge import ingest
from chatapp.knowledge.models import Collection, KnowledgeFile
from chatapp.knowledge.retrieval import fused, retrieve
from chatapp.knowledge.stores.base import Hit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedding_gateway")]

# One topic per section; each question's answer is in exactly one of them.
CORPUS = {
    "Annual leave": "Every employee receives twenty-eight days of paid annual leave per year. "
    "Unused days may be carried over until the end of March.",
    "Expenses": "Receipts for expenses must be submitted within thirty days through the finance "
    "portal. Claims above five hundred euros need a director's approval.",
    "Office hours": "The office opens at eight in the morning and closes at seven in the evening "
    "on weekdays. It is closed on public holidays.",
    "Laptops": "New laptops are ordered by the IT desk and arrive within two weeks. Lost laptops "
    "must be reported to security immediately.",
    "Parking": "The car park beneath the building has forty spaces, assigned by seniority. "
    "Bicycles go in the racks by the north entrance.",
    "Security badges": "Visitors receive a temporary badge at reception and must be accompanied "
    "at all times. Badges are returned on leaving.",
    "Coffee": "The kitchen on the third floor has an espresso machine; descaling is done every "
    "Friday by whoever made the last cup.",
    "Training": "Each team member has a budget of two thousand euros a year for courses and "
    "conferences, approved by their manager.",
    "Remote work": "Staff may work from home up to three days a week, provided their calendar "
    "shows where they are.",
    "Fire drills": "Fire drills happen twice a year without warning; the assembly point is the "
    "square across the street.",
}
QUESTIONS = [
    ("How many days of paid annual leave do I get?", "Annual leave"),
    ("Who must approve an expense claim over 500 euros?", "Expenses"),
    ("When does the office close in the evening?", "Office hours"),
    ("What should I do if I lose my laptop?", "Laptops"),
    ("Where do I leave my bicycle?", "Parking"),
    ("Do visitors need to be accompanied?", "Security badges"),
    ("How often is the espresso machine descaled?", "Coffee"),
    ("What is the budget for conferences?", "Training"),
    ("How many days a week can I work from home?", "Remote work"),
    ("Where is the assembly point during a fire drill?", "Fire drills"),
]
MARKDOWN = "\n\n".join(f"# {heading}\n\n{text}" for heading, text in CORPUS.items())


@pytest.fixture
async def indexed_handbook(
    handbook: Collection, added: Callable[..., KnowledgeFile]
) -> KnowledgeFile:
    file = await sync_to_async(added)(handbook, "handbook.md", MARKDOWN)
    await ingest.index(file.pk)
    file = await KnowledgeFile.objects.aget(pk=file.pk)
    assert file.state == KnowledgeFile.State.READY
    return file


@pytest.mark.parametrize(("question", "heading"), QUESTIONS)
async def test_the_passage_holding_the_answer_is_in_the_top_three(
    indexed_handbook: KnowledgeFile, handbook: Collection, alice: Any, question: str, heading: str
) -> None:
    passages = await retrieve(alice, [handbook.pk], [], question, token_budget=10_000)
    assert heading in [p.heading for p in passages[:3]], [p.heading for p in passages[:3]]
    found = next(p for p in passages if p.heading == heading)
    assert found.file_name == "handbook.md"
    assert found.file_id == indexed_handbook.pk
    assert CORPUS[heading] in found.text


async def test_the_questions_embedding_is_the_users_spend_on_the_ledger(
    indexed_handbook: KnowledgeFile, handbook: Collection, alice: Any
) -> None:
    before = await Generation.objects.filter(kind=Generation.Kind.EMBEDDING).acount()
    await retrieve(alice, [handbook.pk], [], "Where do I park?", token_budget=1000)
    rows = [
        g async for g in Generation.objects.filter(kind=Generation.Kind.EMBEDDING).order_by("pk")
    ]
    assert len(rows) == before + 1
    assert (rows[-1].user_id, rows[-1].status) == (alice.pk, Generation.Status.COMPLETED)


async def test_passages_fit_the_token_budget(
    indexed_handbook: KnowledgeFile, handbook: Collection, alice: Any
) -> None:
    everything = await retrieve(
        alice, [handbook.pk], [], "leave badges laptops", token_budget=10_000
    )
    tokens = {c.pk: c.token_count async for c in indexed_handbook.chunks.all()}
    budget = tokens[everything[0].chunk_id] + tokens[everything[1].chunk_id]
    some = await retrieve(alice, [handbook.pk], [], "leave badges laptops", token_budget=budget)
    assert 2 <= len(some) < len(everything)
    assert sum(tokens[p.chunk_id] for p in some) <= budget
    assert await retrieve(alice, [handbook.pk], [], "leave", token_budget=0) == []


async def test_another_users_collection_is_never_searched(
    indexed_handbook: KnowledgeFile, handbook: Collection, bob: Any
) -> None:
    question = "How many days of paid annual leave do I get?"
    assert (
        await retrieve(bob, [handbook.pk], [indexed_handbook.pk], question, token_budget=9999) == []
    )


async def test_a_collection_shared_with_a_group_is_searched_by_its_members_only(
    added: Callable[..., KnowledgeFile], bob: Any, django_user_model: Any
) -> None:
    group = await Group.objects.acreate(name="staff")
    shared = await Collection.objects.acreate(owner=None, name="Company")
    await shared.groups.aadd(group)
    file = await sync_to_async(added)(shared, "handbook.md", MARKDOWN)
    await ingest.index(file.pk)
    question = "Where is the assembly point during a fire drill?"
    assert await retrieve(bob, [shared.pk], [], question, token_budget=9999) == []
    await bob.groups.aadd(group)
    passages = await retrieve(bob, [shared.pk], [], question, token_budget=9999)
    assert passages[0].heading == "Fire drills"


async def test_naming_a_file_searches_that_file_only(
    indexed_handbook: KnowledgeFile,
    handbook: Collection,
    added: Callable[..., KnowledgeFile],
    alice: Any,
) -> None:
    other = await sync_to_async(added)(handbook, "more.md", "# Parking\n\nNo parking on Sundays.")
    await ingest.index(other.pk)
    passages = await retrieve(alice, [], [other.pk], "parking bicycle", token_budget=9999)
    assert {p.file_id for p in passages} == {other.pk}
    both = await retrieve(alice, [handbook.pk], [], "parking bicycle", token_budget=9999)
    assert {p.file_id for p in both} == {other.pk, indexed_handbook.pk}


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    vectors = [Hit(1, 0.9), Hit(2, 0.8), Hit(3, 0.7)]
    words = [Hit(3, 9.0), Hit(4, 8.0), Hit(1, 1.0)]
    # 1 and 3 are in both; 2 and 4 are second in one each (a tie, by chunk id).
    assert [pk for pk, _ in fused([vectors, words])] == [1, 3, 2, 4]
