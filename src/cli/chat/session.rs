//! Opening, closing and reopening the chat's session: what both the terminal and the plain front-end do
//! between turns (`/new`, `/resume`, after a review).

use super::super::ask::SessionFlags;
use super::super::context::Context;
use super::super::error::CommandError;
use crate::agent::{AgentSession, Resume};
use crate::protocol::Sink;

/// Opens the session the flags (or `/new`, `/resume`) ask for; `sink` hears warnings.
pub(super) async fn open(
    ctx: &Context,
    flags: &SessionFlags,
    resume: Option<Resume>,
    sink: &mut dyn Sink,
) -> Result<AgentSession, CommandError> {
    let options = flags.options(ctx, resume)?;
    Ok(AgentSession::open(ctx.cwd(), options, sink).await?)
}

/// Closes `session` (background jobs and MCP servers stopped) and returns how to come back to it; `None`
/// when nothing happened in it, so it was rolled back and there is nothing to resume.
pub(super) async fn close(ctx: &Context, session: AgentSession) -> Option<String> {
    let id = session.id().to_owned();
    session.shutdown_mcp().await;
    session.close();
    let store = crate::store::Store::open(ctx.cwd()).ok()?;
    store.read_meta(&id).ok().flatten()?;
    Some(format!(
        "resume with `git agent chat --resume {id}` (or `git agent chat --continue`)"
    ))
}

/// Closes `session` and opens it again (after a review, whose comments the agent reads on resume). `None`
/// when it cannot be opened again: the error is shown, with how to resume it later.
pub(super) async fn reload(
    ctx: &Context,
    flags: &SessionFlags,
    session: AgentSession,
    sink: &mut dyn Sink,
) -> Option<AgentSession> {
    let id = session.id().to_owned();
    // The session's lock is per open file, so this process must let go of it before taking it again.
    close(ctx, session).await;
    match open(ctx, flags, Some(Resume::Id(id.clone())), sink).await {
        Ok(session) => Some(session),
        Err(err) => {
            let text = format!(
                "{}\nhint: resume with `git agent chat --resume {id}`",
                err.text()
            );
            sink.emit(&crate::protocol::Event::Error { message: text });
            None
        }
    }
}

/// Gives the next turn of `session` the images a prompt names: `@shot.png`, or a path pasted or dropped in
/// (a word ending in .png, .jpg, .jpeg, .gif or .webp that names a file, relative to `cwd` or absolute).
/// Returns what went wrong with each, as warnings: the prompt still goes, without that image.
pub(super) fn attach_pasted_images(
    cwd: &std::path::Path,
    session: &mut AgentSession,
    prompt: &str,
) -> Vec<String> {
    let mut images = Vec::new();
    let mut warnings = Vec::new();
    for word in prompt.split_whitespace() {
        let word = word
            .trim_start_matches(['"', '\'', '(', '<'])
            .trim_end_matches(['"', '\'', ',', ';', ':', '?', '!', '.', ')', '>']);
        let (marked, path) = match word.strip_prefix('@') {
            Some(path) => (true, path),
            None => (false, word),
        };
        if !crate::tools::image::has_image_extension(path) {
            continue;
        }
        let full = cwd.join(path);
        if !marked && !full.is_file() {
            continue; // prose that happens to end in .png
        }
        match crate::tools::image::load(&full, path, session.max_image_size()) {
            Ok(image) => images.push(image),
            Err(err) => warnings.push(format!("{err}; sent without it")),
        }
    }
    if let Err(err) = session.attach_images(images) {
        warnings.push(format!("{err}; sent without the images"));
    }
    warnings
}
