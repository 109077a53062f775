//! The terminal side of `git agent chat`: keys from raw mode ([`tty`], [`keys`]), the line editor
//! ([`editor`]), the screen with its scroll region, input panel and status line ([`screen`], [`status`]), and
//! the sink and approver a chat turn runs with ([`sink`]). The loop that ties them to a session is the
//! command's (`cli/chat`); nothing here knows about sessions.

pub mod editor;
pub mod keys;
pub mod screen;
pub mod sink;
pub mod status;
mod sync;
pub mod tty;

pub use editor::{Action, Editor};
pub use keys::Key;
pub use screen::Screen;
pub use sink::{ChatApprover, ChatSink, Shared, Term};
pub use sync::lock;
pub use tty::{Input, RawMode, Reader};
