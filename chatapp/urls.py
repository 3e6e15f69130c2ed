"""URL routes: sign-in, the chat pages and their htmx endpoints, shared links, and the admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from chatapp.access import login_limits
from chatapp.identity import password, provider_views, sign_in, sign_up
from chatapp.read_aloud import views as read_aloud
from chatapp.views import (
    answer_settings,
    assistants,
    branches,
    code_frames,
    comparison,
    feedback,
    files,
    importing,
    knowledge,
    knowledge_menu,
    library,
    new_chat,
    not_found,
    organising,
    prompts,
    shared_links,
    transcription,
)
from chatapp.views import chat as views

chat_patterns = [
    path("", views.home, name="home"),
    path("c/new/send/", comparison.send, name="send_new"),
    path("c/new/settings/", answer_settings.new_chat_settings, name="new_chat_settings"),
    path("c/<int:pk>/", views.conversation_page, name="conversation"),
    path("c/<int:pk>/send/", comparison.send, name="send"),
    path("c/<int:pk>/rename/", views.rename, name="rename"),
    path("c/<int:pk>/delete/", library.delete, name="delete"),
    path("c/<int:pk>/remove/", library.delete_entry, name="delete_entry"),
    path("c/<int:pk>/export.md", library.export_markdown, name="export_markdown"),
    path("c/<int:pk>/export.json", library.export_json, name="export_json"),
    path("c/<int:pk>/pin/", organising.pin, name="pin"),
    path("c/<int:pk>/archive/", organising.archive, name="archive"),
    path("c/<int:pk>/restore/", organising.restore, name="restore"),
    path("c/<int:pk>/move/", organising.move, name="move"),
    path("c/selected/", organising.bulk, name="bulk"),
    path("archived/", organising.archived, name="archived"),
    path("sidebar/", organising.sidebar, name="sidebar"),
    path("folders/", organising.create_folder, name="create_folder"),
    path("folders/<int:pk>/rename/", organising.rename_folder, name="rename_folder"),
    path("folders/<int:pk>/delete/", organising.delete_folder, name="delete_folder"),
    path("folders/<int:pk>/collapse/", organising.collapse_folder, name="collapse_folder"),
    path("import/", importing.import_page, name="import"),
    path("search/", library.search, name="search"),
    path("knowledge/menu/", knowledge_menu.menu, name="knowledge_menu"),
    path(
        "c/<int:pk>/settings/",
        answer_settings.conversation_settings,
        name="conversation_settings",
    ),
    path("settings/", answer_settings.defaults, name="defaults"),
    path("c/new/assistant/", new_chat.choose_assistant, name="new_chat_assistant"),
    path("settings/assistants/", assistants.assistants, name="assistants"),
    path("settings/assistants/new/", assistants.new_assistant, name="new_assistant"),
    path("settings/assistants/<int:pk>/", assistants.edit_assistant, name="edit_assistant"),
    path(
        "settings/assistants/<int:pk>/delete/",
        assistants.delete_assistant,
        name="delete_assistant",
    ),
    path("knowledge/", knowledge.collections, name="knowledge"),
    path("knowledge/new/", knowledge.new_collection, name="new_collection"),
    path("knowledge/<int:pk>/", knowledge.collection, name="collection"),
    path("knowledge/<int:pk>/files/", knowledge.collection_files, name="collection_files"),
    path(
        "knowledge/<int:pk>/files/<int:file_pk>/remove/",
        knowledge.remove_file,
        name="remove_knowledge_file",
    ),
    path(
        "knowledge/<int:pk>/files/<int:file_pk>/reindex/",
        knowledge.reindex_file,
        name="reindex_knowledge_file",
    ),
    path("knowledge/<int:pk>/delete/", knowledge.delete_collection, name="delete_collection"),
    path("settings/prompts/", prompts.prompts, name="prompts"),
    path("settings/prompts/new/", prompts.edit_prompt, name="new_prompt"),
    path("settings/prompts/<int:pk>/", prompts.edit_prompt, name="edit_prompt"),
    path("settings/prompts/<int:pk>/delete/", prompts.delete_prompt, name="delete_prompt"),
    path("m/<int:pk>/", views.message_fragment, name="message"),
    path("m/<int:pk>/source/", views.message_source, name="message_source"),
    path("m/<int:pk>/retry/", views.retry, name="retry"),
    path("m/<int:pk>/continue/", views.continue_answer, name="continue"),
    path("m/<int:pk>/edit/", branches.edit_message, name="edit"),
    path("m/<int:pk>/show/", branches.show_version, name="show_version"),
    path("m/<int:pk>/choose/", comparison.choose, name="choose"),
    path("m/<int:pk>/feedback/", feedback.feedback, name="feedback"),
    path("m/<int:pk>/attachments/<int:index>/", files.attachment, name="attachment"),
    path("u/<int:pk>/", files.upload, name="upload"),
    path("m/<int:pk>/speech/", read_aloud.read_aloud, name="read_aloud"),
    path("transcribe/", transcription.transcribe, name="transcribe"),
    path("m/<int:pk>/speech/state/", read_aloud.read_aloud_state, name="read_aloud_state"),
    path("g/<int:pk>/stop/", views.stop, name="stop"),
    path("c/<int:pk>/share/", shared_links.share, name="share"),
    path("shared/", shared_links.links, name="shared_links"),
    path("shared/<int:pk>/revoke/", shared_links.revoke, name="revoke_shared_link"),
    # Anyone's, signed in or not: the token is the key.
    path("s/<str:token>/", shared_links.shared_page, name="shared_page"),
    path(
        "s/<str:token>/images/<int:position>/<int:index>/",
        shared_links.shared_image,
        name="shared_image",
    ),
]

# Every form that checks a password counts failures on the same counters.
admin.site.login_form = login_limits.LimitedAdminAuthenticationForm
admin.site.password_change_form = login_limits.LimitedAdminPasswordChangeForm

urlpatterns = [
    path("", include((chat_patterns, "chat"))),
    path("accounts/login/", sign_in.sign_in, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", password.change, name="password_change"),
    path("accounts/password/changed/", password.done, name="password_change_done"),
    path("accounts/sign-up/", sign_up.sign_up, name="sign_up"),
    path("accounts/waiting/", sign_up.pending, name="pending_approval"),
    path(
        "oidc/authenticate/", provider_views.SignInStart.as_view(), name="oidc_authentication_init"
    ),
    path(
        "oidc/callback/",
        provider_views.SignInCallback.as_view(),
        name="oidc_authentication_callback",
    ),
    # The admin's own sign-in form, unless password sign-in is off (decided per request).
    path("admin/login/", sign_in.admin_sign_in),
    path("admin/", admin.site.urls),
    path("favicon.ico", library.favicon),
    # Anyone's: the sandboxed frames that draw and preview answers' code hold nothing of a user's.
    path("code-frames/diagram/", code_frames.diagram_frame, name="diagram_frame"),
    path("code-frames/preview/", code_frames.preview_frame, name="preview_frame"),
]

handler404 = not_found.page_not_found
