"""Conversations, their messages, and the generation record behind each assistant answer.

A `Generation` is the bookkeeping of one upstream request: its status moves from `streaming` to
exactly one terminal state, and it keeps what the gateway reported (IDs, tokens, cost with its
unit and where the number came from) so every answer's cost is on record. The answer's text lives
on the `Message`, flushed there while streaming so a crash loses at most a couple of seconds.

Glossary (the code uses these words for these things, and no other):

- answer: an assistant `Message`, written by one generation.
- generation: one upstream request and its `Generation` row in the cost ledger; `Job` is what the
  worker is asked to run for it, `JobEnd` how it ended, `StartedGeneration` what starting one
  returns. It ends `completed` when it ended normally (the stream's own `Completion.outcome` says
  `complete`, the conformance contract's word for a stream read to `[DONE]` without error).
- turn: the user's message and the answer to it, one generation or, when the model calls tools,
  several rounds.
- round: one request of a tool-calling turn (`Generation.tool_round`): round 1 answers the user's
  message, each later one continues from the tool results of the round before.
- gateway: a configured OpenAI-compatible endpoint (`Gateway`), with its key and cost unit.
- dialect: which documented API a gateway speaks (`gateway_client.dialects`), set or detected.
- read aloud: an answer spoken through the gateway's `POST /audio/speech`: a generation of kind
  `Kind.READ_ALOUD` with no answer of its own (`read_aloud` is the answer it reads), its audio
  kept in `ReadAloudAudio`. Its stored kind value is `"speech"`, kept from before the name (money
  rows, CSV exports and the admin's filter links carry it); "speech" otherwise names only the
  upstream endpoint and its model and voice (`Gateway.speech_model`, `speech_voice`).
- transcription: what a person said into the composer's microphone, turned into text by the
  gateway's `POST /audio/transcriptions` (`Gateway.transcription_model`): a generation of kind
  `Kind.TRANSCRIPTION` with no answer; the text goes to the message box, the audio is not kept.
- attachment kinds (`Message.attachments`): `image_url`, an image kept as the URL it came with;
  `image`, an image kept as bytes and served from our origin; `audio`, `file`, `note`.
- upload: a file the user attached to their message (`Upload`, `conversations/uploads.py`): an
  image sent upstream as an `image_url` part, or a document sent as its text; unlike the
  attachments above, which a gateway sent with an answer.
- shared link: a read-only link to one branch of a conversation (`SharedLink`), by an
  unguessable token of which only a digest is kept.
- feedback: a user's thumbs up or down on an answer (`Feedback`), with an optional comment.
- group: a user group, Django's `auth.Group` (made in the admin or mapped from a sign-in
  provider); its `GroupPolicy` says which models and tools its members may use, its
  `SpendingLimit`s what they may spend together, and `GenerationGroup` which generations were
  its (`LedgerDayGroup`, once folded). (The cost summary's `GroupTotals` are rows of a table,
  of any kind.)
- collection: a named set of documents answers can draw on (`Collection`, `chatapp/knowledge`),
  a user's own or shared by an admin as assistants are; each document is a knowledge file
  (`KnowledgeFile`, unlike an upload, kept with its collection and indexed in the background),
  read into chunks (`Chunk`); a chunk found for a question is a passage (`knowledge.passages`).
- keys: `*_pk` holds one of our primary keys; `*_id` is a gateway's ID (generation, request, tool
  call) or Django's foreign-key attribute (`conversation_id`).
"""

# Each package keeps its models in its own `models.py`, in this app (label `chatapp`, one
# `migrations/`); Django looks for them here. Which package a model is in is decided by the
# layer of the code that owns it (docs/architecture.md, "Where the code is").
from chatapp.access.models import GroupPolicy
from chatapp.access.shared_or_own import SharedOrOwn
from chatapp.assistants.models import AnswerSettings, Assistant, ChatDefaults, Prompt
from chatapp.conversations.models import Conversation, Folder, Message, SharedLink, Upload
from chatapp.costs.models import (
    Feedback,
    Generation,
    GenerationGroup,
    LedgerDay,
    LedgerDayGroup,
    SpendingLimit,
    SpendTotal,
)
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.identity.models import (
    PendingApproval,
    ProviderGroupMembership,
    ProviderIdentity,
    SelfSignUp,
)
from chatapp.knowledge.models import Chunk, Collection, KnowledgeFile
from chatapp.read_aloud.models import ReadAloudAudio
from chatapp.shared_cache.models import SharedVersion
from chatapp.tools.models import McpServer, ToolSwitch

__all__ = [
    "AnswerSettings",
    "Assistant",
    "ChatDefaults",
    "Chunk",
    "Collection",
    "Conversation",
    "Feedback",
    "Folder",
    "Gateway",
    "Generation",
    "GenerationGroup",
    "GroupPolicy",
    "KnowledgeFile",
    "LedgerDay",
    "LedgerDayGroup",
    "McpServer",
    "Message",
    "ModelPrice",
    "PendingApproval",
    "Prompt",
    "ProviderGroupMembership",
    "ProviderIdentity",
    "ReadAloudAudio",
    "SelfSignUp",
    "SharedLink",
    "SharedOrOwn",
    "SharedVersion",
    "SpendTotal",
    "SpendingLimit",
    "ToolSwitch",
    "Upload",
]
