"""Text the emulated model "writes", and how it is cut into tokens.

Answers are deterministic functions of the prompt so tests can predict them, yet varied enough to
exercise a renderer: headings, lists, fenced code, tables, inline markup and multibyte UTF-8.
Tokens are word-ish pieces of at most a few characters (leading whitespace attached), which is
close enough to a real tokenizer for pacing and for splitting multibyte text across chunks.
"""

from __future__ import annotations

import re

__all__ = [
    "budget_reasoning",
    "estimate_tokens",
    "keywords",
    "long_answer",
    "markdown_answer",
    "reasoning_text",
    "split_tokens",
]

_PIECE = re.compile(r"\s*\S{1,4}|\s+")
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "what",
        "which",
        "about",
        "from",
        "into",
        "your",
        "you",
        "are",
        "was",
        "were",
        "how",
        "why",
        "can",
        "could",
        "would",
        "should",
        "please",
        "tell",
        "give",
        "explain",
        "show",
        "me",
        "some",
        "any",
    ]
)


def split_tokens(text: str) -> list[str]:
    """Split `text` into pieces of at most four visible characters; joining them gives `text`."""
    return _PIECE.findall(text)


def estimate_tokens(text: str) -> int:
    """Prompt-side token estimate: about four characters a token, at least one."""
    return max(1, (len(text) + 3) // 4)


def keywords(prompt: str, limit: int = 4) -> list[str]:
    """Up to `limit` distinct content words of `prompt`, in order; placeholders if it has none."""
    seen: list[str] = []
    for word in _WORD.findall(prompt):
        if word.lower() in _STOP or word.lower() in (w.lower() for w in seen):
            continue
        seen.append(word)
        if len(seen) == limit:
            break
    fallbacks = ["streams", "tokens", "gateways", "latency"]
    while len(seen) < limit:
        seen.append(fallbacks[len(seen)])
    return seen


def title_for(prompt: str) -> str:
    """The `title` scenario's answer: the content words of the question in `prompt` (what
    follows its "Question:" line, as the app asks, up to "Answer:"), at most five, capitalized."""
    question = prompt.partition("Question:")[2] or prompt
    question = question.partition("Answer:")[0]
    words: list[str] = []
    for word in _WORD.findall(question):
        if word.lower() not in _STOP and word.lower() not in (w.lower() for w in words):
            words.append(word)
        if len(words) == 5:
            break
    title = " ".join(words) or "A new conversation"
    return title[:1].upper() + title[1:]


def _topic(prompt: str) -> str:
    words = prompt.split()
    topic = " ".join(words[:8]) + (" …" if len(words) > 8 else "")
    return topic.replace("\n", " ").strip() or "your question"


def markdown_answer(prompt: str) -> str:
    """The `chat` scenario's answer: a markdown document that mentions words of `prompt`."""
    first, second, third, fourth = keywords(prompt)
    rows = "\n".join(f"| {w} | {len(w)} | {w[::-1]} |" for w in (first, second, third, fourth))
    return (
        f"## About “{_topic(prompt)}”\n\n"
        f"You asked about **{first}**, *{second}* and `{third}`. Here is a short, structured "
        f"overview — with a little UTF-8 along the way: Olá, 你好, 🙂.\n\n"
        f"- **{first}**: the main subject of the question.\n"
        f"- **{second}**: closely related, and worth a second look.\n"
        f"- **{third}** and **{fourth}**: details that often matter in practice.\n\n"
        "```python\n"
        f"def summarize(words: list[str]) -> str:\n"
        f'    """Join the key words: {first}, {second}."""\n'
        f'    return ", ".join(sorted(words))\n'
        "\n"
        f'print(summarize(["{first}", "{second}", "{third}"]))\n'
        "```\n\n"
        "| word | length | reversed |\n"
        "| --- | ---: | --- |\n"
        f"{rows}\n\n"
        f"In short: **{first}** matters most, then {second}. Ask again for more depth."
    )


def cited_answer(prompt: str, sources: int) -> str:
    """The `chat` scenario's answer when the request quotes numbered sources: it cites [1] (and
    [2] when there are two or more) before the usual document, always the same way."""
    first = keywords(prompt)[0]
    second = " Another passage adds detail [2]." if sources > 1 else ""
    return (
        f"From your documents: the passage on **{first}** answers this [1].{second}\n\n"
        + markdown_answer(prompt)
    )


def reasoning_text(prompt: str) -> str:
    """Visible reasoning that precedes an answer."""
    first, second, third, _ = keywords(prompt)
    return (
        f"The user asks about {first} and {second}. I should answer briefly but with structure: "
        f"a heading, a list of the key points, then a small example involving {third}. "
        "Let me check the facts before answering, and keep the tone neutral."
    )


def budget_reasoning(prompt: str) -> str:
    """Reasoning that goes on (about 160 tokens, more than the `length` scenario's default budget):
    what that scenario thinks before it answers."""
    first, second, third, fourth = keywords(prompt)
    step = (
        f"Let me think about {first} carefully. First consider {second}, then {third}; "
        f"but {fourth} changes the picture, so I should reconsider the assumptions again. "
    )
    return step * 4


def long_answer(prompt: str, tokens: int) -> str:
    """About `tokens` tokens of numbered markdown sections for the `long` scenario."""
    first, second, third, fourth = keywords(prompt)
    parts = [f"# A long answer about {first}\n\n"]
    size = 0
    section = 0
    while size < tokens:
        section += 1
        block = (
            f"## Part {section}: {second} and {third}\n\n"
            f"Paragraph {section} explains how {first} relates to {second}. It keeps going so the "
            f"stream lasts a while, mentioning {fourth} and “quoted” text, café, naïve, 日本語 "
            "and a few emoji 🚀✨ to keep multibyte characters in play.\n\n"
            f"1. Point {section}.1 about {third}\n2. Point {section}.2 about {fourth}\n\n"
        )
        parts.append(block)
        size += len(split_tokens(block))
    return "".join(parts).rstrip() + "\n"
