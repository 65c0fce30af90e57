//! The prebuilt credential masks for programs another process starts (the editor's terminal),
//! under the Landlock fallback.
//!
//! A command Keel spawns itself inherits the session's mask ruleset ([`super::mask::MaskFd`]);
//! a command the editor's terminal starts is not Keel's child and inherits nothing, so its
//! helper used to split the rules itself (about 40 ms in a workspace of 100,000 files holding 50
//! credential files). Now Keel offers the ruleset for that command on a Unix socket of the
//! session's sandbox directory ([`Profile::mask_socket`]): the helper connects, sends the key it
//! was given ([`MASK_KEY_ENV`]) and receives the descriptor (`SCM_RIGHTS`), then applies it as
//! Keel's own commands do. Anything else (no server, a slow or wrong answer) and the helper splits the
//! rules itself, as before: the offer saves time, never a mask.
//!
//! A ruleset descriptor must reach no program (one could add rules to it and unmask a file for
//! the commands after it). An offer is for one key: random (128 bits), known only to Keel and to
//! the command's helper, which has it in its environment (not in its arguments or its profile,
//! which other processes may read; the helper removes the variable before the program starts),
//! taken once, before the program starts, and withdrawn when the command ends ([`MaskOffer`]'s
//! drop). Whoever can connect to the socket may ask; only the key gets an answer.
//!
//! [`Profile::mask_socket`]: keel_sandbox::Profile::mask_socket
//! [`MASK_KEY_ENV`]: keel_sandbox::MASK_KEY_ENV

#![expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::mask::MaskFd;

/// The socket's name in the session's sandbox directory.
const SOCKET: &str = "masks.sock";

/// How long a helper has to send its nonce once connected.
const REQUEST_WITHIN: Duration = Duration::from_millis(500);

/// The longest request: a key (32 hex digits) and its newline.
const MAX_REQUEST: usize = 64;

/// The offers not yet taken, by key.
type Offers = Mutex<HashMap<String, MaskFd>>;

/// A session's server of mask rulesets (started on the first offer).
#[derive(Debug, Default)]
pub struct MaskServer {
    serving: Mutex<Option<Serving>>,
}

#[derive(Debug)]
struct Serving {
    socket: PathBuf,
    offers: Arc<Offers>,
}

/// One command's offer: withdrawn when its last clone is dropped (the command ended, or never
/// asked).
#[derive(Debug, Clone)]
pub struct MaskOffer(Arc<Offered>);

impl PartialEq for MaskOffer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MaskOffer {}

#[derive(Debug)]
struct Offered {
    key: String,
    offers: Weak<Offers>,
}

impl Drop for Offered {
    fn drop(&mut self) {
        if let Some(offers) = self.offers.upgrade() {
            lock(&offers).remove(&self.key);
        }
    }
}

impl MaskServer {
    /// Offers `mask` on the server of `dir` (started now if it is not running), under a new
    /// key: the socket, the key for the helper's environment, and the offer to hold while the
    /// command runs. `None` when no server can run there: the helper splits the rules itself.
    pub fn offer(&self, dir: &Path, mask: MaskFd) -> Option<(PathBuf, String, MaskOffer)> {
        let mut serving = lock(&self.serving);
        let running = match serving.as_ref() {
            Some(running) if running.socket.parent() == Some(dir) => running,
            _ => {
                *serving = None;
                serving.insert(Serving::start(dir)?)
            }
        };
        let key = uuid::Uuid::new_v4().simple().to_string();
        lock(&running.offers).insert(key.clone(), mask);
        let offer = MaskOffer(Arc::new(Offered {
            key: key.clone(),
            offers: Arc::downgrade(&running.offers),
        }));
        Some((running.socket.clone(), key, offer))
    }
}

impl Serving {
    fn start(dir: &Path) -> Option<Self> {
        let socket = dir.join(SOCKET);
        let _ = std::fs::remove_file(&socket);
        let listener = match UnixListener::bind(&socket) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, socket = %socket.display(), "cannot serve the credential masks to the editor's terminal");
                return None;
            }
        };
        let offers = Arc::new(Offers::default());
        let weak = Arc::downgrade(&offers);
        let spawned = std::thread::Builder::new()
            .name("keel-masks".into())
            .spawn(move || serve(&listener, &weak));
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the credential masks' server");
            let _ = std::fs::remove_file(&socket);
            return None;
        }
        Some(Self { socket, offers })
    }
}

impl Drop for Serving {
    /// Ends the server: its thread wakes on one last connection, finds the offers gone, exits.
    fn drop(&mut self) {
        let offers = std::mem::take(&mut self.offers);
        drop(offers);
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Answers connections one at a time until the session's offers are gone.
fn serve(listener: &UnixListener, offers: &Weak<Offers>) {
    for stream in listener.incoming() {
        let Some(offers) = offers.upgrade() else {
            return;
        };
        match stream {
            Ok(stream) => answer(&stream, &offers),
            Err(error) => tracing::debug!(%error, "the credential masks' server: accept failed"),
        }
    }
}

/// Reads one key and sends its offer's descriptor, taking the offer; a connection with no
/// offer gets one byte and no descriptor, one that sends no key in time gets nothing.
fn answer(mut stream: &UnixStream, offers: &Offers) {
    let mut request = [0u8; MAX_REQUEST];
    let mut len = 0;
    let _ = stream.set_read_timeout(Some(REQUEST_WITHIN));
    while len < MAX_REQUEST && !request[..len].contains(&b'\n') {
        match stream.read(&mut request[len..]) {
            Ok(0) | Err(_) => return,
            Ok(read) => len += read,
        }
    }
    let Some(end) = request[..len].iter().position(|&byte| byte == b'\n') else {
        return;
    };
    let key = String::from_utf8_lossy(&request[..end]);
    let taken = lock(offers).remove(key.as_ref());
    let fds: Vec<_> = taken.iter().map(MaskFd::raw).collect();
    if let Err(error) = keel_sandbox::fds::send_with_fds(stream.as_fd(), b"m", &fds) {
        tracing::debug!(%error, "the credential masks' server: a helper left before its answer");
    }
    let _ = stream.flush();
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
