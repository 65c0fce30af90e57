//! `keel-sandbox-test-kernel WHAT ARG`: reaches a kernel object or a process of the user's by
//! number, as a confined program could without any path, and says what it got (`read: TEXT`, `injected`) or
//! `refused: ERROR`. A program for the crate's tests:
//! - `shm ID`: attaches the System V shared memory segment `ID`, reads its first bytes and
//!   overwrites them with `CHANGED`.
//! - `key SERIAL`: reads the key `SERIAL` (`keyctl(KEYCTL_READ)`).
//! - `mq NAME`: opens the POSIX message queue `NAME` and reads a message.
//! - `tty TEXT`: makes its standard input (a terminal no session holds) its controlling terminal
//!   (in a session of its own) and types `TEXT` into it (`TIOCSTI`).
//! - `dgram PATH`, `dgram-pair PATH`: sends a datagram to the Unix socket at `PATH` from an
//!   unbound datagram socket, or from one of a socket pair (`sent`).
//! - `write-tty PATH`: opens the terminal at `PATH` by its name and writes a line to it.
//! - `process PID`: changes another process's limits and scheduling by its pid (see
//!   `change_process`).
//! - `connect PATH`: connects to the Unix socket at `PATH` (`connected`).

use std::io::Write as _;

/// `Err` with the OS's error of the last failed call.
fn last_error<T>() -> Result<T, String> {
    Err(std::io::Error::last_os_error().to_string())
}

#[expect(
    unsafe_code,
    reason = "a test program: the raw System V, keyring, mqueue and tty calls it probes"
)]
fn probe(what: &str, arg: &str) -> Result<String, String> {
    match what {
        "shm" => {
            let id: i32 = arg.parse().map_err(|_| "bad id".to_owned())?;
            // SAFETY: shmat maps a segment (or fails); the bytes are read and written within the
            // first 16, and the segment is at least that large (the test makes it).
            unsafe {
                let address = libc::shmat(id, std::ptr::null(), 0);
                if address as isize == -1 {
                    return last_error();
                }
                let bytes = std::slice::from_raw_parts_mut(address.cast::<u8>(), 16);
                let text = String::from_utf8_lossy(bytes)
                    .trim_end_matches('\0')
                    .to_owned();
                bytes[..7].copy_from_slice(b"CHANGED");
                Ok(format!("read: {text}"))
            }
        }
        "key" => {
            let serial: libc::c_long = arg.parse().map_err(|_| "bad serial".to_owned())?;
            let mut buffer = [0u8; 64];
            // SAFETY: KEYCTL_READ (11) writes at most `buffer.len()` bytes into `buffer`.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_keyctl,
                    11,
                    serial,
                    buffer.as_mut_ptr(),
                    buffer.len(),
                )
            };
            let n = usize::try_from(n).or_else(|_| last_error())?;
            let text = buffer.get(..n.min(buffer.len())).unwrap_or_default();
            Ok(format!("read: {}", String::from_utf8_lossy(text)))
        }
        "mq" => {
            let name = std::ffi::CString::new(arg).map_err(|_| "bad name".to_owned())?;
            let mut buffer = [0u8; 8192];
            // SAFETY: mq_open on a NUL-terminated name; mq_receive writes at most
            // `buffer.len()` bytes (the queue's message size, set by the test, is smaller).
            unsafe {
                let queue = libc::mq_open(name.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
                if queue == -1 {
                    return last_error();
                }
                let n = libc::mq_receive(
                    queue,
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    std::ptr::null_mut(),
                );
                let n = usize::try_from(n).or_else(|_| last_error())?;
                let text = buffer.get(..n).unwrap_or_default();
                Ok(format!("read: {}", String::from_utf8_lossy(text)))
            }
        }
        "tty" => {
            // SAFETY: setsid, then ioctls on descriptor 0 with the argument each expects (an int,
            // a char).
            unsafe {
                // A session of its own, whose leader may take a terminal (fails harmlessly when
                // it leads one already).
                libc::setsid();
                if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return last_error().map_err(|e| format!("no controlling terminal: {e}"));
                }
                for byte in arg.bytes() {
                    if libc::ioctl(0, libc::TIOCSTI, &raw const byte) != 0 {
                        return last_error();
                    }
                }
            }
            Ok("injected".to_owned())
        }
        "dgram" | "dgram-pair" => {
            let sent = if what == "dgram" {
                std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|socket| socket.send_to(b"FROM-SANDBOX", arg))
            } else {
                std::os::unix::net::UnixDatagram::pair()
                    .and_then(|(socket, _)| socket.send_to(b"FROM-SANDBOX", arg))
            };
            sent.map(|_| "sent".to_owned()).map_err(|e| e.to_string())
        }
        #[expect(
            clippy::disallowed_methods,
            reason = "a test program outside Keel: connecting by path is what it probes"
        )]
        "connect" => std::os::unix::net::UnixStream::connect(arg)
            .map(|_| "connected".to_owned())
            .map_err(|e| e.to_string()),
        "write-tty" => {
            let path = std::ffi::CString::new(arg).map_err(|_| "bad path".to_owned())?;
            // SAFETY: open on a NUL-terminated path; write from a live buffer of its length.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_NOCTTY);
                if fd == -1 {
                    return last_error();
                }
                let text = b"FROM-SANDBOX\n";
                let n = libc::write(fd, text.as_ptr().cast(), text.len());
                libc::close(fd);
                if n == -1 {
                    return last_error();
                }
            }
            Ok("wrote".to_owned())
        }
        "process" => {
            let pid: libc::pid_t = arg.parse().map_err(|_| "bad pid".to_owned())?;
            Ok(change_process(pid))
        }
        _ => Err(format!("unknown probe {what}")),
    }
}

/// Tries to change process `pid`'s settings by pid: its open-files limit (the soft one, to 7),
/// its nice value (19), its CPU affinity (the first CPU), its scheduling policy (`SCHED_IDLE`)
/// and its I/O priority (idle). One line each: `NAME: changed` or `NAME: refused: ERROR`.
#[expect(
    unsafe_code,
    reason = "a test program: the raw scheduling and limit calls it probes"
)]
fn change_process(pid: libc::pid_t) -> String {
    let result = |name: &str, code: libc::c_long| {
        if code == 0 {
            format!("{name}: changed\n")
        } else {
            format!("{name}: refused: {}\n", std::io::Error::last_os_error())
        }
    };
    let mut out = String::new();
    // SAFETY: each call gets the argument types it expects: rlimit structs that live across
    // the call, a CPU set, a sched_param.
    unsafe {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let read = libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &raw mut old);
        let limit = libc::rlimit {
            rlim_cur: 7,
            rlim_max: old.rlim_max,
        };
        let code = if read == 0 {
            libc::prlimit(
                pid,
                libc::RLIMIT_NOFILE,
                &raw const limit,
                std::ptr::null_mut(),
            )
        } else {
            read
        };
        out += &result("prlimit", code.into());
        let code = libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, 19);
        out += &result("setpriority", code.into());
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        let code = libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set);
        out += &result("sched_setaffinity", code.into());
        let param = libc::sched_param { sched_priority: 0 };
        let code = libc::sched_setscheduler(pid, libc::SCHED_IDLE, &param);
        out += &result("sched_setscheduler", code.into());
        // IOPRIO_WHO_PROCESS (1), class IDLE (3) << 13.
        let code = libc::syscall(libc::SYS_ioprio_set, 1, pid, 3 << 13);
        out += &result("ioprio_set", code);
    }
    out.trim_end().to_owned()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let answer = match args.as_slice() {
        [what, arg] => match probe(what, arg) {
            Ok(answer) => answer,
            Err(error) => format!("refused: {error}"),
        },
        _ => "usage: keel-sandbox-test-kernel WHAT ARG (see the module doc)".to_owned(),
    };
    let _ = writeln!(std::io::stdout(), "{answer}");
}
