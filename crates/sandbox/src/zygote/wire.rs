//! What Keel, the zygote, the holder and the starters say to one another (descriptors travel
//! with it by the crate's `fds` module, over `SOCK_SEQPACKET`).

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use nix::sys::wait::WaitStatus;
use serde::{Deserialize, Serialize};

pub(super) use crate::fds::{pidfd_open, poll_in};
pub use crate::fds::{recv_with_fds, send_with_fds};

/// How many descriptors a command hands over: its standard input, output and error, and the
/// stream the zygote answers it on.
pub const COMMAND_FDS: usize = 4;
const _: () = assert!(COMMAND_FDS <= crate::fds::MAX_FDS);

/// The largest message either side sends (a command's environment and arguments).
pub const MAX_MESSAGE: usize = 1 << 20;

/// What Keel sends the zygote on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToZygote {
    /// Run a command. Sent with [`COMMAND_FDS`] descriptors: stdin, stdout, stderr, and one end
    /// of a stream socket the zygote answers on (`started PID`, then `exit STATUS`, or under
    /// namespaces `done STATUS` once the command's PID namespace is empty; or `failed REASON`;
    /// or `gone REASON` when this zygote is ending and a fresh one should be asked; one line
    /// each).
    Run(CommandRequest),
    /// Take no more commands; end once the running ones have (a new holder replaces this one).
    Retire,
}

/// One contained command: all that varies between two commands of one profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandRequest {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The program's environment (the profile's allowlist is applied again, and `TMPDIR` set).
    pub env: Vec<(String, String)>,
    /// Written back in the status file once the command runs confined.
    pub nonce: String,
    pub status_file: PathBuf,
}

/// The zygote's first message on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Ready {
    /// The holder is confined; `notes` say what is not enforced (as a status line's).
    Ready { notes: Vec<String> },
    /// Nothing can run here (`reason`); Keel uses the per-command helper instead.
    Failed { reason: String },
}

/// What the holder is asked (the status file stays with the zygote).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HolderRequest {
    pub(super) id: u64,
    pub(super) argv: Vec<String>,
    pub(super) cwd: PathBuf,
    pub(super) env: Vec<(String, String)>,
}

/// What the holder and its starters tell the zygote.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum FromHolder {
    /// Confined: by `mechanism` (`landlock` or `namespaces`, the status line's), with `notes`.
    Ready {
        mechanism: String,
        notes: Vec<String>,
    },
    Failed {
        reason: String,
    },
    /// `command` runs: the process Keel waits on and signals as a group (the program under the
    /// fallback; under namespaces the PID namespace's init, which forwards signals to all of
    /// it), and `guard`, whose end means nothing of the command is left (the starter; init).
    Started {
        id: u64,
        starter: i32,
        command: i32,
        guard: i32,
    },
    /// The program's wait status; under namespaces, once its PID namespace is empty.
    Exited {
        id: u64,
        status: i32,
    },
    NotStarted {
        id: u64,
        reason: String,
    },
    /// Nothing ran: the holder's root is no longer what it built (a mount of it went away:
    /// a masked file replaced on the host takes its mask along), so a fresh holder must run it.
    Stale {
        id: u64,
        reason: String,
    },
}

/// A `SOCK_SEQPACKET` pair, close-on-exec.
pub fn seqpacket_pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
}

/// The raw wait status (`waitpid`'s) of an ending.
pub(super) fn raw_status(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some((code & 0xff) << 8),
        WaitStatus::Signaled(_, signal, core) => Some(signal as i32 | if core { 0x80 } else { 0 }),
        _ => None,
    }
}
