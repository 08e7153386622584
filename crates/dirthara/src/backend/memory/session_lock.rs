//! The memory backend's session lock: one holder at a time, by session number, with the
//! faults tests plant (a failing unlock) and what they read (the calls, the holder).

use std::time::Duration;

use async_trait::async_trait;

use super::MemoryBackend;
use crate::error::{Error, Result};
use crate::events::LockHolder;
use crate::lock::SessionLock;

#[async_trait]
impl SessionLock for MemoryBackend {
    async fn try_lock(&mut self) -> Result<bool> {
        let session = self.session;
        Ok(self.with(|db| {
            db.calls.push("lock".into());
            match db.lock_holder {
                None => {
                    db.lock_holder = Some(session);
                    true
                }
                Some(holder) => holder == session,
            }
        }))
    }

    async fn holds_lock(&mut self) -> Result<bool> {
        let session = self.session;
        Ok(self.with(|db| {
            db.calls.push("confirm lock".into());
            db.lock_holder == Some(session)
        }))
    }

    async fn unlock(&mut self) -> Result<()> {
        let session = self.session;
        self.with(|db| {
            db.calls.push("unlock".into());
            if db.fail_unlock {
                return Err(Error::history(
                    "default",
                    "connection reset while unlocking",
                ));
            }
            if db.lock_holder == Some(session) {
                db.lock_holder = None;
            }
            Ok(())
        })
    }

    async fn holder(&mut self) -> Result<Option<LockHolder>> {
        Ok(self.with(|db| {
            db.lock_holder.map(|id| {
                let mut holder = LockHolder::default();
                holder.session_id = Some(id as i64);
                holder.application = Some("dirthara migrate test:1".into());
                holder
            })
        }))
    }

    async fn wait_for_release(&mut self, max: Duration) -> Result<()> {
        tokio::time::sleep(max.min(Duration::from_millis(5))).await;
        Ok(())
    }

    fn verifies_in_step(&self) -> bool {
        self.with(|db| db.checks_lock_in_step)
    }

    fn verifies_in_marker(&self) -> bool {
        self.with(|db| db.checks_lock_in_marker)
    }

    async fn force_unlock(&mut self) -> Result<Vec<String>> {
        Ok(self.with(|db| match db.lock_holder.take() {
            Some(id) => vec![format!("session {id}")],
            None => Vec::new(),
        }))
    }
}
