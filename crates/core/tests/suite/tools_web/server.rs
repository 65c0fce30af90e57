//! A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, answered by a handler.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// A request the server received.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// Path and query, as sent (`/search?q=a&format=json`).
    pub(super) target: String,
    pub(super) headers: HashMap<String, String>,
}

impl Seen {
    pub(super) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub(super) fn query(&self) -> HashMap<String, String> {
        let url = url::Url::parse(&format!("http://x{}", self.target)).unwrap();
        url.query_pairs().into_owned().collect()
    }
}

pub(super) enum Reply {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Read the request, then never answer.
    Stall,
}

pub(super) fn reply(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply::Respond {
        status,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.into(),
    }
}

pub(super) fn redirect(status: u16, location: &str) -> Reply {
    Reply::Respond {
        status,
        headers: vec![("Location".into(), location.into())],
        body: Vec::new(),
    }
}

pub(super) struct Server {
    pub(super) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub(super) async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    log.lock().unwrap().push(request.clone());
                    match handler(&request) {
                        Reply::Stall => {
                            tokio::time::sleep(Duration::from_secs(300)).await;
                        }
                        Reply::Respond {
                            status,
                            headers,
                            body,
                        } => {
                            let mut head = format!(
                                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                                body.len()
                            );
                            for (name, value) in headers {
                                head.push_str(&format!("{name}: {value}\r\n"));
                            }
                            head.push_str("\r\n");
                            let _ = socket.write_all(head.as_bytes()).await;
                            let _ = socket.write_all(&body).await;
                            let _ = socket.shutdown().await;
                        }
                    }
                });
            }
        });
        Self { addr, seen }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let mut lines = text.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some(Seen { target, headers })
}
