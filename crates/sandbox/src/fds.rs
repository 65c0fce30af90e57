//! Descriptors between processes of the helper: passing them with a message (`SCM_RIGHTS`),
//! waiting on several, and a process's own (`pidfd`). The zygote and the namespace keeper use
//! them.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::unistd::Pid;

/// The most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// Sends `bytes` with `fds` as one message on a Unix socket.
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
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
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

/// `pidfd_open(pid)`: readable once `pid` has exited (child or not).
pub(crate) fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: integer arguments only.
    #[expect(unsafe_code, reason = "pidfd_open has no wrapper in nix (see SAFETY)")]
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    #[expect(unsafe_code, reason = "adopting a new pidfd (see SAFETY)")]
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll` on `fds` (each `POLLIN`, again after a signal); returns which are ready (readable,
/// hung up or in error), none on a timeout or a failure.
pub(crate) fn poll_in(fds: &[RawFd], timeout: Option<Duration>) -> Vec<bool> {
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
    loop {
        #[expect(unsafe_code, reason = "poll on a live array (see SAFETY)")]
        let result =
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
        if result < 0 && Errno::last() == Errno::EINTR {
            continue;
        }
        if result <= 0 {
            return vec![false; fds.len()];
        }
        return polled.iter().map(|p| p.revents != 0).collect();
    }
}

/// Marks every descriptor from 3 up close-on-exec, so that the program about to be executed
/// gets only its standard input, output and error: nothing the helper was started with (the
/// editor's terminal, a build tool's jobserver, a leaked file of whoever started Keel) crosses
/// into the sandbox, where a descriptor would reach what its paths could not. Only system calls:
/// it runs between `fork` and `exec`. Kernels without `close_range` (before 5.11) get the
/// flag descriptor by descriptor up to 4,096.
pub fn close_inherited_on_exec() {
    // SAFETY: integer arguments only; the kernel reads no memory.
    #[expect(
        unsafe_code,
        reason = "close_range and fcntl on numbered descriptors (see SAFETY)"
    )]
    unsafe {
        let done = libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if done != 0 {
            for fd in 3..4096 {
                let _ = libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}
