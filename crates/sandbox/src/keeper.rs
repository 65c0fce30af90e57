//! The session's namespace keeper, `keel-sandbox keep SOCKET`: a process of its own that holds
//! a user namespace and, made ahead of each command, an empty network namespace (only its
//! loopback, up). A command's helper asks it for the two over a Unix socket
//! ([`crate::Profile::keeper`]) and joins them instead of creating a network namespace on the
//! command's path (most of what `unshare` costs). Each network namespace goes to one command
//! only: once handed out, the keeper makes the next one. Its mount, PID and inner user
//! namespaces each command still makes for itself.
//!
//! It ends when Keel does: its standard input is a pipe only Keel holds.
//!
//! Only Keel's own children are served (the peer's parent must be the keeper's parent, checked
//! with `SO_PEERCRED` and `/proc`): a command's program never is (it runs under the helper),
//! and outside the fallback it cannot reach the socket at all (it is not in its root). When the
//! keeper is gone or does not answer at once, the helper creates its namespaces itself.

#![expect(
    clippy::disallowed_methods,
    reason = "the keeper is part of the layer that confines processes: it listens on its socket \
              and reads /proc outside Keel's runtime"
)]

use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::{getgid, getppid, getuid};

use crate::error::{Error, Result};
use crate::fds::{poll_in, recv_with_fds, send_with_fds};
use crate::namespaces::{loopback_up, write_file};

/// How long a helper waits for the keeper's answer before it makes its own namespaces.
const ANSWER_WITHIN: Duration = Duration::from_millis(100);

/// How long the keeper waits for a helper it answered to take the namespaces (and close the
/// connection) before it makes the next network namespace anyway.
const TAKEN_WITHIN: Duration = Duration::from_millis(10);

/// `keel-sandbox keep SOCKET`: serves until its parent (Keel) is gone. Returns an exit code
/// only when it cannot serve.
pub(crate) fn keep(socket: &Path) -> i32 {
    match serve(socket) {
        Ok(never) => match never {},
        Err(error) => crate::helper::fail(&error),
    }
}

fn serve(socket: &Path) -> Result<std::convert::Infallible> {
    let parent = getppid();
    if parent.as_raw() == 1 {
        return Err(Error::Orphaned);
    }
    let (uid, gid) = (getuid().as_raw(), getgid().as_raw());
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| Error::sys("unshare", e))?;
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("0 {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("0 {gid} 1"))?;
    let user = namespace_file("user")?;
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).map_err(|e| Error::io(socket, e))?;
    loop {
        // The next command's network namespace, made before it is asked for.
        unshare(CloneFlags::CLONE_NEWNET).map_err(|e| Error::sys("unshare", e))?;
        loopback_up().map_err(|e| Error::sys("the loopback", e))?;
        let net = namespace_file("net")?;
        loop {
            if !keel_alive(&listener) {
                std::process::exit(0);
            }
            let Ok((stream, _)) = listener.accept() else {
                continue;
            };
            if !from_keel(&stream, parent) {
                continue;
            }
            let fds = [user.as_raw_fd(), net.as_raw_fd()];
            if send_with_fds(stream.as_fd(), b"n", &fds).is_ok() {
                // Handed out: never to another command. The next one is made once the helper
                // has taken it (it closes the connection then), or at once when another helper
                // asks first. The answer wakes the helper synchronously, often on this core:
                // made here at once, the next namespace (about 0.45 ms) would keep the helper
                // waiting for the core (one command in five on two cores); woken by the close,
                // the keeper is placed on an idle core when there is one.
                let _ = poll_in(
                    &[stream.as_raw_fd(), listener.as_raw_fd()],
                    Some(TAKEN_WITHIN),
                );
                break;
            }
        }
    }
}

/// Waits until a helper connects to `listener` (`true`) or Keel is gone (`false`): the keeper's
/// standard input is a pipe whose other end only Keel holds, so its end of file is Keel's end,
/// however Keel ended. (Not a parent death signal: that follows the thread that started the
/// keeper, and Keel's threads come and go.)
fn keel_alive(listener: &UnixListener) -> bool {
    let ready = poll_in(&[listener.as_raw_fd(), libc::STDIN_FILENO], None);
    ready[0] && !ready[1]
}

/// This process's namespace of `kind`, as a descriptor.
fn namespace_file(kind: &str) -> Result<OwnedFd> {
    let path = format!("/proc/self/ns/{kind}");
    std::fs::File::open(&path)
        .map(OwnedFd::from)
        .map_err(|e| Error::io_in(path, e))
}

/// Whether the peer of `stream` is a child of `keel` (a helper Keel started).
fn from_keel(stream: &UnixStream, keel: nix::unistd::Pid) -> bool {
    let Ok(peer) = getsockopt(stream, PeerCredentials) else {
        return false;
    };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", peer.pid())) else {
        return false;
    };
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_ascii_whitespace().nth(1))
        .and_then(|ppid| ppid.parse::<i32>().ok())
        == Some(keel.as_raw())
}

/// What the helper joined of the keeper's namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joined {
    /// Nothing (no keeper, or it is gone, slow or refused): the helper makes its own.
    Nothing,
    /// Its user namespace, but not the network namespace: the helper makes that one, in it.
    User,
    /// Both.
    Both,
}

/// In the helper: joins the keeper's user namespace and a fresh network namespace of its (in
/// that order: the second takes the capabilities the first gives).
pub(crate) fn join(socket: &Path) -> Joined {
    let Some([user, net]) = receive(socket) else {
        return Joined::Nothing;
    };
    if setns(&user, CloneFlags::CLONE_NEWUSER).is_err() {
        return Joined::Nothing;
    }
    if setns(&net, CloneFlags::CLONE_NEWNET).is_err() {
        return Joined::User;
    }
    Joined::Both
}

/// The keeper's two descriptors (its user namespace, then a network namespace), asked for on
/// `socket`. `None` when it is gone, slow or refuses (the helper needs no reason: it makes its
/// own namespaces either way).
fn receive(socket: &Path) -> Option<[OwnedFd; 2]> {
    let stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(ANSWER_WITHIN)).ok()?;
    let (_, fds) = recv_with_fds(stream.as_fd(), &mut [0u8; 1], false).ok()??;
    <[OwnedFd; 2]>::try_from(fds).ok()
}
