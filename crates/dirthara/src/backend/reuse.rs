//! Connections kept from one command to the next, for a fleet whose targets share a server:
//! every schema of one PostgreSQL database is a target, and a new connection per target
//! would cost the server a process of its own each time (a fork, authentication, TLS, a cold
//! catalog cache) — on a small server about 4 ms each, far more than a no-op's work. A
//! connection that ended its command cleanly (the command succeeded and its lock was
//! released) is kept, and the next target on the same URL takes it, reset by
//! [`Backend::reopen`] into the session a new connection would have been.

use std::sync::Mutex;

use async_trait::async_trait;

use super::{Backend, ConnectRequest, Connector};
use crate::error::Result;
use crate::events::EventSink;

/// A connector that keeps clean connections for the next command, at most `keep` of them.
pub(crate) struct ReusingConnector {
    inner: std::sync::Arc<dyn Connector>,
    idle: Mutex<Vec<(String, Box<dyn Backend>)>>,
    keep: usize,
}

impl ReusingConnector {
    pub(crate) fn new(inner: std::sync::Arc<dyn Connector>, keep: usize) -> Self {
        ReusingConnector {
            inner,
            idle: Mutex::new(Vec::new()),
            keep,
        }
    }

    fn take(&self, url: &str) -> Option<Box<dyn Backend>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let at = idle.iter().position(|(kept, _)| kept == url)?;
        Some(idle.swap_remove(at).1)
    }

    /// Closes every connection kept: the fleet is done.
    pub(crate) async fn close_all(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, backend) in idle {
            backend.close().await;
        }
    }
}

#[async_trait]
impl Connector for ReusingConnector {
    async fn connect(
        &self,
        request: &ConnectRequest,
        events: &EventSink,
    ) -> Result<Box<dyn Backend>> {
        while let Some(mut backend) = self.take(&request.url) {
            match backend.reopen(request).await {
                Ok(true) => return Ok(backend),
                // Not reusable after all: a new one, as without this connector.
                Ok(false) | Err(_) => backend.close().await,
            }
        }
        self.inner.connect(request, events).await
    }

    async fn release(&self, url: &str, backend: Box<dyn Backend>, reusable: bool) {
        let kept = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            match reusable && idle.len() < self.keep {
                true => {
                    idle.push((url.to_string(), backend));
                    None
                }
                false => Some(backend),
            }
        };
        if let Some(backend) = kept {
            backend.close().await;
        }
    }
}
