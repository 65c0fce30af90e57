//! What Keel, the zygote, the holder and the starters say to one another, and how descriptors
//! travel with it (`SCM_RIGHTS` over `SOCK_SEQPACKET`).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// How many descriptors a command hands over: its standard input, output and error, and the
/// stream the zygote answers it on.
pub const COMMAND_FDS: usize = 4;

/// The largest message either side sends (a command's environment and arguments).
pub const MAX_MESSAGE: usize = 1 << 20;

/// What Keel sends the zygote on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToZygote {
    /// Run a command. Sent with [`COMMAND_FDS`] descriptors: stdin, stdout, stderr, and one end
    /// of a stream socket the zygote answers on (`started PID`, then `exit STATUS`, or `failed
    /// REASON`, one line each).
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
    Ready { notes: Vec<String> },
    Failed { reason: String },
    Started { id: u64, starter: i32, command: i32 },
    Exited { id: u64, status: i32 },
    NotStarted { id: u64, reason: String },
}

/// Sends `bytes` with `fds` as one message on a `SOCK_SEQPACKET` socket.
pub fn send_with_fds(socket: BorrowedFd<'_>, bytes: &[u8], fds: &[RawFd]) -> nix::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    loop {
        match sendmsg::<()>(
            socket.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Err(Errno::EINTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Receives one message and the descriptors that came with it (close-on-exec); `Ok(None)` at
/// the end of the stream. `nonblocking`: `Err(EAGAIN)` when nothing is queued.
pub fn recv_with_fds(
    socket: BorrowedFd<'_>,
    buffer: &mut [u8],
    nonblocking: bool,
) -> nix::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if nonblocking {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let mut space = nix::cmsg_space!([RawFd; COMMAND_FDS]);
    loop {
        let mut iov = [IoSliceMut::new(buffer)];
        let msg = match recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), flags) {
            Err(Errno::EINTR) => continue,
            other => other?,
        };
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: the kernel just installed this descriptor in this process for
                    // this message; nothing else owns it.
                    #[expect(unsafe_code, reason = "adopting a received descriptor (see SAFETY)")]
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        if msg.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        if msg.flags.contains(MsgFlags::MSG_TRUNC) || msg.flags.contains(MsgFlags::MSG_CTRUNC) {
            return Err(Errno::EMSGSIZE);
        }
        return Ok(Some((msg.bytes, fds)));
    }
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

/// `pidfd_open(pid)`: readable once `pid` has exited (child or not).
pub(super) fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: integer arguments only.
    #[expect(unsafe_code, reason = "pidfd_open has no wrapper in nix (see SAFETY)")]
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    #[expect(unsafe_code, reason = "adopting a new pidfd (see SAFETY)")]
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll` on `fds` (each `POLLIN`); returns which are ready (readable, hung up or in error).
pub(super) fn poll_in(fds: &[RawFd], timeout: Option<Duration>) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    // SAFETY: `polled` is a live array of `pollfd` of the length given; the kernel writes only
    // its `revents` fields during the call.
    #[expect(unsafe_code, reason = "poll on a live array (see SAFETY)")]
    let result = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
    if result <= 0 {
        return vec![false; fds.len()];
    }
    polled.iter().map(|p| p.revents != 0).collect()
}
