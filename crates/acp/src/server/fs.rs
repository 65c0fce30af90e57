//! [`ClientFiles`]: a [`FileBackend`] that reads and writes through the editor
//! (`fs/read_text_file`, `fs/write_text_file`), so the agent sees unsaved buffers and the
//! editor tracks the agent's changes in its review UI.
//!
//! Offered only for the directions the client advertises; the other direction answers `None`
//! and the runtime uses the disk. The runtime has already resolved the path and checked it
//! against the session's scope before it calls the backend.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    FileSystemCapabilities, ReadTextFileRequest, SessionId, WriteTextFileRequest,
};
use futures::future::BoxFuture;
use keel_core::runtime::FileBackend;

/// The editor's files for one session.
pub struct ClientFiles {
    connection: ConnectionTo<Client>,
    session_id: SessionId,
    read: bool,
    write: bool,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session_id", &self.session_id)
            .field("read", &self.read)
            .field("write", &self.write)
            .finish()
    }
}

impl ClientFiles {
    /// The backend for a session, or `None` when the client serves neither direction.
    pub fn for_client(
        capabilities: &FileSystemCapabilities,
        connection: ConnectionTo<Client>,
        session_id: SessionId,
    ) -> Option<Self> {
        (capabilities.read_text_file || capabilities.write_text_file).then(|| Self {
            connection,
            session_id,
            read: capabilities.read_text_file,
            write: capabilities.write_text_file,
        })
    }
}

impl FileBackend for ClientFiles {
    // String error: the editor's own refusal text, shown to the model as is.
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Option<Result<String, String>>> {
        Box::pin(async move {
            if !self.read {
                return None;
            }
            let request = ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
            let result = self.connection.send_request(request).block_task().await;
            Some(
                result
                    .map(|response| response.content)
                    .map_err(|error| super::errors::client_error_text(&error)),
            )
        })
    }

    // String error: the editor's own refusal text, shown to the model as is.
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Option<Result<(), String>>> {
        Box::pin(async move {
            if !self.write {
                return None;
            }
            let request = WriteTextFileRequest::new(
                self.session_id.clone(),
                path.to_path_buf(),
                content.to_owned(),
            );
            let result = self.connection.send_request(request).block_task().await;
            Some(
                result
                    .map(|_| ())
                    .map_err(|error| super::errors::client_error_text(&error)),
            )
        })
    }
}
